"""Per-response figures of responses with several choices, and the histograms of accepted drafts per step.

SGLang (python/sglang/srt/entrypoints/openai/serving_completions.py, serving_chat.py): with ``n > 1``
``sglext.spec_tokens_details`` is a list, one per choice that verified, and ``usage.completion_tokens`` sums
every choice; each choice is one request inside SGLang. vLLM (vllm/v1/metrics/stats.py
RequestSpecDecodeMetrics): ``acceptance_histogram[j]`` = verify steps that accepted exactly j drafts. The
engine-made bytes are in tests/engine_bodies.py and tests/contract/test_responses_contract.py.
"""

from __future__ import annotations

import json

import pytest

from orchestrator.analysis.requests import figures_from_requests
from orchestrator.engines.responses import SpecFigures
from orchestrator.engines.sglang.responses import (
    SGLANG_META_INFO,
    SGLANG_SGLEXT,
    from_choices_meta_info,
    from_spec_tokens_details,
)
from orchestrator.engines.vllm.responses import VLLM_METRICS
from orchestrator.load.records import RequestRecord, request_row
from orchestrator.load.spec import response_spec, summarize_spec
from orchestrator.load.stats import spec_summary
from orchestrator.load.uncertainty import window_intervals
from tests.engine_bodies import SGLANG_N3_COMPLETIONS_BODY


def details(verify: int, correct: int, completion: int, histogram: list[int], k: int = 4) -> dict[str, object]:
    """One entry of spec_tokens_details as utils.py spec_tokens_details_from_meta_info fills it from the meta_info
    tokenizer_manager.py _calculate_spec_decoding_metrics writes."""
    return {
        "spec_accept_rate": correct / (verify * (k - 1)),
        "spec_accept_length": completion / verify,
        "spec_cap_length": 0.0,
        "spec_block_accept_length": 0.0,
        "spec_num_correct_drafts": correct,
        "spec_num_proposed_drafts": verify * (k - 1),
        "spec_verify_ct": verify,
        "spec_correct_drafts_histogram": histogram,
        "spec_cap_lens_histogram": [],
    }


def test_a_list_is_every_choice_pooled() -> None:
    spec = from_spec_tokens_details([details(4, 8, 13, [0, 1, 2, 1]), details(5, 4, 9, [3, 1, 0, 1])])
    assert spec is not None and spec.source == SGLANG_SGLEXT
    assert (spec.verify_steps, spec.accepted_drafts, spec.proposed_drafts, spec.completion_tokens) == (9, 12, 27, 22)
    assert spec.accepted_histogram == (3, 2, 2, 2)
    assert spec.engine_accept_len is None  # SGLang writes one per choice only
    # usage (23, with a one-token choice that never verified) is not split: each choice's own count is used.
    assert spec.accept_terms(23) == (12 + 8, 9)
    assert spec.engine_accept_terms(23) == (22, 9)
    assert spec.accept_len(23) != pytest.approx((23 - 1) / 4)  # the first choice's steps over every choice's tokens


def test_a_choice_without_its_own_count_gives_no_figure() -> None:
    broken = details(4, 8, 13, [0, 1, 2, 1])
    broken["spec_accept_length"] = 0.0  # no count to give back
    spec = from_spec_tokens_details([broken, details(5, 4, 9, [3, 1, 0, 1])])
    assert spec is not None and spec.accept_terms(23) is None and spec.accept_len(23) is None


def test_one_object_uses_its_own_count() -> None:
    spec = from_spec_tokens_details(details(4, 8, 13, [0, 1, 2, 1]))
    assert spec is not None and spec.completion_tokens == 13 and not spec.choices
    assert spec.accept_terms(22) == (12, 4)  # SGLang's first prompt only; usage may sum several prompts


def test_choices_meta_info() -> None:
    metas = [
        {"completion_tokens": 13, "spec_verify_ct": 4, "spec_num_correct_drafts": 8, "spec_num_proposed_drafts": 12},
        {"completion_tokens": 1, "cached_tokens": 0},  # no verify step: SGLang writes no speculative field
        {"completion_tokens": 9, "spec_verify_ct": 5, "spec_num_correct_drafts": 4, "spec_num_proposed_drafts": 15},
    ]
    spec = from_choices_meta_info([{"index": i, "meta_info": m} for i, m in enumerate(metas)])
    assert spec is not None and spec.source == SGLANG_META_INFO and len(spec.choices) == 2
    assert spec.accept_len(23) == pytest.approx(20 / 9)
    one = from_choices_meta_info([{"index": 0, "meta_info": metas[0]}])
    assert one is not None and not one.choices and one.accept_len(13) == pytest.approx(3.0)


def test_summary_weights_each_choice_as_a_request() -> None:
    n3 = from_spec_tokens_details([details(4, 8, 13, [0, 1, 2, 1]), details(5, 4, 9, [3, 1, 0, 1])])
    single = from_spec_tokens_details(details(2, 2, 5, [0, 2]))
    summary = summarize_spec([(n3, 23), (single, 5)])
    assert summary["accept_len"] == pytest.approx((20 + 4) / 11)
    assert summary["accept_len_request_weighted"] == pytest.approx((3.0 + 8 / 5 + 2.0) / 3)
    assert summary["accept_len_engine_request_weighted"] == pytest.approx((13 / 4 + 9 / 5 + 5 / 2) / 3)
    assert (summary["responses_with_verify_steps"], summary["requests_with_verify_steps"]) == (2, 3)
    assert summary["per_position_acceptance"] == pytest.approx([8 / 11, 4 / 11, 2 / 11])
    assert summary["exactness"]["accept_len"]["kind"] == "exact"
    assert set(summary["exactness"]) == {
        "accept_len",
        "accept_len_request_weighted",
        "accept_len_engine",
        "accept_len_engine_request_weighted",
        "acceptance_rate",
        "per_position_acceptance",
    }


def test_per_position_is_the_survival_of_the_histogram() -> None:
    # vLLM: 4 steps accepting 3, 1, 0, 2 of 3 drafts: histogram [1, 1, 1, 1] (one step each), not rates.
    spec = SpecFigures(VLLM_METRICS, 4, 6, 12, 2.5, accepted_histogram=(1, 1, 1, 1))
    summary = summarize_spec([(spec, 11)])
    assert summary["per_position_acceptance"] == pytest.approx([3 / 4, 2 / 4, 1 / 4])
    assert summary["accepted_per_position"] == [3, 2, 1]


def test_per_position_withheld_unless_every_histogram_adds_up() -> None:
    good = SpecFigures(VLLM_METRICS, 4, 6, 12, 2.5, accepted_histogram=(1, 1, 1, 1))
    for bad in (
        SpecFigures(VLLM_METRICS, 4, 6, 12, 2.5),  # none
        SpecFigures(VLLM_METRICS, 4, 6, 12, 2.5, accepted_histogram=(0, 1, 1, 2)),  # 9 accepted, not 6
        SpecFigures(VLLM_METRICS, 4, 6, 12, 2.5, accepted_histogram=(1, 1, 1)),  # 3 steps, not 4
    ):
        summary = summarize_spec([(good, 11), (bad, 11)])
        assert summary["per_position_acceptance"] is None and "per_position_acceptance" not in summary["exactness"]


def test_a_requests_row_reproduces_the_choices() -> None:
    spec, tokens = response_spec(json.loads(SGLANG_N3_COMPLETIONS_BODY))
    record = RequestRecord(index=0, spec=spec)
    record.output_tokens = tokens or 0
    row = json.loads(json.dumps(request_row(record, 0.0)))
    assert row["spec"]["accept_len"] == pytest.approx(20 / 9)
    assert SpecFigures.from_dict(row["spec"]) == spec
    row["ok"] = True
    assert figures_from_requests([row])["spec_accept_len"] == pytest.approx(spec_summary([record])["accept_len"])


def test_bootstrap_resamples_responses_with_choices() -> None:
    spec, tokens = response_spec(json.loads(SGLANG_N3_COMPLETIONS_BODY))
    records = []
    for i in range(6):
        r = RequestRecord(index=i, spec=spec, sent=0.0, first_token=0.1, end=1.0)
        r.output_tokens = tokens or 0
        records.append(r)
    intervals = window_intervals(records, output_tok_s=None, open_loop=False, concurrency=1, figures=("accept_len",))
    assert intervals["accept_len"].value == pytest.approx(20 / 9)
