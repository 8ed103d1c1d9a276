"""The engines' own response code makes the responses; specsweep must read every choice's figures as the engine
combines them, and vLLM's histogram as the counts of steps it is.

``sglang_responses_oracle.py`` runs SGLang 0.5.23's per-request bookkeeping (schedule_batch.py, tokenizer_manager.py
``_calculate_spec_decoding_metrics``) and its OpenAI completions response code (serving_completions.py
``_build_completion_response``, the sglext block of ``_generate_completion_stream``, utils.py
``spec_tokens_details_from_meta_info``, usage_processor.py, the protocol.py models) on choices whose steps the
test picks; ``sglang_oracle.py`` runs its ``TokenizerMetricsCollector`` on the same choices as requests, which is
what SGLang's /metrics counters say of them. ``vllm_responses_oracle.py`` runs vLLM 0.33.0's
``RequestSpecDecodeMetrics`` and ``build_spec_decoding_metrics``. Nothing is skipped: without the wheels (or
the network once) or pydantic these tests fail.

What SGLang does with n > 1 (0.5.23, and 0.5.22 the same): ``spec_tokens_details`` is a list, one entry per
choice that verified (a choice without verify steps has no speculative field in its meta_info and is left
out), ``usage.completion_tokens`` sums every choice. Each choice is a request of its own in SGLang (its own
prefill token, its own verify steps), and its counters add them request by request, so specsweep pools the
choices: sum(completion - 1) / sum(verify steps), each choice's completion tokens given back by
``spec_accept_length * spec_verify_ct``. Taking the first choice's verify steps over every choice's tokens (what
specsweep did) is several times too high.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.engines.sglang.responses import SGLANG_META_INFO, SGLANG_SGLEXT, TREE_RATE
from orchestrator.load.decoders import DECODERS
from orchestrator.load.records import RequestRecord
from orchestrator.load.spec import response_spec, summarize_spec
from orchestrator.metrics import response_figures, scrape_delta
from tests.contract.wheels import engine_sources
from tests.engine_bodies import SGLANG_N3_COMPLETIONS_BODY, SGLANG_N3_COMPLETIONS_STREAM, SGLANG_N3_SCENARIO
from tests.timing import scaled

HERE = Path(__file__).resolve().parent
SGLANG = "0.5.23"
VLLM = "0.33.0"


def sglang_sources() -> Path:
    # The whole wheel's Python files: the response code spans entrypoints/, managers/ and utils/.
    return engine_sources("sglang", SGLANG)


def sglang_responses(scenario: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    sources = sglang_sources()
    path = tmp_path / "responses.json"
    path.write_text(json.dumps(scenario))
    done = subprocess.run(
        [sys.executable, str(HERE / "sglang_responses_oracle.py"), str(sources), str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(sources)},
        timeout=scaled(300),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def sglang_counters(scenario: dict[str, Any], tmp_path: Path) -> str:
    """SGLang's /metrics after the scenario's choices finished, each as the request it is inside SGLang."""
    sources = sglang_sources()
    requests = [
        {
            "completion_tokens": c["completion_tokens"],
            "spec_verify_ct": len(c["steps"]),
            "correct_drafts": sum(c["steps"]),
        }
        for c in scenario["choices"]
    ]
    path = tmp_path / "counters.json"
    path.write_text(json.dumps({"num_draft_tokens": scenario["num_draft_tokens"], "ranks": [], "requests": requests}))
    done = subprocess.run(
        [sys.executable, str(HERE / "sglang_oracle.py"), str(sources), str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(sources)},
        timeout=scaled(300),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    exposition: str = json.loads(done.stdout)["metrics"]
    return exposition


def vllm_responses(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    sources = engine_sources("vllm", VLLM, members=("vllm/",))
    done = subprocess.run(
        [sys.executable, str(HERE / "vllm_responses_oracle.py"), str(sources)],
        input=json.dumps(scenario),
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    metrics: list[dict[str, Any]] = json.loads(done.stdout)["metrics"]
    return metrics


def truth(choices: list[dict[str, Any]]) -> dict[str, float]:
    """SGLang's own per-request definitions, pooled over its requests (the choices)."""
    verified = [c for c in choices if c["steps"]]
    steps = sum(len(c["steps"]) for c in verified)
    return {
        "accept_len": sum(c["completion_tokens"] - 1 for c in verified) / steps,
        "accept_len_engine": sum(c["completion_tokens"] for c in verified) / steps,
        "accepted": sum(sum(c["steps"]) for c in verified),
        "steps": steps,
    }


# ------------------------------------------------------------------------------------------------ SGLang n > 1


def test_the_n3_fixture_is_what_sglang_makes(tmp_path: Path) -> None:
    result = sglang_responses(SGLANG_N3_SCENARIO, tmp_path)
    assert [e.encode() for e in result["stream"]] == SGLANG_N3_COMPLETIONS_STREAM
    assert result["body"].encode() == SGLANG_N3_COMPLETIONS_BODY
    # The choice with no verify step has no speculative field (tokenizer_manager.py: only when spec_verify_ct > 0).
    assert "spec_verify_ct" not in result["meta_info"][1]


def test_n3_body_pools_every_choice_as_sglangs_counters_do(tmp_path: Path) -> None:
    scenario: dict[str, Any] = SGLANG_N3_SCENARIO
    body = json.loads(sglang_responses(scenario, tmp_path)["body"])
    assert isinstance(body["sglext"]["spec_tokens_details"], list) and body["usage"]["completion_tokens"] == 23
    spec, tokens = response_spec(body)
    assert spec is not None and tokens == 23
    want = truth(scenario["choices"])
    assert (spec.verify_steps, spec.accepted_drafts, spec.proposed_drafts) == (9, 12, 9 * 3)
    assert [c.completion_tokens for c in spec.choices] == [13, 9]  # round(spec_accept_length * spec_verify_ct)
    assert spec.accept_len(tokens) == pytest.approx(want["accept_len"])  # 20 / 9
    assert spec.accept_len(tokens) != pytest.approx((23 - 1) / 4)  # the first choice's steps over all tokens
    figures = response_figures([body])
    assert figures["accept_len"] == pytest.approx(20 / 9)
    assert figures["accept_len_engine"] == pytest.approx(22 / 9)
    # The third choice's last step accepted 3 drafts with 2 tokens of its cap left: one draft past its end. The
    # rate is the committed one, (20 - 9) / 27, as the counters count it; SGLang's own 12 / 27 beside it.
    assert figures["acceptance_rate"] == pytest.approx(11 / 27)
    details = figures["details"]
    assert details["acceptance_rate_engine"] == pytest.approx(12 / 27) and details["drafts_past_end"] == 1
    assert figures["exactness"]["accept_len"]["kind"] == "exact"
    # SGLang's own counters over the same three requests give the same window figures.
    prom = scrape_delta("", sglang_counters(scenario, tmp_path), "sglang", elapsed_s=1.0)
    assert prom.accept_len == pytest.approx(figures["accept_len"])  # (23 - 3 requests) / 9
    # completion / verify over the counters also counts the one-token choice that never verified (23 / 9); the
    # responses' is over the choices that have SGLang's per-request figure (22 / 9).
    assert prom.details["accept_len_engine"] == pytest.approx(23 / 9)


def test_a_non_streamed_body_keeps_per_position_acceptance(tmp_path: Path) -> None:
    """SGLang writes each choice's ``spec_correct_drafts_histogram`` into the non-streamed body's
    ``sglext.spec_tokens_details`` (utils.py ``spec_tokens_details_from_meta_info``): the body's figures keep the
    per-position acceptance summarize_spec computes from it, as the streamed answer's do (issue 49)."""
    body = json.loads(sglang_responses(SGLANG_N3_SCENARIO, tmp_path)["body"])
    figures = response_figures([body])
    # The summed histograms [0,1,2,1] + [3,1,0,1]: steps that accepted at least 1, 2, 3 drafts, of 9.
    assert figures["per_position_acceptance"] == pytest.approx([6 / 9, 4 / 9, 2 / 9])
    assert figures["details"]["accepted_per_position"] == [6, 4, 2]
    assert figures["exactness"]["per_position_acceptance"]["kind"] == "exact"
    assert "per_position_acceptance" in figures["definitions"]


def test_n3_stream_through_the_load_decoder() -> None:
    decoder = DECODERS["completions"](RequestRecord(index=0))
    for i, event in enumerate(SGLANG_N3_COMPLETIONS_STREAM):
        decoder.on_event(event[len(b"data: ") : -2], 1.0 + i * 0.01)
    decoder.finish()
    record = decoder.record
    assert record.ok and record.output_tokens == 23 and record.spec is not None
    assert record.spec.source == SGLANG_SGLEXT and len(record.spec.choices) == 2
    assert record.spec_accept_len == pytest.approx(20 / 9)
    summary = summarize_spec([(record.spec, record.output_tokens)])
    # Request-weighted: each choice is one of SGLang's requests.
    assert summary["accept_len_request_weighted"] == pytest.approx((12 / 4 + 8 / 5) / 2)
    assert summary["requests_with_verify_steps"] == 2 and summary["responses_with_choices"] == 1
    # Per position, from the summed histograms [0,1,2,1] + [3,1,0,1]: steps that accepted at least 1, 2, 3 drafts.
    assert summary["per_position_acceptance"] == pytest.approx([6 / 9, 4 / 9, 2 / 9])
    assert "choices" in summary["definitions"]


def test_one_object_for_several_prompts_is_the_first_prompts(tmp_path: Path) -> None:
    """n == 1 with two prompts: SGLang returns spec_details[0], the first prompt's only, and usage sums both
    (serving_completions.py _build_completion_response): its own tokens go with it, not the usage."""
    scenario = {
        "num_draft_tokens": 4,
        "n": 1,
        "choices": [{"completion_tokens": 13, "steps": [3, 2, 1, 2]}, {"completion_tokens": 9, "steps": [1, 1]}],
    }
    body = json.loads(sglang_responses(scenario, tmp_path)["body"])
    assert isinstance(body["sglext"]["spec_tokens_details"], dict) and body["usage"]["completion_tokens"] == 22
    spec, tokens = response_spec(body)
    assert spec is not None and spec.completion_tokens == 13
    assert spec.accept_len(tokens or 0) == pytest.approx(12 / 4)  # not (22 - 1) / 4


def test_every_choices_meta_info_is_pooled(tmp_path: Path) -> None:
    """return_meta_info puts each choice's raw meta_info in the choice (serving_chat.py _build_chat_response:
    ``meta_info=choice_meta_info``); the meta_info here is SGLang's, the chat envelope around it ours."""
    result = sglang_responses(SGLANG_N3_SCENARIO, tmp_path)
    body = {
        "object": "chat.completion",
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": "x"}, "meta_info": meta}
            for i, meta in enumerate(result["meta_info"])
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 23, "total_tokens": 30},
    }
    spec, tokens = response_spec(body)
    assert spec is not None and spec.source == SGLANG_META_INFO
    assert spec.accept_len(tokens or 0) == pytest.approx(20 / 9)
    decoder = DECODERS["chat"](RequestRecord(index=0))
    decoder.on_body(json.dumps(body).encode(), 1.0)
    decoder.finish()
    assert decoder.record.spec_accept_len == pytest.approx(20 / 9)


def test_a_trees_acceptance_rate_divides_by_every_tree_node(tmp_path: Path) -> None:
    """topk > 1: speculative_num_draft_tokens is the tree's size (8: 7 drafted nodes and the bonus token) while
    a step accepts at most speculative_num_steps (3) drafts: SGLang's rate counts every node as proposed."""
    scenario = {"num_draft_tokens": 8, "n": 1, "choices": [{"completion_tokens": 17, "steps": [3, 3, 3, 3]}]}
    result = sglang_responses(scenario, tmp_path)
    meta = result["meta_info"][0]
    assert meta["spec_num_proposed_drafts"] == 4 * 7
    assert meta["spec_accept_rate"] == pytest.approx(12 / 28)  # every step took the whole path: a chain would say 1.0
    figures = response_figures([json.loads(result["body"])])
    assert figures["acceptance_rate"] == pytest.approx(meta["spec_accept_rate"])
    assert (
        "tree node" in figures["definitions"]["acceptance_rate"]
        and TREE_RATE in figures["definitions"]["acceptance_rate"]
    )


# ------------------------------------------------------------------------------------------------ vLLM histogram


def test_vllms_acceptance_histogram_counts_steps_by_accepted_drafts() -> None:
    steps_a = [(3, 3), (3, 1), (3, 0), (3, 2)]
    steps_b = [(3, 3), (3, 3), (2, 1)]
    metrics = vllm_responses({"k": 3, "requests": [steps_a, steps_b]})
    assert metrics[0]["speculative_decoding"]["acceptance_histogram"] == [1, 1, 1, 1]  # not rates
    bodies = [
        {"object": "chat.completion", "choices": [], "usage": {"completion_tokens": 9}, "metrics": m} for m in metrics
    ]
    read = [response_spec(b) for b in bodies]
    summary = summarize_spec((spec, tokens or 0) for spec, tokens in read)
    every = steps_a + steps_b
    survival = [sum(1 for _, a in every if a >= i + 1) / len(every) for i in range(3)]
    assert summary["per_position_acceptance"] == pytest.approx(survival)  # [6/7, 4/7, 3/7]
    assert summary["accepted_per_position"] == [6, 4, 3]
    assert summary["accept_len"] == pytest.approx(1 + sum(a for _, a in every) / len(every))
    assert summary["acceptance_rate"] == pytest.approx(sum(a for _, a in every) / sum(d for d, _ in every))
    assert {figure["kind"] for figure in summary["exactness"].values()} == {"exact"}
    assert "not per-position" in summary["definitions"]["per_position_acceptance"]
