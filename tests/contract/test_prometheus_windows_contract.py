"""``/metrics`` windows that are not whole, and figures that are not exact, made by the engines' own code.

- vLLM 0.33.0: two runs of ``vllm_oracle.py`` are two processes, each with its own prometheus_client registry
  (``SpecDecodingProm``'s counters and ``vllm:generation_tokens``, exposed by ``generate_latest`` with the
  default registry's process collector, as vLLM's single API server exposes them:
  vllm/v1/metrics/prometheus.py ``get_prometheus_registry``). A ``before`` scrape of the first and an
  ``after`` scrape of the second are two scrapes across a restart: the new process's counters start from zero
  and its ``process_start_time_seconds`` is another.
- llama.cpp: ``server_task_result_metrics::to_metrics`` compiled (``llamacpp_metrics.py``) writes the counts
  of a long-running server, 10^6 and more, with six significant digits.

Each checks that no figure comes from a window the engine's own output shows broken, that the part since a
restart gives the new process's figures by vLLM's formula, and that a rounded figure says so with bounds that
hold the true one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.metrics import scrape_delta
from orchestrator.metrics.prometheus import process_start
from tests.contract.llamacpp_metrics import compile_metrics, metrics_text
from tests.contract.test_vllm_contract import CURRENT, Interval, Truth, run, vllm_sources
from tests.reliability.harness import cli_env, run_cli

K = 4


def process(steps: list[list[tuple[int, int]]], name: str) -> dict[str, Any]:
    """One vLLM process: its steps (per request: drafted, accepted), one interval logged, then a scrape."""
    events: list[dict[str, Any]] = [{"op": "step", "engine": 0, "drafts": step} for step in steps]
    events += [{"op": "advance", "s": 10.0}, {"op": "log"}, {"op": "scrape", "name": name}]
    return {"k": K, "engines": [0], "model": "m", "events": events}


@pytest.fixture(scope="module")
def current() -> Path:
    return vllm_sources(CURRENT)


# The first process drafted much and accepted little; the restarted one drafts less and accepts more, so its
# accepted tokens restart above their old value while its drafts go down: the accept length 9.0.
FIRST = [[(K, 1)]] * 100
ACCEPTING = [[(K, K)]] * 30
SMALL = [[(K, 1)], [(K, 2)], [(K, 0)]] * 5


def test_a_restart_with_only_some_counters_down_gives_no_figure(current: Path) -> None:
    first = run("vllm_oracle.py", current, process(FIRST, "before"))
    second = run("vllm_oracle.py", current, process(ACCEPTING, "after"))
    before, after = first["scrapes"]["before"], second["scrapes"]["after"]
    assert process_start(before) is not None and process_start(after) not in (None, process_start(before))
    window = scrape_delta(before, after, "vllm", elapsed_s=30.0)
    assert (window.accept_len, window.acceptance_rate, window.gen_throughput, window.per_position) == (None,) * 4
    names = window.integrity.names()
    assert "restart" in names and "counter_reset" in names and "inconsistent" in names
    assert any("vllm:spec_decode_num_drafts_total" in key for key in window.resets)
    assert not any("accepted_tokens_total{" in key for key in window.resets)  # it restarted above its old value
    assert window.integrity.part is None and window.exactness == {}


def test_a_restart_every_counter_shows_gives_the_new_process_figures(current: Path) -> None:
    first = run("vllm_oracle.py", current, process(FIRST, "before"))
    second = run("vllm_oracle.py", current, process(SMALL, "after"))
    window = scrape_delta(first["scrapes"]["before"], second["scrapes"]["after"], "vllm", elapsed_s=30.0)
    assert window.integrity.names()[:2] == ["restart", "counter_reset"]
    assert window.integrity.part == "since_restart"
    truth = Truth([Interval(SMALL)]).figures(K)  # vLLM's definitions over the new process's steps alone
    assert window.accept_len == pytest.approx(truth["accept_len"], rel=1e-12)
    assert window.acceptance_rate == pytest.approx(truth["acceptance_rate"], rel=1e-12)
    assert window.per_position == pytest.approx(truth["per_position"], rel=1e-12)
    assert window.gen_throughput is None
    assert {e["kind"] for e in window.exactness.values()} == {"exact"}


def test_one_process_scraped_twice_is_whole_and_exact(current: Path) -> None:
    scenario = process(FIRST, "before")
    scenario["events"] += [{"op": "step", "engine": 0, "drafts": step} for step in SMALL]
    scenario["events"].append({"op": "scrape", "name": "after"})
    result = run("vllm_oracle.py", current, scenario)
    before, after = result["scrapes"]["before"], result["scrapes"]["after"]
    assert process_start(before) == process_start(after)
    window = scrape_delta(before, after, "vllm", elapsed_s=10.0)
    assert window.integrity.whole
    truth = Truth([Interval(SMALL)]).figures(K)
    assert window.accept_len == pytest.approx(truth["accept_len"], rel=1e-12)
    assert {e["kind"] for e in window.exactness.values()} == {"exact"}


needs_llamacpp = pytest.mark.llamacpp_tree  # skipped, with the reason, without the tree or a compiler


@pytest.fixture(scope="module")
def to_metrics(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_metrics(tmp_path_factory.mktemp("llamacpp-metrics"))


def llama(binary: Path, counts: tuple[int, int, int, int], per_position: list[int]) -> str:
    predicted, draft_tokens, accepted, drafts = counts
    return metrics_text(
        binary,
        predicted=predicted,
        draft_tokens=draft_tokens,
        accepted=accepted,
        drafts=drafts,
        per_position=per_position,
    )


@needs_llamacpp
def test_llamacpp_counts_of_a_million_are_rounded_and_bounded(to_metrics: Path) -> None:
    early, late = (7_000_001, 4_938_268, 2_469_134, 1_234_567), (7_512_345, 5_338_284, 2_769_140, 1_334_571)
    before = llama(to_metrics, early, [1_000_003, 600_001])
    after = llama(to_metrics, late, [1_080_011, 650_007])
    assert "llamacpp:spec_decode_num_drafts_total 1.23457e+06" in before  # llama.cpp's own digits
    assert 'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 1000003' in before
    window = scrape_delta(before, after, "llamacpp", elapsed_s=20.0)
    assert window.integrity.whole
    predicted, draft_tokens, accepted, drafts = (b - a for a, b in zip(early, late, strict=True))
    truth = {
        "accept_len": 1 + accepted / drafts,
        "acceptance_rate": accepted / draft_tokens,
        "gen_throughput": predicted / 20.0,
    }
    for figure, true in truth.items():
        entry = window.exactness[figure]
        assert entry["kind"] == "rounded" and entry["resolution"] == 10, figure
        low, high = entry["bounds"]
        assert low <= true <= high, figure
        assert getattr(window, figure) != pytest.approx(true, rel=1e-7), figure  # the digits lost show
    assert window.exactness["per_position_acceptance"]["kind"] == "rounded"  # its drafts are rounded
    small = scrape_delta(
        llama(to_metrics, (100, 400, 150, 100), [80, 50]), llama(to_metrics, (900, 2000, 950, 500), [400, 300]),
        "llamacpp", elapsed_s=2.0,
    )  # fmt: skip
    assert {e["kind"] for e in small.exactness.values()} == {"exact"}
    assert small.accept_len == pytest.approx(1 + 800 / 400)


@needs_llamacpp
def test_llamacpp_accepted_total_is_read_whole_from_the_per_position_counters(to_metrics: Path, tmp_path: Path) -> None:
    # As llama-server counts them (server-context.cpp update_slots): every accepted position once, so the
    # per-position counts (n_max 3 here) sum to the accepted total, and to_metrics writes them whole while the
    # total of a million or more loses its last digits. The drafts stay below 10^6: accept length is exact.
    early, late = (3_000_000, 2_000_000, 1_234_567, 500_000), (3_400_000, 2_300_003, 1_494_950, 600_001)
    before = llama(to_metrics, early, [450_000, 420_000, 364_567])
    after = llama(to_metrics, late, [540_000, 505_000, 449_950])
    assert "llamacpp:spec_decode_num_accepted_tokens_total 1.23457e+06" in before  # llama.cpp's own digits
    window = scrape_delta(before, after, "llamacpp", elapsed_s=20.0)
    accepted, drafts, draft_tokens = 1_494_950 - 1_234_567, 600_001 - 500_000, 2_300_003 - 2_000_000
    assert window.accept_len == 1 + accepted / drafts  # 3.603804, not 3.603774 from the printed total
    entry = window.exactness["accept_len"]
    assert entry["kind"] == "exact" and "per-position counters' sum" in entry["note"]
    assert window.details["accepted_source"] == "per_position_sum"
    assert window.details["accepted"] == accepted and window.details["accepted_printed"] == 1_494_950 - 1_234_570
    # The draft-token total is rounded: the rate is too, its step and bounds from that count alone.
    rate = window.exactness["acceptance_rate"]
    assert rate["kind"] == "rounded" and rate["resolution"] == 10
    assert rate["bounds"][0] <= accepted / draft_tokens <= rate["bounds"][1]
    assert window.acceptance_rate == pytest.approx(accepted / (2_300_000 - 2_000_000), rel=1e-12)
    # specsweep parse of the two saved scrapes says the same, and where the exact count came from.
    (tmp_path / "before.txt").write_text(before)
    (tmp_path / "after.txt").write_text(after)
    proc = run_cli(
        "parse", "--engine", "llamacpp", "--prometheus", str(tmp_path / "before.txt"), str(tmp_path / "after.txt"),
        "--elapsed", "20", "--json", env=cli_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["accept_len"] == 1 + accepted / drafts and data["exactness"]["accept_len"]["kind"] == "exact"
    assert data["details"]["accepted_source"] == "per_position_sum"


@needs_llamacpp
def test_llamacpp_counters_that_went_down_give_no_figure(to_metrics: Path) -> None:
    # llama.cpp exports no process start: a restart shows only as counters that went down.
    before = llama(to_metrics, (9_000, 6_000, 3_000, 1_500), [1_200, 900])
    after = llama(to_metrics, (300, 200, 100, 50), [40, 30])
    window = scrape_delta(before, after, "llamacpp", elapsed_s=2.0)
    assert (window.accept_len, window.acceptance_rate, window.gen_throughput, window.per_position) == (None,) * 4
    assert window.integrity.names() == ["counter_reset"]
