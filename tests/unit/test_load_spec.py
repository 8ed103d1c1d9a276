"""Per-response speculative figures, read from response bytes as each engine writes them (the bytes and
their sources: tests/engine_bodies.py)."""

from __future__ import annotations

import json

import pytest

from orchestrator.engines.llamacpp.responses import LLAMACPP_TIMINGS
from orchestrator.engines.responses import SpecFigures
from orchestrator.engines.sglang.responses import SGLANG_META_INFO, SGLANG_SGLEXT, from_meta_info
from orchestrator.engines.vllm.responses import VLLM_METRICS
from orchestrator.errors import LoadError
from orchestrator.load.client import LoadClient
from orchestrator.load.decoders import DECODERS, Decoder
from orchestrator.load.records import RequestRecord
from orchestrator.load.settings import LoadSettings, engine_request_extras
from orchestrator.load.spec import response_spec, summarize_spec
from orchestrator.load.stats import spec_summary
from orchestrator.load.workloads import Prompt
from orchestrator.metrics import compare_sources, response_figures
from tests.engine_bodies import (
    LLAMACPP_DATA,
    SGLANG_CHAT_BODY,
    SGLANG_CHAT_STREAM,
    SGLANG_COMPLETIONS_STREAM,
    SGLANG_DETAILS,
    SGLANG_GENERATE_STREAM,
    VLLM_BODY_METRICS,
    VLLM_CHAT_TAIL,
    llamacpp_stream,
)


def stream(api: str, events: list[bytes]) -> RequestRecord:
    dec: Decoder = DECODERS[api](RequestRecord(index=0))
    for i, event in enumerate(events):
        assert event.startswith(b"data: ") and event.endswith(b"\n\n")
        dec.on_event(event[len(b"data: ") : -2], 1.0 + i * 0.01)
    dec.finish()
    return dec.record


def body(api: str, data: bytes) -> RequestRecord:
    dec: Decoder = DECODERS[api](RequestRecord(index=0))
    dec.on_body(data, 2.0)
    dec.finish()
    return dec.record


@pytest.mark.parametrize(
    ("api", "events"),
    [
        pytest.param("chat", SGLANG_CHAT_STREAM, id="chat"),
        pytest.param("completions", SGLANG_COMPLETIONS_STREAM, id="completions"),
    ],
)
def test_sglang_openai_stream_sglext_chunk(api: str, events: list[bytes]) -> None:
    record = stream(api, events)
    assert record.ok and record.finish_reason == "length"
    assert record.spec == SGLANG_DETAILS
    assert record.output_tokens == 13
    assert record.chunk_tokens == [1, 4, 3, 2, 3]  # continuous usage: the prefill token, then each verify step
    assert record.token_source == "continuous_usage"
    assert record.spec_accept_len == pytest.approx(3.0)  # (13 - 1) / 4: the prefill token is no verify step
    assert record.spec.engine_accept_len == pytest.approx(13 / 4)  # SGLang's own completion_tokens / verify_ct


def test_sglang_chat_body() -> None:
    record = body("chat", SGLANG_CHAT_BODY)
    assert record.spec == SGLANG_DETAILS
    assert (record.output_tokens, record.input_tokens, record.finish_reason) == (13, 7, "length")


def test_sglang_chat_body_choice_meta_info() -> None:
    """``return_meta_info`` (non-streamed chat only) puts the raw meta_info in the choice
    (serving_chat.py:2985), never at the top level; it is read when no sglext came."""
    data = json.loads(SGLANG_CHAT_BODY)
    del data["sglext"]
    data["choices"][0]["meta_info"] = {
        "id": "8f1c",
        "completion_tokens": 13,
        "spec_verify_ct": 4,
        "spec_num_correct_drafts": 8,
        "spec_num_proposed_drafts": 12,
    }
    record = body("chat", json.dumps(data).encode())
    assert record.spec == SpecFigures(SGLANG_META_INFO, 4, 8, 12, None, completion_tokens=13)


def test_sglang_generate_stream_final_meta_info() -> None:
    record = stream("generate", SGLANG_GENERATE_STREAM)
    assert record.spec == SpecFigures(
        SGLANG_META_INFO, 4, 8, 12, 3.25, completion_tokens=13, accepted_histogram=(0, 1, 2, 1)
    )
    assert record.chunk_tokens == [1, 4, 3, 2, 3]
    assert (record.output_tokens, record.finish_reason) == (13, "length")


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        # 0.4.10.post2 tokenizer_manager.py:1580: only spec_verify_ct, once finished.
        pytest.param({"completion_tokens": 9, "spec_verify_ct": 3}, (3, None, None, None), id="0.4.10"),
        # 0.5.9 tokenizer_manager.py:1851-1857.
        pytest.param(
            {
                "spec_accept_rate": 0.5,
                "spec_accept_length": 3.0,
                "spec_accept_token_num": 6,
                "spec_draft_token_num": 12,
                "spec_verify_ct": 4,
            },
            (4, 6, 12, 3.0),
            id="0.5.9",
        ),
        # 0.5.19 tokenizer_manager.py:2817-2842: the new names and their aliases.
        pytest.param(
            {
                "spec_accept_rate": 0.5,
                "spec_accept_length": 3.0,
                "spec_num_correct_drafts": 6,
                "spec_num_proposed_drafts": 12,
                "spec_verify_ct": 4,
                "spec_accepted_drafts": 6,
                "spec_proposed_drafts": 12,
            },
            (4, 6, 12, 3.0),
            id="0.5.19",
        ),
        pytest.param({"completion_tokens": 1, "cached_tokens": 0}, None, id="no-speculation"),
    ],
)
def test_sglang_meta_info_names_by_version(meta: dict, expected: tuple | None) -> None:
    spec = from_meta_info(meta)
    if expected is None:
        assert spec is None
    else:
        assert spec is not None
        assert (spec.verify_steps, spec.accepted_drafts, spec.proposed_drafts, spec.engine_accept_len) == expected


def test_vllm_final_usage_chunk_metrics() -> None:
    record = stream("chat", VLLM_CHAT_TAIL)
    assert record.spec == SpecFigures(
        VLLM_METRICS,
        verify_steps=4,
        accepted_drafts=6,
        proposed_drafts=12,
        engine_accept_len=2.5,
        accepted_histogram=(1, 1, 1, 1),  # steps that accepted exactly 0, 1, 2, 3 drafts: 0, 1, 2 and 3 once each
    )
    assert record.spec_accept_len == pytest.approx(2.5)  # 1 + 6 / 4: vLLM's mean_acceptance_length exactly


def test_vllm_body_metrics_with_nulls() -> None:
    data = (
        '{"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"m","choices":[{"index":0,'
        '"text":"x","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":5,'
        f'"total_tokens":16,"completion_tokens":11}},"metrics":{VLLM_BODY_METRICS}}}'
    ).encode()
    record = body("completions", data)
    assert record.spec == SpecFigures(VLLM_METRICS, 4, 6, 12, 2.5, accepted_histogram=(1, 1, 1, 1))
    # Timing metrics alone (--enable-per-request-metrics without speculation): no speculative figures.
    timing_only = data.replace(b',"speculative_decoding":{', b',"x":{', 1)
    assert body("completions", timing_only).spec is None


def test_llamacpp_real_stream_last_chunk_timings() -> None:
    record = stream("completions", llamacpp_stream())
    assert record.spec == SpecFigures(LLAMACPP_TIMINGS, None, 46, 123, None)
    assert record.spec_accept_len is None  # no verify-step count in llama.cpp's timings


def test_top_level_meta_info_on_openai_chunks_is_not_read() -> None:
    """No engine writes a top-level meta_info into an OpenAI response (the old simulator did)."""
    events = [
        b'data: {"choices":[{"index":0,"delta":{"content":"a b"},"finish_reason":"length"}],'
        b'"meta_info":{"completion_tokens":2,"spec_verify_ct":1}}\n\n',
        b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2},"meta_info":{"spec_verify_ct":1}}\n\n',
        b"data: [DONE]\n\n",
    ]
    assert stream("chat", events).spec is None
    assert response_spec({"object": "chat.completion", "choices": [], "meta_info": {"spec_verify_ct": 1}})[0] is None


def _record(i: int, spec: SpecFigures | None, tokens: int) -> RequestRecord:
    r = RequestRecord(index=i, spec=spec)
    r.output_tokens = tokens
    return r


def test_request_and_token_weighted_accept_length() -> None:
    # A long answer at (101 - 1) / 25 = 4.0 and a short one at (5 - 1) / 4 = 1.0 per verify step.
    records = [
        _record(0, SpecFigures(SGLANG_SGLEXT, 25, 60, 75, 101 / 25), 101),
        _record(1, SpecFigures(SGLANG_SGLEXT, 4, 0, 12, 5 / 4), 5),
        _record(2, None, 9),
    ]
    s = spec_summary(records)
    assert s["accept_len"] == pytest.approx(104 / 29)  # Σ(c - 1) / Σv
    assert s["accept_len_request_weighted"] == pytest.approx((4.0 + 1.0) / 2)
    assert s["accept_len_engine"] == pytest.approx(106 / 29)  # SGLang's Σc / Σv
    assert s["accept_len_engine_request_weighted"] == pytest.approx((101 / 25 + 5 / 4) / 2, abs=1e-4)
    assert s["acceptance_rate"] == pytest.approx(60 / 87)
    assert (s["verify_steps"], s["accepted_drafts"], s["proposed_drafts"]) == (29, 60, 87)
    assert (s["draft_n"], s["draft_n_accepted"]) == (87, 60)
    assert s["responses_with_metadata"] == 2 and s["sources"] == {SGLANG_SGLEXT: 2}
    assert "tokenizer_manager.py" in s["definitions"]["accept_len"]
    assert "protocol.py" in s["definitions"]["source"]


def test_vllm_accept_length_and_steps_without_drafts() -> None:
    records = [
        _record(0, SpecFigures(VLLM_METRICS, 4, 6, 12, 2.5), 11),
        _record(1, SpecFigures(VLLM_METRICS, 2, 4, 6, 3.0), 7),
        _record(2, SpecFigures(VLLM_METRICS, 0, 0, 0, 1.0), 1),  # vLLM writes 1.0 when no step verified
    ]
    s = spec_summary(records)
    assert s["accept_len"] == pytest.approx(1 + 10 / 6)
    assert s["accept_len_request_weighted"] == pytest.approx(2.75)
    assert s["accept_len_engine"] is None  # vLLM's own formula is accept_len
    assert s["acceptance_rate"] == pytest.approx(10 / 18)
    assert s["responses_with_verify_steps"] == 2
    assert "vllm/v1/metrics/stats.py" in s["definitions"]["accept_len"]


def test_no_metadata() -> None:
    s = summarize_spec([(None, 10)])
    assert s["accept_len"] is None and s["definitions"] is None and s["responses_with_metadata"] == 0


def test_response_figures_reads_whole_bodies_as_the_engines_write_them() -> None:
    bodies = [
        json.loads(SGLANG_CHAT_BODY),
        json.loads(SGLANG_GENERATE_STREAM[-2][len(b"data: ") : -2]),
        json.loads(VLLM_CHAT_TAIL[1][len(b"data: ") : -2]),
        json.loads((LLAMACPP_DATA / "ngram-simple-n3-m16.response.json").read_text()),
        {
            "object": "chat.completion",
            "choices": [],
            "usage": {"completion_tokens": 5},
            "meta_info": {"spec_verify_ct": 2},
        },
    ]
    figures = response_figures(bodies)
    # SGLang twice (12 tokens in 4 steps each), vLLM 4 steps + 6 accepted in 4 steps.
    assert figures["accept_len"] == pytest.approx((12 + 12 + 10) / 12)
    assert figures["accept_len_engine"] == pytest.approx(26 / 8)
    assert figures["details"]["responses"] == 5
    assert figures["details"]["responses_with_verify_steps"] == 3
    assert figures["details"]["sources"] == {
        LLAMACPP_TIMINGS: 1,
        SGLANG_META_INFO: 1,
        SGLANG_SGLEXT: 1,
        VLLM_METRICS: 1,
    }
    llama = json.loads((LLAMACPP_DATA / "ngram-simple-n3-m16.response.json").read_text())["timings"]
    accepted = 8 + 8 + 6 + llama["draft_n_accepted"]
    assert figures["acceptance_rate"] == pytest.approx(accepted / (12 + 12 + 12 + llama["draft_n"]))
    report = compare_sources({"journal": {"accept_len": 2.8}, "responses": figures})
    assert report["figures"]["accept_len"]["agree"] is True


def test_engine_request_extras() -> None:
    assert engine_request_extras("sglang", "chat") == {"return_spec_tokens_details": True}
    assert engine_request_extras("sglang", "completions") == {"return_spec_tokens_details": True}
    assert engine_request_extras("sglang", "generate") == {}
    assert engine_request_extras("vllm", "chat") == {}
    assert engine_request_extras("llamacpp", "chat") == {}
    assert engine_request_extras("sim", "chat") == {"return_spec_tokens_details": True}
    assert engine_request_extras(None, "chat") == {}


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_the_flag_goes_at_the_top_level_of_the_body(api: str) -> None:
    settings = LoadSettings(
        url="http://127.0.0.1:1",
        concurrency=1,
        api=api,  # type: ignore[arg-type]
        extra_body=engine_request_extras("sglang", api),
    )
    sent = json.loads(LoadClient(settings, "m").body(Prompt(text="hi")))
    assert sent["return_spec_tokens_details"] is True
    assert sent["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    plain = json.loads(
        LoadClient(LoadSettings(url="http://127.0.0.1:1", concurrency=1, api=api), "m").body(  # type: ignore[arg-type]
            Prompt(text="hi")
        )
    )
    assert "return_spec_tokens_details" not in plain


def test_extra_body_is_checked_and_copied() -> None:
    extra: dict[str, object] = {"return_spec_tokens_details": True}
    settings = LoadSettings(url="http://127.0.0.1:1", concurrency=1, extra_body=extra)
    extra["later"] = 1
    assert dict(settings.extra_body) == {"return_spec_tokens_details": True}
    with pytest.raises(LoadError, match="stream"):
        LoadSettings(url="http://127.0.0.1:1", concurrency=1, extra_body={"stream": False})
    with pytest.raises(LoadError, match="sampling_params"):
        LoadSettings(url="http://127.0.0.1:1", concurrency=1, api="generate", extra_body={"sampling_params": {}})
    with pytest.raises(LoadError, match="JSON"):
        LoadSettings(url="http://127.0.0.1:1", concurrency=1, extra_body={"x": object()})
