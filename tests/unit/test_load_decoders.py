"""What each API's responses mean: tokens per chunk, finish reasons, engine metadata, faults."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.engines.llamacpp.responses import LLAMACPP_TIMINGS
from orchestrator.engines.responses import SpecFigures
from orchestrator.engines.sglang.responses import SGLANG_META_INFO
from orchestrator.load.decoders import DECODERS, Decoder, StreamFault
from orchestrator.load.records import RequestRecord, spread_tokens


def decoder(api: str) -> Decoder:
    return DECODERS[api](RequestRecord(index=0))


def feed(dec: Decoder, events: list[object], start: float = 1.0, step: float = 0.01) -> RequestRecord:
    for i, event in enumerate(events):
        data = event if isinstance(event, bytes) else json.dumps(event).encode()
        dec.on_event(data, start + i * step)
    dec.finish()
    return dec.record


def chat_chunk(content: str | None = None, finish: str | None = None, usage: dict | None = None) -> dict:
    delta = {} if content is None else {"content": content}
    chunk: dict = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def test_chat_counts_text_chunks_and_spreads_final_usage_by_text_length() -> None:
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
    events = [
        role,
        chat_chunk(" one"),
        chat_chunk(" two three four"),  # a speculative chunk: three tokens at once
        chat_chunk(" five"),
        chat_chunk(finish="length"),
        {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5}},
        b"[DONE]",
    ]
    dec = decoder("chat")
    record = feed(dec, events)
    assert dec.done
    assert record.output_tokens == 5
    assert record.chunk_tokens == [1, 3, 1]
    assert record.chunk_times == [1.01, 1.02, 1.03]
    assert record.first_token == 1.01
    assert record.input_tokens == 9
    assert record.finish_reason == "length"
    assert record.token_source == "usage"


def test_chat_continuous_usage_gives_exact_counts() -> None:
    events = [
        chat_chunk("", usage={"prompt_tokens": 3, "completion_tokens": 0}),
        chat_chunk("a", usage={"prompt_tokens": 3, "completion_tokens": 1}),
        chat_chunk("bcd", usage={"prompt_tokens": 3, "completion_tokens": 4}),
        chat_chunk("e", usage={"prompt_tokens": 3, "completion_tokens": 6}),  # text lags a token behind
        chat_chunk(finish="stop", usage={"prompt_tokens": 3, "completion_tokens": 6}),
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 6}},
        b"[DONE]",
    ]
    record = feed(decoder("chat"), events)
    assert record.chunk_tokens == [1, 3, 2]
    assert record.output_tokens == 6
    assert record.token_source == "continuous_usage"
    assert record.finish_reason == "stop"


def test_llamacpp_openai_final_chunk_with_usage_and_timings_is_not_continuous() -> None:
    last = chat_chunk(finish="length", usage={"prompt_tokens": 4, "completion_tokens": 4})
    last["timings"] = {"prompt_n": 4, "predicted_n": 4, "draft_n": 6, "draft_n_accepted": 2}
    record = feed(
        decoder("chat"), [chat_chunk("a"), chat_chunk("b"), chat_chunk("c"), chat_chunk("d"), last, b"[DONE]"]
    )
    assert record.chunk_tokens == [1, 1, 1, 1]
    assert record.output_tokens == 4
    assert record.spec == SpecFigures(LLAMACPP_TIMINGS, accepted_drafts=2, proposed_drafts=6)


def test_completions_ignore_a_top_level_meta_info() -> None:
    """No engine writes ``meta_info`` at the top level of an OpenAI chunk: neither its counts nor its
    speculative fields are read there (SGLang's go to ``sglext``, see test_load_spec)."""

    def chunk(text: str, finish: str | None = None) -> dict:
        return {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}

    final = chunk("", "length")
    final["meta_info"] = {"prompt_tokens": 7, "completion_tokens": 4, "spec_verify_ct": 2}
    record = feed(decoder("completions"), [chunk("ab"), chunk("cdef"), final, b"[DONE]"])
    assert record.spec is None
    assert record.input_tokens is None
    assert record.output_tokens == 2  # counted from the text chunks
    assert record.token_source == "chunks"


def test_generate_cumulative_text_and_counts() -> None:
    def chunk(text: str, done: int, verify: int, finish: dict | None = None) -> dict:
        meta = {"prompt_tokens": 2, "completion_tokens": done, "spec_verify_ct": verify, "finish_reason": finish}
        return {"text": text, "meta_info": meta, "index": 0}

    events = [
        chunk(" a", 1, 0),
        chunk(" a b c d", 4, 1),
        chunk(" a b c d e", 5, 2, {"type": "length", "length": 5}),
        b"[DONE]",
    ]
    record = feed(decoder("generate"), events)
    assert record.chunk_tokens == [1, 3, 1]
    assert record.output_tokens == 5
    assert record.spec == SpecFigures(SGLANG_META_INFO, verify_steps=2, completion_tokens=5)
    assert record.finish_reason == "length"
    assert record.token_source == "continuous_usage"


def test_llamacpp_native_stream() -> None:
    events = [
        {"content": " a", "stop": False, "tokens": [11]},
        {"content": " b c", "stop": False, "tokens": [12, 13]},
        {
            "content": "",
            "stop": True,
            "tokens_predicted": 3,
            "tokens_evaluated": 5,
            "stop_type": "limit",
            "timings": {"predicted_n": 3, "draft_n": 4, "draft_n_accepted": 1},
        },
    ]
    dec = decoder("llamacpp")
    record = feed(dec, events)
    assert dec.done
    assert record.chunk_tokens == [1, 2]
    assert record.output_tokens == 3
    assert record.finish_reason == "length"
    assert record.input_tokens == 5
    assert record.spec == SpecFigures(LLAMACPP_TIMINGS, accepted_drafts=1, proposed_drafts=4)


@pytest.mark.parametrize(
    ("api", "body", "tokens", "reason"),
    [
        pytest.param(
            "chat",
            {
                "choices": [{"message": {"content": "hi there"}, "finish_reason": "stop"}],
                "usage": {"completion_tokens": 2},
            },
            2,
            "stop",
            id="chat",
        ),
        pytest.param(
            "completions",
            {"choices": [{"text": "abc", "finish_reason": "length"}], "usage": {"completion_tokens": 3}},
            3,
            "length",
            id="completions",
        ),
        pytest.param(
            "generate",
            {"text": "x y", "meta_info": {"completion_tokens": 2, "finish_reason": {"type": "stop"}}},
            2,
            "stop",
            id="generate",
        ),
        pytest.param("llamacpp", {"content": "x", "tokens_predicted": 1, "stop_type": "eos"}, 1, "stop", id="llamacpp"),
        pytest.param("chat", {"choices": [{"message": {"content": "12345678"}}]}, 2, None, id="no-usage-estimate"),
    ],
)
def test_whole_bodies(api: str, body: dict, tokens: int, reason: str | None) -> None:
    dec = decoder(api)
    dec.on_body(json.dumps(body).encode(), 2.0)
    dec.finish()
    assert dec.record.output_tokens == tokens
    assert dec.record.finish_reason == reason
    assert dec.record.first_token == 2.0


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        pytest.param(b"{not json", "malformed", id="not-json"),
        pytest.param(b"[1, 2]", "malformed", id="not-an-object"),
        pytest.param(b'{"error": {"message": "out of memory", "code": 500}}', "stream_error", id="error-object"),
        pytest.param(b'{"object": "error", "message": "bad"}', "stream_error", id="vllm-error"),
    ],
)
def test_faults(data: bytes, kind: str) -> None:
    with pytest.raises(StreamFault) as caught:
        decoder("chat").on_event(data, 1.0)
    assert caught.value.kind == kind


def test_error_message_is_kept() -> None:
    with pytest.raises(StreamFault, match="out of memory"):
        decoder("chat").on_event(b'{"error": {"message": "out of memory"}}', 1.0)


def test_error_event() -> None:
    with pytest.raises(StreamFault, match="boom") as caught:
        decoder("generate").on_error_event(b'{"message": "boom"}')
    assert caught.value.kind == "stream_error"


def test_json_documents_on_consecutive_data_lines() -> None:
    joined = json.dumps(chat_chunk("a")).encode() + b"\n" + json.dumps(chat_chunk("b")).encode()
    dec = decoder("chat")
    assert dec.on_event(joined, 1.0) == 2
    dec.finish()
    assert dec.record.output_tokens == 2


def test_anything_after_done_is_ignored() -> None:
    record = feed(decoder("chat"), [chat_chunk("a", "stop"), b"[DONE]", b"garbage", chat_chunk("b")])
    assert record.output_tokens == 1


@given(total=st.integers(min_value=0, max_value=500), weights=st.lists(st.integers(0, 50), max_size=40))
def test_spread_tokens_keeps_the_total(total: int, weights: list[int]) -> None:
    shares = spread_tokens(total, weights)
    assert len(shares) == len(weights)
    assert all(s >= 0 for s in shares)
    if weights:
        assert sum(shares) == total
        if total >= len(weights):
            assert min(shares) >= 1


def test_spread_tokens_follows_text_length() -> None:
    assert spread_tokens(10, [1, 3, 1, 0]) == [2, 5, 2, 1]
    assert spread_tokens(2, [1, 5, 1]) == [0, 2, 0]


def test_completions_without_any_count_counts_text_chunks() -> None:
    def chunk(text: str, finish: str | None = None) -> dict:
        return {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}

    record = feed(decoder("completions"), [chunk("ab"), chunk("cdef"), chunk("", "stop"), b"[DONE]"])
    assert record.output_tokens == 2
    assert record.token_source == "chunks"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b' {"choices": [{"text": "a"}]}', id="leading-space"),
        pytest.param(b'{"choices": [{"text": "a"}]}  ', id="trailing-space"),
        pytest.param('{"choices": [{"text": "é"}]}'.encode(), id="utf8"),
    ],
)
def test_fast_and_slow_json_paths_agree(data: bytes) -> None:
    dec = decoder("completions")
    assert dec.on_event(data, 1.0) == 1


def test_trailing_garbage_after_a_json_object_is_malformed() -> None:
    with pytest.raises(StreamFault) as caught:
        decoder("chat").on_event(b'{"choices": []} trailing', 1.0)
    assert caught.value.kind == "malformed"
