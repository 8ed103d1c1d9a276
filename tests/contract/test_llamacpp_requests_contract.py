"""llama.cpp's own code makes a log whose requests do not all end in a timing block, and the ``/metrics`` of the
same requests; specsweep must read the log as the engine's counters count it, or say it cannot.

- A saved log that begins after a request's launch (``launch_slot_: ... processing task``) but holds its timing
  block: the engine counted that request when its slot was released inside the log's span, so a log read whole
  keeps it (acceptance rate 0.6515, not 0.6471, in the held-out log of issue 49); only a sweep's window, cut after
  a scrape that already counted a request whose lines reached the journal late, leaves such a request out.
- A request cancelled in flight: ``server_slot::release`` logs ``stop processing`` without ``print_timings``
  (server-context.cpp ``SERVER_TASK_TYPE_CANCEL``), while ``callback_on_reset`` adds its drafts to the counters
  (``metrics_on_prediction``): the log's figures are partial, not whole and exact.

The lines come from ``llamacpp_requests.py`` (llama.cpp's ``SLT_INF`` statements and ``print_timings``, compiled),
the counters from ``llamacpp_metrics.py`` (``server_task_result_metrics::to_metrics``, compiled).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from orchestrator.metrics import parse_window, scrape_delta
from tests.contract.llamacpp_metrics import compile_metrics, harness_source, metrics_text
from tests.contract.llamacpp_requests import Request, compile_requests, request_lines
from tests.reliability.harness import cli_env, run_cli

pytestmark = pytest.mark.llamacpp_tree  # skipped, with the reason, without the tree or a compiler

N_MAX = 4


@pytest.fixture(scope="module")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("llamacpp-requests")
    return compile_requests(work), compile_metrics(work)


def counters(binary: Path, requests: list[Request]) -> tuple[float | None, float | None]:
    """(accept length, acceptance rate) of llama.cpp's /metrics counters over every request (each one released:
    metrics_on_prediction adds its drafts whether it finished or was cancelled)."""
    steps = [step for req in requests for step in req.steps]
    per_position = [sum(1 for _, a in steps if a > i) for i in range(N_MAX)]
    before = metrics_text(binary, predicted=0, draft_tokens=0, accepted=0, drafts=0, per_position=[0] * N_MAX)
    after = metrics_text(
        binary,
        predicted=sum(a + 1 for _, a in steps),
        draft_tokens=sum(d for d, _ in steps),
        accepted=sum(a for _, a in steps),
        drafts=len(steps),
        per_position=per_position,
    )
    window = scrape_delta(before, after, "llamacpp", elapsed_s=10.0)
    return window.accept_len, window.acceptance_rate


# Accepted of drafted per step; the first request's launch is before the saved log begins.
EARLY = Request([(4, 4), (4, 4), (4, 3), (4, 4)] * 5, launch_logged=False)
OTHERS = [
    Request([(4, 2), (4, 3), (4, 1), (4, 4)] * 6),
    Request([(4, 1), (4, 0), (4, 2)] * 7),
    Request([(4, 3), (4, 4), (4, 2), (4, 1), (4, 3)] * 4),
]


def test_a_saved_log_read_whole_keeps_a_request_launched_before_it(binaries: tuple[Path, Path]) -> None:
    lines, metrics = binaries
    requests = [EARLY, *OTHERS]
    text = request_lines(lines, requests, n_max=N_MAX)
    assert "task 1 | processing task" not in text and "task 2 | processing task" in text
    accept_len, rate = counters(metrics, requests)
    whole = parse_window("llamacpp", text)  # as `specsweep parse` reads a saved log
    assert whole.details["requests_started_before"] == 0
    assert whole.acceptance_rate == pytest.approx(rate, rel=1e-12)
    assert whole.accept_len == pytest.approx(accept_len, rel=1e-12)
    assert whole.exactness["acceptance_rate"]["kind"] == "exact"
    # A sweep's window (cut after the scrape before it) still leaves out a request launched before it.
    cut = parse_window("llamacpp", text, cut=True)
    assert cut.details["requests_started_before"] == 1
    assert cut.acceptance_rate == pytest.approx(counters(metrics, OTHERS)[1], rel=1e-12)


def test_a_request_cancelled_in_flight_makes_the_logs_figures_partial(
    binaries: tuple[Path, Path], tmp_path: Path
) -> None:
    lines, metrics = binaries
    cancelled = Request([(4, 0), (4, 1), (4, 0), (4, 0)] * 3, finished=False)
    requests = [OTHERS[0], cancelled, OTHERS[1], OTHERS[2]]
    text = request_lines(lines, requests, n_max=N_MAX)
    assert text.count("stop processing") == 4 and text.count("draft acceptance") == 3
    accept_len, rate = counters(metrics, requests)
    assert rate is not None and accept_len is not None
    shown_len, shown_rate = counters(metrics, [OTHERS[0], OTHERS[1], OTHERS[2]])
    # What the log alone gives is not the engine's figure.
    assert shown_len != pytest.approx(accept_len) and shown_rate != pytest.approx(rate)
    window = parse_window("llamacpp", text)
    assert (window.accept_len, window.acceptance_rate) == (None, None)
    assert window.details["requests_unlogged"] == 1
    assert window.details["accept_len_partial"] == pytest.approx(shown_len, rel=1e-12)
    assert window.details["acceptance_rate_partial"] == pytest.approx(shown_rate, rel=1e-12)
    assert window.integrity.names() == ["unlogged_requests"]
    assert "accept_len" not in window.exactness and "acceptance_rate" not in window.exactness
    assert "unlogged_requests" in window.definitions or "unlogged_requests" in json.dumps(window.definitions)
    # `specsweep parse` says so too.
    path = tmp_path / "llama.log"
    path.write_text(text)
    proc = run_cli("parse", str(path), "--engine", "llamacpp", "--json", env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["accept_len"] is None and out["integrity"]["whole"] is False
    assert "unlogged_requests" in proc.stderr
    # A log where every request finished stays whole and exact.
    clean = parse_window("llamacpp", request_lines(lines, OTHERS, n_max=N_MAX))
    assert clean.integrity.whole and clean.accept_len == pytest.approx(shown_len, rel=1e-12)


# ------------------------------------------------------------------------ a restart only n_tokens_max shows


def compile_metrics_with_max(work: Path) -> Path:
    """llamacpp_metrics.py's program, with ``server_metrics::n_tokens_max`` (std::max of every slot's tokens in
    server-context.cpp ``metrics_post_decode``) set from a sixth number, as ``to_metrics`` writes it."""
    source = harness_source().replace(
        "    std::fputs(res.to_metrics().c_str(), stdout);",
        "    unsigned long long n_max = 0;\n"
        '    if (std::scanf("%llu", &n_max) == 1) res.metrics.n_tokens_max = n_max;\n'
        "    std::fputs(res.to_metrics().c_str(), stdout);",
    )
    assert "res.metrics.n_tokens_max = n_max" in source
    binary = work / f"to-metrics-max-{hashlib.sha256(source.encode()).hexdigest()[:16]}"
    if not binary.exists():
        path = binary.with_suffix(".cpp")
        path.write_text(source)
        subprocess.run(["c++", "-std=c++17", "-O1", "-o", str(binary), str(path)], check=True, capture_output=True)
    return binary


def scrape(binary: Path, counts: tuple[int, int, int, int], per_position: list[int], n_tokens_max: int) -> str:
    numbers = [*counts, len(per_position), *per_position, n_tokens_max]
    done = subprocess.run([str(binary)], input=" ".join(map(str, numbers)) + "\n", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_restart_only_the_running_maximum_shows_gives_no_figure(tmp_path: Path) -> None:
    """The first process served short requests; a new one (a restart between the scrapes: llama-server exports
    no start time) served more and longer ones, so every counter ends above its old value and only
    ``n_tokens_max``, which one process never lowers, went down."""
    binary = compile_metrics_with_max(tmp_path)
    before = scrape(binary, (400, 600, 300, 200), [150, 100, 50, 0], n_tokens_max=900)
    after = scrape(binary, (1000, 1600, 1300, 400), [400, 350, 300, 250], n_tokens_max=300)
    assert "llamacpp:n_tokens_max 900" in before and "llamacpp:n_tokens_max 300" in after
    window = scrape_delta(before, after, "llamacpp", elapsed_s=30.0)
    assert (window.accept_len, window.acceptance_rate, window.gen_throughput) == (None, None, None)
    assert "restart" in window.integrity.names()
    assert any("n_tokens_max" in r["detail"] for r in window.integrity.reasons)
    # One process scraped twice: its maximum only grows, the window is whole.
    later = scrape(binary, (1000, 1600, 1300, 400), [400, 350, 300, 250], n_tokens_max=900)
    whole = scrape_delta(before, later, "llamacpp", elapsed_s=30.0)
    assert whole.integrity.whole and whole.accept_len == pytest.approx(1 + 1000 / 200)
