"""The load client's per-token shortcuts read exactly what the general way reads.

Each shortcut is checked against the slower code it stands in for, on generated input: the typed msgspec
decoding of OpenAI chunks against the dict decoding (``Decoder.on_event``), the one-event chunk against the SSE
parser, the body reader's fast path against the sink's general path, and the numpy figures against the
per-token loops they replaced. No timing is asserted anywhere.
"""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.load import client as client_module
from orchestrator.load.decoders import DECODERS, Decoder, StreamFault, _loads
from orchestrator.load.records import RequestRecord
from orchestrator.load.sse import SSEParser, single_event
from orchestrator.load.stats import summarize

# -- typed chunk decoding ------------------------------------------------------------------------------------

_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 50), st.sampled_from(["", "a", " tok", "é", "error"]), st.just(1.5)
)
_value = st.one_of(_scalar, st.lists(_scalar, max_size=2), st.dictionaries(st.sampled_from(["a", "b"]), _scalar))
_text = st.sampled_from([None, "", "a", " tok", "é"])


def _mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` three times in four, any JSON value else (which the typed decoding must hand over)."""
    return st.one_of(good, good, good, _value)


_delta = _mostly(
    st.dictionaries(st.sampled_from(["content", "reasoning_content", "reasoning", "role"]), _text, max_size=4)
)
_choice = _mostly(
    st.fixed_dictionaries(
        {},
        optional={
            "index": st.just(0),
            "delta": _delta,
            "text": st.one_of(_text, _value),
            "finish_reason": st.one_of(st.sampled_from([None, "stop", "length"]), _value),
            "logprobs": st.just({"content": [{"token": "x"}]}),
        },
    )
)
_usage = _mostly(
    st.fixed_dictionaries(
        {}, optional={"completion_tokens": st.one_of(st.integers(-1, 60), _value), "prompt_tokens": _value}
    )
)
_extras = st.one_of(
    st.just({}),
    st.just({}),
    st.just({}),
    st.sampled_from(
        [
            {"object": "error", "message": "bad"},
            {"error": {"message": "boom"}},
            {"error": None},
            {"error": ""},
            {"sglext": {"spec_tokens_details": {"spec_verify_ct": 3, "spec_num_correct_drafts": 2}}},
            {"metrics": {"speculative_decoding": {"num_spec_steps": 2, "num_accepted_draft_tokens": 1}}},
            {"timings": {"draft_n": 4, "draft_n_accepted": 2, "prompt_n": 3}},
        ]
    ),
)
_arbitrary = st.builds(
    lambda base, extras: {**base, **extras},
    st.fixed_dictionaries(
        {},
        optional={
            "id": st.just("c1"),
            "object": st.sampled_from(["chat.completion.chunk", "text_completion"]),
            "choices": _mostly(st.lists(_choice, max_size=2)),
            "usage": _usage,
        },
    ),
    _extras,
)
# What engines send: one choice with a delta (or a text) of a few fields, maybe usage.
_typical = st.fixed_dictionaries(
    {
        "choices": st.lists(
            st.fixed_dictionaries(
                {"index": st.just(0), "finish_reason": st.sampled_from([None, None, "stop", "length"])},
                optional={
                    "delta": st.fixed_dictionaries(
                        {}, optional={"content": _text, "reasoning_content": _text, "reasoning": _text}
                    ),
                    "text": _text,
                },
            ),
            min_size=0,
            max_size=1,
        )
    },
    optional={"usage": st.fixed_dictionaries({"completion_tokens": st.integers(0, 60), "prompt_tokens": st.just(7)})},
)
_chunk = st.one_of(_typical, _typical, _arbitrary)
_event = st.one_of(
    _chunk.map(lambda c: json.dumps(c).encode()),
    _chunk.map(lambda c: json.dumps(c, separators=(",", ":")).encode()),
    st.sampled_from([b"[DONE]", b"{bad", b'{"choices": []} trailing', b"[1]", b'{"a": NaN}', b' {"choices": []}']),
)


def _run(decode: Any, api: str, events: list[bytes]) -> dict[str, Any]:
    record = RequestRecord(index=0)
    dec = DECODERS[api](record)
    returned: list[object] = []
    try:
        for i, data in enumerate(events):
            returned.append(decode(dec, data, 1.0 + i))
    except StreamFault as fault:
        returned.append((fault.kind, str(fault)))
    dec.finish()
    out = record.to_dict()
    out.update(times=record.chunk_times, tokens=record.chunk_tokens, returned=returned, done=dec.done)
    return out


@settings(max_examples=500, deadline=None)
@given(api=st.sampled_from(["chat", "completions"]), events=st.lists(_event, min_size=1, max_size=8))
def test_typed_openai_decoding_reads_what_the_dict_decoding_reads(api: str, events: list[bytes]) -> None:
    fast = _run(lambda dec, data, now: dec.on_event(data, now), api, events)
    general = _run(lambda dec, data, now: Decoder.on_event(dec, data, now), api, events)
    assert fast == general


@pytest.mark.parametrize(
    "data",
    [b'{"a": 1e400}', b'"\\ud800"', b"NaN", b'{"a": 123456789012345678901234567890}', b'{"a":1,"a":2}'],
)
def test_loads_takes_json_s_answer_where_msgspec_refuses(data: bytes) -> None:
    assert repr(_loads(data)) == repr(json.loads(data))


# -- SSE: one event per chunk ------------------------------------------------------------------------------

_piece = st.sampled_from([b"data: ", b"data:", b"{}", b"x", b"\n", b"\n\n", b"\r", b"\r\n", b": c\n", b"event: e\n"])


@settings(max_examples=400, deadline=None)
@given(prefix=st.lists(_piece, max_size=6), chunk=st.lists(_piece, min_size=1, max_size=6))
def test_single_event_is_what_a_clean_parser_makes_of_the_chunk(prefix: list[bytes], chunk: list[bytes]) -> None:
    parser = SSEParser()
    parser.feed(b"".join(prefix) or b"\n\n")
    data = b"".join(chunk)
    payload = single_event(data)
    if parser.clean and payload is not None:
        assert parser.feed(data) == [(None, payload)]
        assert parser.clean


@settings(max_examples=400, deadline=None)
@given(prefix=st.lists(_piece, max_size=6), chunk=st.lists(_piece, min_size=1, max_size=10))
def test_data_only_is_what_a_clean_parser_makes_of_the_chunk(prefix: list[bytes], chunk: list[bytes]) -> None:
    parser = SSEParser()
    parser.feed(b"".join(prefix) or b"\n\n")
    clean = parser.clean
    data = b"".join(chunk)
    payloads = parser.data_only(data)
    if payloads is not None:
        assert clean
        assert parser.feed(data) == [(None, p) for p in payloads]
        assert parser.clean


def test_data_only_takes_several_events_and_refuses_anything_else() -> None:
    parser = SSEParser()
    parser.feed(b"data: 0\n\n")
    assert parser.data_only(b"data: a\n\ndata: b\n\ndata: \n\n") == [b"a", b"b", b""]
    for chunk in (
        b"data: a\n\ndata: b",  # the last event is not finished
        b"data: a\n\nevent: e\ndata: b\n\n",
        b"data: a\n\n: comment\n\n",
        b"data: a\r\n\r\n",
        b"data: a\ndata: b\n\n",
        b"data: a\n\n\n\n",
        b"x data: a\n\n",
    ):
        assert parser.data_only(chunk) is None, chunk


def test_a_parser_is_clean_only_between_events() -> None:
    parser = SSEParser()
    assert not parser.clean  # the start of a stream may bring a BOM
    parser.feed(b"data: a\n\n")
    assert parser.clean
    parser.feed(b"data: b")
    assert not parser.clean
    parser.feed(b"\n\n")
    assert parser.clean
    parser.feed(b"data: c\r")
    assert not parser.clean  # a "\n" may follow that belongs to this "\r"
    assert single_event(b"data: x\n\n") == b"x"
    assert single_event(b"data: x\r\n\r\n") is None
    assert single_event(b"data: x\ndata: y\n\n") is None
    assert single_event(b"data:x\n\n") is None  # no space: the parser's to read


# -- the body reader ---------------------------------------------------------------------------------------


class _Timeout:
    def reschedule(self, when: float | None) -> None:
        pass


def _reader() -> aiohttp.StreamReader:
    protocol = SimpleNamespace(resume_reading=lambda **kw: None, pause_reading=lambda: None, connected=True)
    return aiohttp.StreamReader(protocol, 1 << 16, loop=SimpleNamespace())  # type: ignore[arg-type]


def _stream(pieces: list[bytes], fast: bool) -> dict[str, Any]:
    ticks = iter(range(1, 10_000))
    client_module._perf = lambda: float(next(ticks))  # one stamp per piece, the same in both ways
    record = RequestRecord(index=0)
    decoder = DECODERS["chat"](record)
    owner = SimpleNamespace(tokens_seen=0)
    sink = client_module._Sink(owner, decoder, record, _Timeout(), 0.0)  # type: ignore[arg-type]
    if fast:
        reader = _reader()
        client_module._SINKS[reader] = sink
        reader.__class__ = client_module._SinkReader
        try:
            for piece in pieces:
                reader.feed_data(piece)
        finally:
            reader.__class__ = aiohttp.StreamReader
            del client_module._SINKS[reader]
    else:
        for piece in pieces:
            sink.feed(piece)
    error = repr(sink.error) if sink.error is not None else None
    decoder.finish()
    return {"record": record.to_dict(), "tokens": record.chunk_tokens, "seen": owner.tokens_seen, "error": error}


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


_token = st.sampled_from(["a", " b", "", "é"]).map(
    lambda t: _sse({"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}]})
)
_other = st.sampled_from(
    [
        _sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
        _sse({"choices": [], "usage": {"completion_tokens": 3, "prompt_tokens": 2}}),
        b"data: [DONE]\n\n",
        b": keep-alive\n\n",
        b'event: error\ndata: {"error": {"message": "x"}}\n\n',
        b"data: {bad}\n\n",
        b"data: {}\r\n\r\n",
    ]
)


@settings(max_examples=200, deadline=None)
@given(events=st.lists(st.one_of(_token, _other), min_size=1, max_size=10), cuts=st.lists(st.integers(0, 400)))
def test_the_body_reader_reads_what_the_sink_reads(events: list[bytes], cuts: list[int]) -> None:
    body = b"".join(events)
    bounds = sorted({0, len(body), *(c for c in cuts if c < len(body))})
    pieces = [body[a:b] for a, b in itertools.pairwise(bounds)]
    perf = client_module._perf
    try:
        assert _stream(pieces, fast=True) == _stream(pieces, fast=False)
        assert _stream(events, fast=True) == _stream(events, fast=False)  # one event per HTTP chunk, as engines do
    finally:
        client_module._perf = perf


# -- figures -----------------------------------------------------------------------------------------------


def _reference_itl(records: list[RequestRecord]) -> list[float]:
    """The per-token loop ``summarize`` had before it went to numpy."""
    itl: list[float] = []
    for r in records:
        if not (r.ok and r.streamed):
            continue
        for j in range(1, len(r.chunk_times)):
            k = r.chunk_tokens[j]
            itl.extend([(r.chunk_times[j] - r.chunk_times[j - 1]) / k] * k)
    return itl


@settings(max_examples=200, deadline=None)
@given(
    shapes=st.lists(
        st.tuples(
            st.lists(st.tuples(st.floats(0.0001, 0.2), st.integers(1, 4)), max_size=8),
            st.booleans(),
            st.booleans(),
        ),
        max_size=8,
    )
)
def test_numpy_figures_match_the_per_token_loops(shapes: list[tuple[list[tuple[float, int]], bool, bool]]) -> None:
    records: list[RequestRecord] = []
    for i, (chunks, streamed, ok) in enumerate(shapes):
        r = RequestRecord(index=i, streamed=streamed, dispatched=i * 0.01, sent=i * 0.01)
        t = r.sent + 0.02
        for gap, k in chunks:
            t += gap
            r.chunk_times.append(t)
            r.chunk_tokens.append(k)
        r.output_tokens = sum(r.chunk_tokens)
        r.first_token = r.chunk_times[0] if r.chunk_times else None
        r.end = t + 0.001
        if not ok:
            r.fail("reset", "x")
        records.append(r)
    figures = summarize(records, open_loop=False, concurrency=2, started=0.0, ended=1.0)
    reference = summarize([], open_loop=False, concurrency=2, started=0.0, ended=1.0)["itl_ms"]
    itl = _reference_itl(records)
    if itl:
        from orchestrator.load.stats import distribution

        reference = distribution(itl)
    assert figures["itl_ms"] == reference
    # The steady window's tokens: every chunk inside it, counted once.
    if figures["steady_window_s"] is not None:
        from orchestrator.load.stats import steady_window

        window = steady_window([r for r in records if r.ok], False, 2)
        assert window is not None
        start, end = window
        inside = sum(
            k for r in records if r.ok for t, k in zip(r.chunk_times, r.chunk_tokens, strict=True) if start <= t <= end
        )
        assert figures["steady_output_tok_s"] == round(inside / (end - start), 3)
