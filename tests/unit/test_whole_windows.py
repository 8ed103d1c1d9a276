"""Whole log windows (orchestrator/metrics/window.py): a window that holds a process start gives the figures of
its part after the restart only, and a vLLM line pair cut by the window's edge gives no figure.

The lines here are written in each engine's format as its source prints it (cited at each constant); the
contract tests (tests/contract/test_whole_windows_contract.py) make the same cases with the engines' own code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from orchestrator.cli.commands import parse
from orchestrator.engines.exposition import PromWindow
from orchestrator.engines.registry import get_engine
from orchestrator.engines.sglang.samples import SglangDecodeSample
from orchestrator.engines.vllm.log import parse_vllm
from orchestrator.engines.vllm.samples import VllmEngineSample, VllmSpecSample
from orchestrator.metrics import parse_window
from orchestrator.metrics.window import drop_first_lines, drop_window_edges, process_starts

# sglang/srt/entrypoints/engine.py Engine._launch_subprocesses: logger.info(f"server_args={...}") (0.5.23, a dict;
# 0.5.10 f"{server_args=}"), behind utils/common.py configure_logger's "[%Y-%m-%d %H:%M:%S] ".
SGLANG_START = "[2026-05-30 00:40:{s:02d}] server_args={{'model_path': 'm', 'speculative_num_draft_tokens': {k}}}"
SGLANG_START_OLD = "[2026-05-30 00:40:{s:02d}] server_args=ServerArgs(model_path='m', speculative_num_draft_tokens={k})"
# managers/scheduler_components/metrics_reporter.py report_decode_stats (0.5.23)
DECODE = (
    "[2026-05-30 00:40:{s:02d}] Decode batch, #running-req: 4, #token: 1234, token usage: 0.01, accept len: {a:.2f}, "
    "accept rate: 0.50, cuda graph: True, gen throughput (token/s): {g:.2f}, #queue-req: 0"
)
# vllm/logger.py _FORMAT; v1/metrics/loggers.py LoggingStatLogger.log; v1/spec_decode/metrics.py SpecDecodingLogging
PREFIX = "(APIServer pid={pid}) INFO 05-30 00:40:{s:02d} [{f}] "
ENGINE = (
    "Engine {e:03d}: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: {g:.1f} tokens/s, Running: 4 "
    "reqs, Waiting: 0 reqs, GPU KV cache usage: 1.5%"
)
SPEC = (
    "SpecDecoding metrics: Mean acceptance length: {m:.2f}, Accepted throughput: {at:.2f} tokens/s, Drafted "
    "throughput: {dt:.2f} tokens/s, Accepted: {a} tokens, Drafted: {d} tokens, Per-position acceptance rate: {pp}, "
    "Avg Draft acceptance rate: {r:.1f}%"
)
# entrypoints/common/startup.py log_version_and_model, the plain form (0.33.0)
VLLM_BANNER = "vLLM server version 0.33.0, serving model m"
# The llama.cpp tree of llama-cpp-python 0.3.36 (tests/data/llamacpp/*.log): tools/server/server.cpp, common/common.cpp
LLAMA_START = (
    "0.00.012.734 I srv  llama_server: initializing ...\n"
    "0.00.014.738 I cmn  common_param: common_params_print_info: verbosity = 3 (adjust with the `-lv N` CLI arg)\n"
)


def sglang_lines(start: int, accepts: list[float], throughput: float = 100.0) -> list[str]:
    return [DECODE.format(s=start + i, a=a, g=throughput) for i, a in enumerate(accepts)]


def vllm_pair(s: int, *, e: int = 0, drafts: int = 100, accepted: int = 150, k: int = 3, pid: int = 7) -> list[str]:
    """One engine's interval: its Engine line and its spec line, each of ``drafts`` drafts of k tokens; the
    per-position counts are those of chains accepting ``accepted`` tokens as evenly as they can."""
    per = [min(drafts, max(0, accepted - drafts * i)) for i in range(k)]
    rates = ", ".join(f"{c / drafts:.3f}" for c in per)
    drafted = drafts * k
    return [
        PREFIX.format(pid=pid, s=s, f="loggers.py:335") + ENGINE.format(e=e, g=(accepted + drafts) / 10),
        PREFIX.format(pid=pid, s=s, f="metrics.py:120")
        + SPEC.format(
            m=1 + accepted / drafts,
            at=accepted / 10,
            dt=drafted / 10,
            a=accepted,
            d=drafted,
            pp=rates,
            r=100 * accepted / drafted,
        ),
    ]


def text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


# -- process starts ---------------------------------------------------------------------------------------------


def test_each_engine_names_the_lines_it_prints_once_per_start() -> None:
    sglang, vllm, llama = get_engine("sglang"), get_engine("vllm"), get_engine("llamacpp")
    assert get_engine("sim").start_patterns == sglang.start_patterns
    for line in (SGLANG_START.format(s=0, k=4), SGLANG_START_OLD.format(s=0, k=4)):
        assert [s.line for s in process_starts(sglang, line + "\n")] == [1]
    logo = PREFIX.format(pid=7, s=0, f="startup.py:38") + " ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.33.0\r"
    for line in (
        PREFIX.format(pid=7, s=0, f="startup.py:40") + VLLM_BANNER,
        "INFO 05-30 00:40:00 [api_server.py:1395] vLLM API server version 0.9.2",
        logo,
    ):
        assert len(process_starts(vllm, line + "\n")) == 1, line
    starts = process_starts(llama, LLAMA_START)
    assert len(starts) == 1 and len(starts[0].lines) == 2  # two lines, one start
    # Lines that only look alike are no start: a Decode line, the load_model "initializing, n_slots" line.
    assert process_starts(sglang, text(sglang_lines(0, [3.0]))) == []
    assert process_starts(llama, "0.12.589 I srv    load_model: initializing, n_slots = 4, n_ctx_slot = 8\n") == []


def test_a_new_pid_in_vllms_prefix_is_a_new_process() -> None:
    vllm = get_engine("vllm")
    one = text(vllm_pair(0) + vllm_pair(10))
    assert process_starts(vllm, one) == []  # one process, however many lines
    two = text(vllm_pair(0) + vllm_pair(10, pid=8))
    starts = process_starts(vllm, two)
    assert [s.line for s in starts] == [3] and "pid 7 before" in starts[0].lines[0]
    # The new process's banner (its first line, with the new pid) and its next lines are one start.
    banner = PREFIX.format(pid=8, s=9, f="startup.py:40") + VLLM_BANNER
    loading = PREFIX.format(pid=8, s=9, f="launcher.py:368") + "non-default args: {'model': 'm'}"
    both = text([*vllm_pair(0), banner, loading, *vllm_pair(10, pid=8)])
    offsets = sorted(parse_vllm(both).status)
    starts = process_starts(vllm, both, offsets)
    assert [s.line for s in starts] == [3] and VLLM_BANNER in starts[0].lines[0]


def test_the_same_start_line_twice_is_two_starts_even_without_lines_between() -> None:
    sglang = get_engine("sglang")
    starts = process_starts(sglang, text([SGLANG_START.format(s=0, k=4), SGLANG_START.format(s=5, k=4)]))
    assert [s.line for s in starts] == [1, 2]


# -- a restart inside a window -----------------------------------------------------------------------------------


def test_a_restart_inside_a_cut_window_gives_the_part_after_it_without_its_start_up_line() -> None:
    old = sglang_lines(0, [3.9, 4.0, 4.1], throughput=2900.0)
    new = sglang_lines(20, [2.2, 2.5, 2.5], throughput=2880.0)
    new[0] = DECODE.format(s=20, a=2.2, g=229.0)  # the first line's interval began at scheduler init
    window = parse_window("sglang", text([*old, SGLANG_START.format(s=10, k=3), *new]), cut=True)
    assert window.integrity.names() == ["restart"] and window.integrity.part == "since_restart"
    detail = window.integrity.reasons[0]["detail"]
    assert "line 4: sglang: [2026-05-30 00:40:10] server_args=" in detail
    assert window.accept_len == pytest.approx(2.5) and window.gen_throughput == pytest.approx(2880.0)
    assert window.details["startup_lines_dropped"] == 1 and window.details["restart"]["part_from_line"] == 4
    assert [s.accept_len for s in window.samples if isinstance(s, SglangDecodeSample)] == [2.2, 2.5, 2.5]
    assert window.lines_total == 7 and window.lines_matched == 6  # the line counts are the whole window's
    described = window.integrity.describe()
    assert described is not None and described.startswith("window not whole: restart: the server started again")
    assert described.endswith("(figures from the since restart part only)")
    # Without the start line, the same text is one process: its edge line left out, everything else kept.
    plain = parse_window("sglang", text(old + new), cut=True)
    assert plain.integrity.whole and plain.accept_len != pytest.approx(2.5)


def test_nothing_after_the_start_up_line_means_no_figure() -> None:
    lines = [*sglang_lines(0, [3.0, 3.0]), SGLANG_START.format(s=10, k=3), *sglang_lines(20, [2.0])]
    window = parse_window("sglang", text(lines), cut=True)
    assert window.accept_len is None and window.gen_throughput is None
    assert window.integrity.names() == ["restart"] and window.integrity.part is None
    assert (window.integrity.describe() or "").endswith("(no figures)")


def test_a_whole_log_from_its_start_is_one_process_and_two_starts_are_a_restart() -> None:
    first = [SGLANG_START.format(s=0, k=4), *sglang_lines(1, [3.0, 3.5])]
    whole = parse_window("sglang", text(first))
    assert whole.integrity.whole and whole.accept_len is not None
    restarted = parse_window("sglang", text([*first, SGLANG_START.format(s=9, k=3), *sglang_lines(10, [2.0, 2.5])]))
    assert restarted.integrity.names() == ["restart"] and restarted.accept_len == pytest.approx(2.5)
    assert "2 process starts in the log" in restarted.integrity.reasons[0]["detail"]
    # One start after the log's metric lines: the lines before belong to another process.
    late = parse_window(
        "sglang", text([*sglang_lines(0, [3.0, 3.5]), SGLANG_START.format(s=9, k=3), *sglang_lines(10, [2.0, 2.5])])
    )
    assert late.integrity.names() == ["restart"] and late.accept_len == pytest.approx(2.5)


def test_a_vllm_restart_by_pid_and_banner() -> None:
    banner = PREFIX.format(pid=8, s=15, f="startup.py:40") + VLLM_BANNER
    lines = vllm_pair(0, accepted=290) + vllm_pair(10, accepted=290) + [banner]
    lines += vllm_pair(20, pid=8, accepted=50) + vllm_pair(30, pid=8, accepted=120) + vllm_pair(40, pid=8, accepted=140)
    window = parse_window("vllm", text(lines), cut=True)
    assert window.integrity.names() == ["restart"]
    assert window.accept_len == pytest.approx(1 + (120 + 140) / 200)  # the new process's, its first left out
    # The pid alone tells it too (a log whose banner was not captured).
    no_banner = parse_window("vllm", text([line for line in lines if line != banner]), cut=True)
    assert no_banner.integrity.names() == ["restart"] and no_banner.accept_len == pytest.approx(window.accept_len)


def test_a_llamacpp_restart_keeps_the_requests_of_the_new_process() -> None:
    # tools/server/server-context.cpp print_timings (the vendored tree), one request each side of the restart.
    def request(task: int, accepted: int, generated: int, mean: float) -> str:
        head = f"0.26.775.504 I slot print_timing: id  3 | task {task} | "
        return (
            f"{head}prompt eval time =     270.77 ms /    13 tokens (   20.83 ms per token,    48.01 tokens per "
            "second)\n"
            f"{head}       eval time =   13664.87 ms /   128 tokens (  107.60 ms per token,     9.29 tokens per "
            "second)\n"
            f"{head}      total time =   13935.64 ms /   141 tokens\n"
            f"{head}draft acceptance = {accepted / generated:0.5f} ({accepted:5d} accepted / {generated:5d} "
            f"generated), mean len = {mean:5.2f}\n"
        )

    log = LLAMA_START + request(1, 80, 160, 3.0) + LLAMA_START + request(1, 30, 160, 1.5)
    window = parse_window("llamacpp", log)
    assert window.integrity.names() == ["restart"]
    assert window.acceptance_rate == pytest.approx(30 / 160)
    assert window.accept_len == pytest.approx(1.5, abs=0.005)


# -- vLLM pairs cut by the window's edge -------------------------------------------------------------------------


def test_a_window_cut_between_an_engine_line_and_its_spec_line_drops_the_orphan_not_the_first_pair() -> None:
    # The previous point's interval: its Engine line before the cursor, its spec line after it.
    previous = vllm_pair(0, accepted=30)[1]
    lines = [previous, *vllm_pair(10, accepted=195), *vllm_pair(20, accepted=195), *vllm_pair(30, accepted=195)]
    window = parse_window("vllm", text(lines), cut=True)
    assert window.accept_len == pytest.approx(2.95)  # the window's own three intervals
    # The rule before: the orphan kept as a group of its own, the first real line dropped as the edge.
    assert window.accept_len != pytest.approx(1 + (30 + 195 * 2) / 300)
    assert window.integrity.names() == ["cut_pair"] and window.integrity.part == "whole_pairs"
    assert "printed before the window began" in window.integrity.reasons[0]["detail"]
    spec = [s for s in window.samples if isinstance(s, VllmSpecSample)]
    assert spec[0].cut_pair and spec[0].engine_index == 0 and not any(s.cut_pair for s in spec[1:])


def test_under_dp_the_orphan_is_the_edge_of_the_engine_printed_before_the_first_engine_line() -> None:
    # A round prints engine 0's pair, then engine 1's (PerEngineStatLoggerAdapter.log). Cut after E0: the
    # window opens on S0 (engine 0's edge), then E1 S1 (engine 1's edge: its interval began before the window).
    lines = [vllm_pair(0, e=0, accepted=10)[1], *vllm_pair(0, e=1, accepted=20)]
    for s in (10, 20):
        lines += vllm_pair(s, e=0, accepted=190) + vllm_pair(s, e=1, accepted=170)
    window = parse_window("vllm", text(lines), cut=True)
    spec = [s for s in window.samples if isinstance(s, VllmSpecSample)]
    assert [s.engine_index for s in spec] == [0, 1, 0, 1, 0, 1]
    # Engine 0: both its real lines (the orphan was its edge); engine 1: its lines after its first (its edge).
    assert window.accept_len == pytest.approx(1 + (190 * 2 + 170 * 2) / 400)
    assert window.details["edge_lines_dropped"] >= 2


def test_a_window_that_ends_between_the_two_lines_keeps_the_whole_pairs() -> None:
    lines = vllm_pair(0, accepted=100) + vllm_pair(10, accepted=195) + vllm_pair(20, accepted=195)
    lines += [vllm_pair(30, accepted=20)[0]]  # its spec line falls after the window's end
    window = parse_window("vllm", text(lines), cut=True)
    engines = [s for s in window.samples if isinstance(s, VllmEngineSample)]
    assert engines[-1].cut_pair and not any(s.cut_pair for s in engines[:-1])
    assert window.accept_len == pytest.approx(2.95)
    assert window.integrity.names() == ["cut_pair"]
    assert "printed after the window ended" in window.integrity.reasons[0]["detail"]


def test_a_window_closed_on_its_tick_keeps_a_last_interval_without_drafts_whole() -> None:
    # The real vLLM's NGRAM point in CI: the tick that closed the window (after the reader waited for the lines
    # printed with it) covered the load's last steps, which generated tokens without a draft (no n-gram matched:
    # no SpecDecoding line). From the text alone that looks like a cut pair; the reader knows it is not.
    lines = vllm_pair(0, accepted=100) + vllm_pair(10, accepted=195) + vllm_pair(20, accepted=195)
    lines += [vllm_pair(30, accepted=20)[0]]
    guessed = parse_window("vllm", text(lines), cut=True, aligned=True)
    assert guessed.integrity.names() == ["cut_pair"]
    closed = parse_window("vllm", text(lines), cut=True, aligned=True, closed=True)
    assert closed.integrity.whole, closed.integrity.reasons
    assert not any(getattr(s, "cut_pair", None) for s in closed.samples)
    # the same figures either way: the tail Engine line carries no draft count
    assert closed.accept_len == pytest.approx(guessed.accept_len)
    # a pair cut at the window's start is still cut when its end was closed on a tick
    head = parse_window("vllm", text([vllm_pair(0, accepted=30)[1], *lines]), cut=True, closed=True)
    assert head.integrity.names() == ["cut_pair"]
    assert "printed before the window began" in head.integrity.reasons[0]["detail"]


def test_engine_lines_without_spec_lines_are_no_cut_pair() -> None:
    # An autoregressive server prints Engine lines only; an idle last interval prints no spec line either.
    ar = [PREFIX.format(pid=7, s=s, f="loggers.py:335") + ENGINE.format(e=0, g=90.0) for s in (0, 10, 20)]
    assert parse_window("vllm", text(ar), cut=True).integrity.whole
    idle = vllm_pair(0) + vllm_pair(10) + [PREFIX.format(pid=7, s=20, f="loggers.py:335") + ENGINE.format(e=0, g=0.0)]
    assert parse_window("vllm", text(idle), cut=True).integrity.whole
    # Spec lines alone (a log filtered to them) pair nothing.
    only = [vllm_pair(s)[1] for s in (0, 10, 20)]
    assert parse_window("vllm", text(only), cut=True).integrity.whole


def test_the_edge_rules_on_their_own() -> None:
    def spec(index: int | None, cut: bool = False) -> VllmSpecSample:
        return VllmSpecSample(engine_index=index, cut_pair="cut" if cut else None)

    orphan, a, b, c = spec(0, cut=True), spec(0), spec(0), spec(1)
    kept, dropped, edge_kept = drop_window_edges([orphan, a, b, c])
    assert kept == [a, b, c] and (dropped, edge_kept) == (1, 1)  # group 1's only line keeps its edge
    alone = spec(0, cut=True)
    assert drop_window_edges([alone]) == ([], 1, 0)
    kept, dropped, _ = drop_first_lines([a, b, c])
    assert kept == [b] and dropped == 2


# -- specsweep parse ---------------------------------------------------------------------------------------------


@pytest.fixture
def app() -> typer.Typer:
    application = typer.Typer()
    parse.register(application)

    @application.callback()
    def _root() -> None:
        """specsweep"""

    return application


def test_parse_prints_the_whole_part_and_one_warning_line(app: typer.Typer, tmp_path: Path) -> None:
    log = tmp_path / "restarted.log"
    lines = [SGLANG_START.format(s=0, k=8), *sglang_lines(1, [4.0, 4.0])]
    log.write_text(text([*lines, SGLANG_START.format(s=9, k=3), *sglang_lines(10, [2.0, 2.5])]))
    done = CliRunner().invoke(app, ["parse", "--engine", "sglang", str(log), "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["accept_len"] == pytest.approx(2.5) and data["integrity"]["part"] == "since_restart"
    assert "exactness" in data and data["warnings"] == [data["warnings"][0]]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {data['warnings'][0]}"] and "restart: 2 process starts" in warnings[0]
    table = CliRunner().invoke(app, ["parse", "--engine", "sglang", str(log)])
    assert table.exit_code == 0 and "2.5" in table.stdout
    assert sum(line.startswith("warning:") for line in table.stderr.splitlines()) == 1


def test_parse_prometheus_warns_with_the_windows_reason(
    app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the /metrics source says of its window is its own (scrape_delta); the command prints it.
    broken = PromWindow(engine="vllm")
    broken.integrity.broken("counter_reset", "vllm:spec_decode_num_drafts_total went down")
    monkeypatch.setattr(parse, "scrape_delta", lambda *args, **kwargs: broken)
    before, after = tmp_path / "before", tmp_path / "after"
    before.write_text("")
    after.write_text("")
    done = CliRunner().invoke(app, ["parse", "--engine", "vllm", "--prometheus", str(before), str(after), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["integrity"]["reasons"][0]["reason"] == "counter_reset"
    assert done.stderr.strip() == (
        "warning: window not whole: counter_reset: vllm:spec_decode_num_drafts_total went down (no figures)"
    )


# systemd 252 src/core/job.c job_emit_done_message: "Started %s." in the unit's journal, once per start.
SYSTEMD_STARTED = "May 30 00:40:20 host systemd[1]: Started sglang.service - SGLang server."


@pytest.mark.parametrize("journal", [True, False], ids=["short", "message_only"])
def test_two_instances_in_a_saved_journal_are_split_at_systemds_start_line(journal: bool) -> None:
    # Issue 58: two server instances in one saved journal, no server_args line of either in it (the journal was
    # saved from a time after the first start), were blended into one accept length.
    started = SYSTEMD_STARTED if journal else SYSTEMD_STARTED.split(": ", 1)[1]
    log = text([*sglang_lines(1, [2.72] * 4), started, *sglang_lines(21, [1.76] * 4)])
    wm = parse_window("sglang", log)
    assert wm.accept_len == pytest.approx(1.76)
    assert wm.integrity.part == "since_restart"
    assert "restart" in wm.integrity.names()
    parts = wm.details["restart"]["parts"]
    assert [p["accept_len"] for p in parts] == [pytest.approx(2.72), pytest.approx(1.76)]
    assert [p["from_line"] for p in parts] == [1, 5]
    assert "details.restart.parts" in wm.integrity.describe()


def test_each_process_of_a_log_with_two_server_args_lines_has_its_own_figures() -> None:
    log = text(
        [
            SGLANG_START.format(s=0, k=4),
            *sglang_lines(1, [2.0, 2.72, 2.72]),
            SGLANG_START.format(s=20, k=2),
            *sglang_lines(21, [3.0, 1.76, 1.76]),
        ]
    )
    parts = parse_window("sglang", log).details["restart"]["parts"]
    # each process's first line spans its start-up and is left out, as in the part after the last start
    assert [p["accept_len"] for p in parts] == [pytest.approx(2.72), pytest.approx(1.76)]
    assert all(p["started_in_text"] for p in parts)


def test_a_session_scope_starting_is_no_server_start() -> None:
    scope = "May 30 00:40:20 host systemd[1]: Started session-42.scope - Session 42 of User root."
    wm = parse_window("sglang", text([*sglang_lines(1, [2.72] * 4), scope, *sglang_lines(21, [1.76] * 4)]))
    assert wm.integrity.whole and "restart" not in wm.details
