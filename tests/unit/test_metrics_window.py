"""The public API: parse_window's shape, user parsers, step recovery, source comparison."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

import orchestrator.metrics as metrics
from orchestrator.engines.samples import recover_steps, typed_value
from orchestrator.errors import ConfigError, MetricsError
from orchestrator.metrics import compare_sources, parse_window, response_figures, scrape_delta

LINE = (
    "[2026-05-30 00:39:10 TP0] Decode batch, #running-req: 1, #token: 1234, token usage: 0.01, accept len: 3.52, "
    "accept rate: 0.63, cuda graph: True, gen throughput (token/s): 86.12, #queue-req: 0,"
)


def test_public_api() -> None:
    assert set(metrics.__all__) >= {"parse_window", "WindowMetrics", "scrape_delta", "compare_sources"}
    for name in metrics.__all__:
        assert hasattr(metrics, name)


@pytest.mark.parametrize("engine", ["sglang", "sim", "vllm", "llamacpp"])
def test_to_dict_has_the_documented_keys_and_is_strict_json(engine: str) -> None:
    data = parse_window(engine, LINE + "\nDDTREE metrics: bs=1 avg_commit_len=nan\n").to_dict()
    for key in (
        "engine",
        "lines_matched",
        "lines_skipped",
        "accept_len",
        "acceptance_rate",
        "gen_throughput",
        "samples",
        "avg_commit_len",
        "avg_accepted_depth",
        "avg_actual_nodes",
        "avg_accepted_drafts",
        "user_parsers",
        "definitions",
    ):
        assert key in data, key
    assert data["engine"] == engine
    for figure in ("accept_len", "acceptance_rate", "gen_throughput", "lines_skipped"):
        assert figure in data["definitions"]
    json.dumps(data, allow_nan=False)  # no NaN sneaks into a record


def test_unknown_engine_is_a_metrics_error() -> None:
    with pytest.raises(MetricsError, match="unknown engine 'tgi'"):
        parse_window("tgi", "")


def test_bytes_are_decoded_leniently() -> None:
    wm = parse_window("sglang", LINE.encode() + b"\n\xff\xfe garbage\n")
    assert (wm.lines_matched, wm.lines_total, wm.accept_len) == (1, 2, 3.52)


def test_user_parsers_named_groups_become_fields() -> None:
    text = "step=1 loss=0.5 tag=a\nstep=2 loss=0.25 tag=b\nother\n"
    wm = parse_window("sglang", text, [("train", r"step=(?P<step>\d+) loss=(?P<loss>[\d.]+) tag=(?P<tag>\w+)")])
    user = wm.user["train"]
    assert user["matches"] == 2
    assert user["groups"]["loss"] == {"mean": 0.375, "sum": 0.75, "min": 0.25, "max": 0.5, "last": 0.25}
    assert "tag" not in user["groups"]  # text groups are in the samples only
    samples = [s.to_dict() for s in wm.samples]
    assert samples[0] == {"kind": "user", "parser": "train", "groups": {"step": 1, "loss": 0.5, "tag": "a"}}
    assert "user_parsers" in wm.definitions


def test_user_parser_that_matches_empty_strings_does_not_flood() -> None:
    wm = parse_window("sglang", "abc\n" * 10, [("empty", r"x*")])
    assert wm.user["empty"]["matches"] == 0


@pytest.mark.parametrize(
    "specs",
    [
        pytest.param([("bad", "(unclosed")], id="invalid-regex"),
        pytest.param([("a", "x"), ("a", "y")], id="duplicate-name"),
    ],
)
def test_bad_user_parsers_are_config_errors(specs: list[tuple[str, str]]) -> None:
    with pytest.raises(ConfigError, match="parsers"):
        parse_window("sglang", "", specs)


@pytest.mark.parametrize(
    ("accepted", "mean_len", "candidate", "expected"),
    [
        pytest.param(66, 3.54, None, (26, True), id="llamacpp-example"),
        pytest.param(412, 2.95, None, (211, True), id="vllm-example"),
        pytest.param(300, 4.00, 100, (100, True), id="candidate-fits"),
        pytest.param(300, 4.00, 99, (100, True), id="candidate-outside-bounds-ignored"),
        pytest.param(0, 1.00, 20, (20, True), id="nothing-accepted-candidate"),
        pytest.param(0, 1.00, None, (None, False), id="nothing-accepted"),
        pytest.param(1, 1.00, None, (None, False), id="rounded-to-one"),
        pytest.param(5000, 1.50, None, (10000, False), id="several-integers-fit"),
        pytest.param(5, 0.5, None, (None, False), id="inconsistent"),
    ],
)
def test_recover_steps(
    accepted: int, mean_len: float, candidate: float | None, expected: tuple[int | None, bool]
) -> None:
    assert recover_steps(accepted, mean_len, candidate=candidate) == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [("7", 7), ("7.50", 7.5), ("1e3", 1000.0), ("True", True), ("nan", None), ("inf", None), ("abc,", "abc")],
)
def test_typed_value(text: str, value: object) -> None:
    assert typed_value(text) == value


def test_compare_sources_keeps_disagreement_as_values() -> None:
    journal = parse_window("sglang", LINE, version="0.5.23")  # a version whose accept rate is drafts-only
    report = compare_sources(
        {
            "journal": journal,
            "prometheus": {"accept_len": 3.40, "gen_throughput": None},
            "response": {"accept_len": 3.60, "acceptance_rate": math.nan},
            "client": {"gen_throughput": 70.0},
        },
        rel_tol=0.05,
    )
    accept = report["figures"]["accept_len"]
    assert accept["reference"] == "journal"
    assert accept["values"] == {"journal": 3.52, "prometheus": 3.40, "response": 3.60}
    assert accept["rel_diff"]["prometheus"] == pytest.approx((3.40 - 3.52) / 3.52)
    assert accept["max_rel_diff"] == pytest.approx(0.12 / 3.52)
    assert accept["agree"] is True
    throughput = report["figures"]["gen_throughput"]
    assert throughput["agree"] is False
    assert throughput["rel_diff"]["client"] == pytest.approx((70.0 - 86.12) / 86.12)
    assert report["figures"]["acceptance_rate"]["agree"] is None  # only the journal has it
    assert report["disagreements"] == ["gen_throughput"]
    json.dumps(report, allow_nan=False)


def test_compare_against_a_zero_reference() -> None:
    report = compare_sources({"a": {"x": 0.0}, "b": {"x": 0.0}, "c": {"x": 1.0}})
    assert report["figures"]["x"]["rel_diff"] == {"b": 0.0, "c": None}
    assert report["figures"]["x"]["agree"] is False


def test_compare_accepts_prometheus_windows() -> None:
    prom = scrape_delta(
        "", "vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_accepted_tokens_total 20\n", "vllm"
    )
    report = compare_sources({"prometheus": prom, "journal": {"accept_len": 3.0}})
    assert report["figures"]["accept_len"]["agree"] is True


def test_response_figures() -> None:
    """Each body read where its engine writes the figures (byte-exact cases: tests/unit/test_load_spec.py)."""
    responses: list[dict[str, Any]] = [
        {"text": "...", "meta_info": {"completion_tokens": 101, "spec_verify_ct": 40}},  # SGLang /generate
        {  # SGLang chat with return_spec_tokens_details
            "object": "chat.completion",
            "choices": [],
            "usage": {"completion_tokens": 51},
            "sglext": {
                "spec_tokens_details": {
                    "spec_verify_ct": 10,
                    "spec_num_correct_drafts": 20,
                    "spec_num_proposed_drafts": 30,
                }
            },
        },
        {"timings": {"draft_n": 48, "draft_n_accepted": 31}},  # llama.cpp
        {"usage": {"completion_tokens": 50}, "meta_info": {"spec_verify_ct": 10}},  # no engine writes this
        {"completion_tokens": 7},
    ]
    figures = response_figures(responses)
    assert figures["accept_len"] == pytest.approx(150 / 50)  # Σ(completion - 1) / Σ verify steps
    assert figures["accept_len_engine"] == pytest.approx(152 / 50)  # SGLang's completion / verify
    assert figures["acceptance_rate"] == pytest.approx(51 / 78)
    assert figures["details"]["responses"] == 5
    assert figures["details"]["responses_with_verify_steps"] == 2
    assert figures["details"]["responses_with_drafts"] == 2
    empty = response_figures([])
    assert empty["accept_len"] is None and empty["acceptance_rate"] is None
    assert empty["details"]["responses"] == 0 and empty["definitions"] is None


# -- window edges: the first interval line of a cut window began before the window -------------------------

_EDGE_LINE = (
    "[2026-05-30 00:39:{s:02d}{ranks}] Decode batch, #running-req: 1, #token: 1200, token usage: 0.01, "
    "accept len: {alen:.2f}, accept rate: 0.60, cuda graph: True, gen throughput (token/s): {tput:.2f}, "
    "#queue-req: 0, "
)


def _edge_window(ranks: str = " TP0") -> str:
    # After an idle gap the first line's interval includes the gap (240 tok/s) and the previous point's tail
    # (accept len 2.00); the steady lines say 960 tok/s at 4.00.
    lines = [_EDGE_LINE.format(s=1, ranks=ranks, alen=2.0, tput=240.0)]
    lines += [_EDGE_LINE.format(s=2 + i, ranks=ranks, alen=4.0, tput=960.0) for i in range(3)]
    return "\n".join(lines) + "\n"


def test_cut_window_leaves_out_the_edge_interval() -> None:
    whole = parse_window("sglang", _edge_window())
    cut = parse_window("sglang", _edge_window(), cut=True)
    assert whole.gen_throughput is not None and whole.gen_throughput < 900  # the gap drags the whole-log figure
    assert cut.gen_throughput == pytest.approx(960.0)
    assert cut.accept_len == pytest.approx(4.0)
    assert cut.details["edge_lines_dropped"] == 1
    assert cut.details["edge_lines_kept"] == 0
    assert "window_edge" in cut.definitions and "window_edge" not in whole.definitions
    assert cut.lines_matched == whole.lines_matched == 4  # every line is still read and kept as a sample


def test_each_dp_group_has_its_own_edge() -> None:
    text = _edge_window(" DP0 TP0") + _edge_window(" DP1 TP8")
    cut = parse_window("sglang", text, cut=True)
    assert cut.details["edge_lines_dropped"] == 2
    assert cut.gen_throughput == pytest.approx(2 * 960.0)  # DP groups serve different requests: rates add up


def test_a_group_with_one_line_keeps_it_and_says_so() -> None:
    line = _EDGE_LINE.format(s=1, ranks=" TP0", alen=3.0, tput=500.0) + "\n"
    cut = parse_window("sglang", line, cut=True)
    assert cut.accept_len == pytest.approx(3.0)
    assert (cut.details["edge_lines_dropped"], cut.details["edge_lines_kept"]) == (0, 1)


def test_vllm_cut_window_drops_the_first_interval() -> None:
    spec = (
        "SpecDecoding metrics: Mean acceptance length: {m:.2f}, Accepted throughput: 10.00 tokens/s, "
        "Drafted throughput: 20.00 tokens/s, Accepted: {a} tokens, Drafted: 400 tokens, "
        "Per-position acceptance rate: 0.500, 0.500, 0.500, 0.500, Avg Draft acceptance rate: 50.0%"
    )
    text = "\n".join([spec.format(m=1.5, a=50), spec.format(m=3.0, a=200), spec.format(m=3.0, a=200)]) + "\n"
    assert parse_window("vllm", text, cut=True).accept_len == pytest.approx(3.0)
    assert parse_window("vllm", text).accept_len == pytest.approx(1 + 450 / 300)  # 100 drafts a line
