"""SGLang ``Decode batch`` lines (every variant in DOMAIN.md) and their per-window aggregation."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.engines.sglang.log import aggregate_sglang, parse_decode_line, parse_sglang
from orchestrator.metrics import parse_window

DATA = Path(__file__).resolve().parent.parent / "data" / "logs"

# Written from the format strings of sglang 0.5.23 srt/managers/scheduler_components/metrics_reporter.py
# (report_decode_stats) and older srt/managers/scheduler_metrics_mixin.py; tests/contract runs the real code.
CURRENT = (
    "Decode batch, #running-req: 1, #token: 1234, token usage: 0.01, accept len: 3.52, accept rate: 0.63, "
    "cuda graph: True, gen throughput (token/s): 86.12, #queue-req: 0, "
)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            CURRENT,
            {
                "running_req": 1,
                "accept_len": 3.52,
                "accept_rate": 0.63,
                "gen_throughput": 86.12,
                "graph": "cuda",
                "graph_used": True,
                "token": 1234,
                "queue_req": 0,
            },
            id="current",
        ),
        pytest.param(
            "Decode batch. #running-req: 4, #token: 900, token usage: 0.03, gen throughput (token/s): 310.50, "
            "#queue-req: 2, ",
            {"running_req": 4, "accept_len": None, "gen_throughput": 310.5, "queue_req": 2},
            id="period-no-spec",
        ),
        pytest.param(
            "Decode batch. #running-req: 2, #token: 500, token usage: 0.01, accept len: 2.41, gen throughput "
            "(token/s): 120.00, #queue-req: 0, ",
            {"running_req": 2, "accept_len": 2.41, "accept_rate": None, "gen_throughput": 120.0},
            id="no-accept-rate",
        ),
        pytest.param(
            "Decode batch [1520], #running-req: 8, #token: 4000, token usage: 0.05, accept len: 3.10, accept rate: "
            "0.52, cuda graph: True, gen throughput (token/s): 640.00, #queue-req: 0, ",
            {"iteration": 1520, "running_req": 8, "accept_len": 3.1},
            id="forward-iter",
        ),
        pytest.param(
            "Decode batch, #running-req: 1, #token: 64, token usage: 0.00, cpu graph: False, gen throughput "
            "(token/s): 9.87, #queue-req: 0, ",
            {"graph": "cpu", "graph_used": False, "gen_throughput": 9.87},
            id="cpu-graph",
        ),
        pytest.param(
            "Decode batch, #running-req: 1, #token: 64, token usage: 0.00, accept len: 1.80, accept rate: 0.40, "
            "npu graph: True, gen throughput (token/s): 40.00, #queue-req: 0, ",
            {"graph": "npu", "graph_used": True, "accept_len": 1.8},
            id="npu-graph",
        ),
        pytest.param(
            "Decode batch, #running-req: 3, #full token: 3000, full token usage: 0.10, #swa token: 800, swa token "
            "usage: 0.20, accept len: 2.90, accept rate: 0.48, cuda graph: True, gen throughput (token/s): "
            "250.00, #queue-req: 1, ",
            {
                "running_req": 3,
                "token": None,
                "accept_len": 2.9,
                "queue_req": 1,
                "extra": {"#full token": 3000, "full token usage": 0.1, "#swa token": 800, "swa token usage": 0.2},
            },
            id="hybrid-swa",
        ),
        pytest.param(
            "Decode batch, #running-req: 3, #full token: 3000, full token usage: 0.10, mamba num: 3, mamba usage: "
            "0.01, cuda graph: True, gen throughput (token/s): 250.00, #queue-req: 1, ",
            {"extra": {"#full token": 3000, "full token usage": 0.1, "mamba num": 3, "mamba usage": 0.01}},
            id="hybrid-mamba",
        ),
        pytest.param(
            "Decode batch, #running-req: 1, #token: 1234, token usage: 0.01, accept len: 3.52, accept rate: 0.63, "
            "cuda graph: True, gen throughput (token/s): 86.12, #queue-req: 0",
            {"accept_len": 3.52, "queue_req": 0},
            id="no-trailing-comma",
        ),
        pytest.param(
            "Decode batch, #running-req: 2, #token: 100, token usage: 0.00, accept len: 3.00, accept rate: 0.50, "
            "pre-allocated usage: 0.10, #prealloc-req: 0, #transfer-req: 1, #retracted-req: 0, cuda graph: True, "
            "gen throughput (token/s): 99.00, #queue-req: 0, est. decode TFLOPS/s (per GPU): 1.20, est. read BW "
            "(GB/s per GPU): 800.00, est. write BW (GB/s per GPU): 3.00, fwd occupancy: 91.50%",
            {
                "accept_len": 3.0,
                "gen_throughput": 99.0,
                "extra": {
                    "pre-allocated usage": 0.1,
                    "#prealloc-req": 0,
                    "#transfer-req": 1,
                    "#retracted-req": 0,
                    "est. decode TFLOPS/s (per GPU)": 1.2,
                    "est. read BW (GB/s per GPU)": 800.0,
                    "est. write BW (GB/s per GPU)": 3.0,
                    "fwd occupancy": 91.5,
                },
            },
            id="disagg-and-mfu-fields",
        ),
        pytest.param(
            "Decode batch. #running-req: 2, #token: 500, token usage: 0.01, accept-len 2.75, accept-ratio 0.44, "
            "gen throughput (token/s): 77.70, #queue-req: 0, ",
            {"accept_len": 2.75, "accept_rate": 0.44},
            id="fork-accept-len",
        ),
        pytest.param(
            "Decode batch, #running-req: 1, #token: 10, token usage: 0.00, accept len: nan, accept rate: nan, "
            "cuda graph: True, gen throughput (token/s): 0.00, #queue-req: 0, ",
            {"accept_len": None, "accept_rate": None, "gen_throughput": 0.0},
            id="nan-values-are-none",
        ),
    ],
)
def test_decode_line_variants(body: str, expected: dict[str, object]) -> None:
    sample = parse_decode_line(body)
    assert sample is not None
    for key, value in expected.items():
        assert getattr(sample, key) == value, key


@pytest.mark.parametrize(
    "prefix",
    [
        pytest.param("", id="bare"),
        pytest.param("[2026-05-30 00:39:10 TP0] ", id="sglang-logger"),
        pytest.param("[2026-05-30 00:39:10 DP1 TP5] ", id="dp-tp"),
        pytest.param("2026-05-30T00:39:10+0000 gpu-box python3[4101]: [2026-05-30 00:39:10 TP0] ", id="short-iso"),
        pytest.param("May 30 00:39:10 gpu-box sglang[4101]: [2026-05-30 00:39:10] ", id="short-no-rank"),
        pytest.param("2026-05-30 00:39:10,123 - sglang.srt.managers.scheduler - INFO - ", id="python-logging"),
    ],
)
def test_decode_line_behind_any_prefix(prefix: str) -> None:
    result = parse_sglang(prefix + CURRENT + "\n")
    assert (result.matched, result.skipped) == (1, 0)
    assert result.samples[0].accept_len == 3.52  # type: ignore[attr-defined]


def test_json_export_line_is_read_up_to_the_message_end() -> None:
    line = '{"__CURSOR":"s=abc","PRIORITY":"6","MESSAGE":"[2026-05-30 00:39:10 TP0] ' + CURRENT + '","_PID":"4101"}'
    result = parse_sglang(line)
    assert result.matched == 1
    sample = result.samples[0]
    assert (sample.accept_len, sample.queue_req, sample.ranks) == (3.52, 0, "TP0")  # type: ignore[attr-defined]


def test_prefill_and_access_log_lines_are_not_decode_samples() -> None:
    text = (
        "[2026-05-30 00:39:01 TP0] Prefill batch, #new-seq: 1, #new-token: 812, #cached-token: 0, token usage: "
        "0.00, #running-req: 0, #queue-req: 0, \n"
        'INFO:     127.0.0.1:53400 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        "[2026-05-30 00:39:01 TP0] Prefill batch [12], #new-seq: 1, #new-token: 8, #cached-token: 0, token "
        "usage: 0.00, #running-req: 1, #queue-req: 0, \n"
    )
    result = parse_sglang(text)
    assert (result.matched, result.skipped, result.samples) == (0, 0, [])


def test_marker_without_fields_is_skipped_and_counted() -> None:
    result = parse_sglang("Decode batch failed: CUDA error\nsomething else\nDecode batch, #running-req: x\n")
    assert (result.matched, result.skipped) == (0, 2)
    assert result.skipped_examples[0] == "Decode batch failed: CUDA error"


def test_tp_ranks_printing_the_same_line_count_once() -> None:
    lines = [f"[2026-05-30 00:39:10 TP{tp}] {CURRENT}" for tp in range(8)]
    result = parse_sglang("\n".join(lines))
    assert (result.matched, result.duplicates) == (1, 7)


def test_dp_groups_are_different_data_and_are_kept() -> None:
    text = f"[2026-05-30 00:39:10 DP0 TP0] {CURRENT}\n[2026-05-30 00:39:10 DP1 TP4] {CURRENT}\n"
    result = parse_sglang(text)
    assert (result.matched, result.duplicates) == (2, 0)


def test_identical_lines_without_rank_or_from_the_same_rank_are_two_intervals() -> None:
    untagged = parse_sglang(f"{CURRENT}\n{CURRENT}\n")
    same_rank = parse_sglang(f"[2026-05-30 00:39:10 TP0] {CURRENT}\n[2026-05-30 00:39:10 TP0] {CURRENT}\n")
    assert (untagged.matched, same_rank.matched) == (2, 2)


def test_another_ranks_line_of_the_same_group_is_a_copy_whatever_its_time_and_digits() -> None:
    # Each printing rank times its own intervals: its copy may be a second later and differ in the last digits.
    later = parse_sglang(
        f"[2026-05-30 00:39:10 TP0] {CURRENT}\n[2026-05-30 00:39:11 TP1] {CURRENT.replace('86.12', '86.09')}\n"
    )
    assert (later.matched, later.duplicates) == (1, 1)


@pytest.mark.parametrize(
    "tags",
    [
        pytest.param(("ATTN_CP0 MOE_DP0 TP0", "ATTN_CP1 MOE_DP1 TP2"), id="attn-cp"),
        pytest.param(("PP0", "PP1"), id="pp-stages-no-tp-tag"),
        pytest.param(("PP0 TP0 EP0", "PP1 TP0 EP0"), id="pp-tp-ep"),
    ],
)
def test_copy_ranks_of_one_group_count_once(tags: tuple[str, str]) -> None:
    # lines.py RANK_TAGS: only the DP tag tells groups apart (sglang managers/scheduler.py prefix order).
    text = "".join(f"[2026-05-30 00:39:1{i} {tag}] {CURRENT}\n" for i in range(3) for tag in tags)
    wm = parse_window("sglang", text)
    assert (wm.lines_matched, wm.lines_duplicate) == (3, 3)
    assert wm.gen_throughput == pytest.approx(86.12)


def test_dp_groups_with_copy_ranks_add_up_once_each() -> None:
    line = "Decode batch, #running-req: 2, accept len: 3.00, gen throughput (token/s): {t}, #queue-req: 0"
    text = (
        f"[2026-05-30 00:39:10 DP0 ATTN_CP0 TP0] {line.format(t='100.00')}\n"
        f"[2026-05-30 00:39:10 DP0 ATTN_CP1 TP2] {line.format(t='100.01')}\n"
        f"[2026-05-30 00:39:10 DP1 ATTN_CP0 TP4] {line.format(t='50.00')}\n"
        f"[2026-05-30 00:39:10 DP1 ATTN_CP1 TP6] {line.format(t='50.00')}\n"
    )
    wm = parse_window("sglang", text)
    assert (wm.lines_matched, wm.lines_duplicate) == (2, 2)
    assert wm.gen_throughput == pytest.approx(150.0)
    assert wm.details["dp_groups"] == ["DP0", "DP1"]


@pytest.mark.parametrize(
    ("version", "rate", "incl_bonus", "definition"),
    [
        pytest.param("0.5.23", 0.63, None, "drafts_only", id="current"),
        pytest.param("0.5.11", 0.63, None, "drafts_only", id="first-drafts-only"),
        pytest.param("0.5.10.post1", None, 0.63, "incl_bonus", id="bonus-counted"),
        pytest.param(None, None, None, "unknown", id="unknown-version"),
    ],
)
def test_accept_rate_definition_follows_the_version(
    version: str | None, rate: float | None, incl_bonus: float | None, definition: str
) -> None:
    samples = parse_sglang(CURRENT).samples
    figures = aggregate_sglang(samples, version=version)  # type: ignore[arg-type]
    assert figures["acceptance_rate"] == rate
    assert figures["details"].get("acceptance_rate_incl_bonus") == incl_bonus
    assert figures["details"]["accept_rate_printed"] == 0.63
    assert figures["details"]["acceptance_rate_definition"] == definition


def test_window_aggregate_estimates_within_the_bounds_the_lines_allow() -> None:
    # Hand-checked: #running-req 1, 2, 1 is each interval's last batch; an interval's batch sizes are estimated
    # as the mean of its first and last (1 for the first line, which has no line before it; 1.5; 1.5):
    # accept len (1*3.5 + 1.5*3.0 + 1.5*4.0) / 4 = 3.5; rate (0.62 + 1.5*0.50 + 1.5*0.75) / 4 = 0.62375;
    # tokens 3.5, 4.5, 6 in 3.5/80 + 4.5/150 + 6/100 = 0.13375 s -> 14 / 0.13375 tok/s. The true window figures
    # weigh by what the lines do not print, so they lie anywhere between the smallest and largest line.
    wm = parse_window("sglang", (DATA / "sglang_tp4_short_iso.log").read_text())
    assert wm.lines_matched == 3
    assert wm.lines_duplicate == 9
    assert wm.lines_skipped == 0
    assert wm.lines_total == 17
    assert wm.accept_len == pytest.approx(3.5)
    assert wm.acceptance_rate is None  # the server's version is not known: the rate's meaning neither
    assert wm.details["accept_rate_printed"] == pytest.approx(0.62375)
    figures = aggregate_sglang(wm.samples, version="0.5.23")  # type: ignore[arg-type]
    assert figures["acceptance_rate"] == pytest.approx(0.62375)
    assert wm.gen_throughput == pytest.approx(14 / 0.13375)
    assert wm.details["accept_len_unweighted"] == pytest.approx(3.5)
    assert wm.exactness["accept_len"]["kind"] == "bounded"
    assert wm.exactness["accept_len"]["bounds"] == pytest.approx([2.995, 4.005])
    assert "sglang:spec_verify_calls_total" in wm.exactness["accept_len"]["note"]
    assert wm.exactness["gen_throughput"]["kind"] == "bounded"
    assert wm.exactness["gen_throughput"]["bounds"] == pytest.approx([79.995, 150.005])
    assert "acceptance_rate" not in wm.exactness  # no figure, so no exactness
    assert figures["exactness"]["acceptance_rate"]["bounds"] == pytest.approx([0.495, 0.755])


def test_throughput_of_dp_groups_adds_up() -> None:
    line = "Decode batch, #running-req: 2, accept len: 3.00, gen throughput (token/s): {t}, #queue-req: 0"
    text = (
        f"[2026-05-30 00:39:10 DP0 TP0] {line.format(t='100.00')}\n"
        f"[2026-05-30 00:39:10 DP1 TP4] {line.format(t='50.00')}\n"
        f"[2026-05-30 00:39:11 DP0 TP0] {line.format(t='100.00')}\n"
    )
    wm = parse_window("sglang", text)
    assert wm.gen_throughput == pytest.approx(150.0)
    assert wm.details["dp_groups"] == ["DP0", "DP1"]


def test_zero_throughput_and_zero_running_lines_do_not_count() -> None:
    samples = parse_sglang(
        "Decode batch, #running-req: 0, accept len: 9.00, gen throughput (token/s): 10.00, #queue-req: 0\n"
        "Decode batch, #running-req: 1, accept len: 2.00, gen throughput (token/s): 0.00, #queue-req: 0\n"
        "Decode batch, #running-req: 1, accept len: 4.00, gen throughput (token/s): 50.00, #queue-req: 0\n"
    ).samples
    figures = aggregate_sglang(samples)  # type: ignore[arg-type]
    assert figures["accept_len"] == pytest.approx(3.0)
    assert figures["gen_throughput"] == pytest.approx(50.0)


def test_autoregressive_window_has_no_accept_len() -> None:
    wm = parse_window(
        "sglang",
        "Decode batch. #running-req: 4, #token: 9, token usage: 0.0, gen throughput (token/s): 310.50, #queue-req: 2",
    )
    assert (wm.accept_len, wm.acceptance_rate, wm.gen_throughput) == (None, None, 310.5)


def test_empty_window() -> None:
    wm = parse_window("sglang", "")
    assert (wm.lines_total, wm.lines_matched, wm.accept_len, wm.gen_throughput) == (0, 0, None, None)


def test_json_export_copies_of_tp_ranks_count_once() -> None:
    lines = [f'{{"MESSAGE":"[2026-05-30 00:39:10 TP{tp}] {CURRENT}","_PID":"{4101 + tp}"}}' for tp in range(2)]
    result = parse_sglang("\n".join(lines))
    assert (result.matched, result.duplicates) == (1, 1)


def test_copies_of_an_unreadable_line_are_copies() -> None:
    lines = [f"[2026-05-30 00:39:10 TP{tp}] Decode batch, oops" for tp in range(4)]
    result = parse_sglang("\n".join(lines))
    assert (result.matched, result.skipped, result.duplicates) == (0, 1, 3)


def test_the_simulators_malformed_lines_are_skipped_and_counted() -> None:
    from orchestrator.engines.sglang.simdialect import bad_metric_lines, decode_batch

    good = decode_batch(running=2, tokens=100, usage=0.01, accept_len=3.0, accept_rate=0.5, throughput=90.0, queue=0)
    bad = [line for i in range(4) for line in bad_metric_lines(i)]
    wm = parse_window("sim", "\n".join([good, *bad]))
    assert (wm.lines_matched, wm.lines_skipped) == (1, 4)
    assert (wm.accept_len, wm.gen_throughput, wm.ddtree_lines) == (3.0, 90.0, 0)
