"""The load client's per-token shortcuts read exactly what the general way reads.

Each shortcut is checked against the slower code it stands in for, on generated input: the typed msgspec
decoding of OpenAI chunks against the dict decoding (``Decoder.on_event``), the one-event chunk against the SSE
parser, the body reader's fast path against the sink's general path, and the numpy figures against the
per-token loops they replaced. No timing is asserted anywhere.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
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
    # What would read as several values, or none, if a read's events were decoded together without care:
    st.sampled_from([b"", b" ", b"{} {}", b'{"choices": []}{"choices": []}', b"{}\n{}", b"{}\n", b'{"a":\n1}']),
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


def _run_reads(api: str, events: list[bytes], sizes: list[int], batched: bool) -> dict[str, Any]:
    """The events in reads of ``sizes`` events, each read's events sharing its time: ``on_events`` per read, or
    ``on_event`` per event."""
    record = RequestRecord(index=0)
    dec = DECODERS[api](record)
    total = 0
    fault = None
    start = 0
    try:
        for k, size in enumerate(sizes):
            batch = events[start : start + size]
            start += size
            if batched:
                total += dec.on_events(batch, 1.0 + k)
            else:
                for data in batch:
                    total += dec.on_event(data, 1.0 + k)
    except StreamFault as exc:
        fault = (exc.kind, str(exc))
        total = -1  # what the read that failed had counted is not returned either way
    dec.finish()
    out = record.to_dict()
    out.update(times=record.chunk_times, tokens=record.chunk_tokens, total=total, fault=fault, done=dec.done)
    return out


@settings(max_examples=500, deadline=None)
@given(
    api=st.sampled_from(["chat", "completions", "generate", "llamacpp"]),
    events=st.lists(_event, min_size=1, max_size=12),
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=12),
)
def test_the_events_of_one_read_read_as_one_by_one(api: str, events: list[bytes], sizes: list[int]) -> None:
    sizes = [*sizes, len(events)]  # whatever the sizes leave goes in a last read
    assert _run_reads(api, events, sizes, batched=True) == _run_reads(api, events, sizes, batched=False)


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


@settings(max_examples=400, deadline=None)
@given(chunk=st.lists(_piece | st.just(b"\xef\xbb\xbf"), min_size=1, max_size=10))
def test_data_only_at_the_start_is_what_a_fresh_parser_makes_of_the_chunk(chunk: list[bytes]) -> None:
    # A stream's first read (with a late loop, the whole response) takes the fast path too.
    data = b"".join(chunk)
    fresh, reference = SSEParser(), SSEParser()
    payloads = fresh.data_only(data)
    events = reference.feed(data)
    if payloads is not None:
        assert events == [(None, p) for p in payloads]
        assert fresh.clean and reference.clean
        follow = b"\xef\xbb\xbfdata: x\n\n"  # a BOM is the start's only: later, it is data like any other
        assert fresh.feed(follow) == reference.feed(follow)


def test_data_only_takes_a_fresh_parser_s_first_read() -> None:
    assert SSEParser().data_only(b"data: a\n\ndata: b\n\n") == [b"a", b"b"]
    assert SSEParser().data_only(b"\xef\xbb\xbfdata: a\n\n") is None  # the parser drops the BOM


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


class _Transport:
    def __init__(self) -> None:
        self.protocol: object = None
        self.closed = False

    def set_protocol(self, protocol: object) -> None:
        self.protocol = protocol

    def get_protocol(self) -> object:
        return self.protocol

    def close(self) -> None:
        self.closed = True


_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
_PARSERS = [aiohttp.http_parser.HttpResponseParserPy]
if hasattr(aiohttp.http_parser, "HttpResponseParserC"):
    _PARSERS.append(aiohttp.http_parser.HttpResponseParserC)


def _chunked(pieces: list[bytes]) -> bytes:
    """The body as an HTTP/1.1 chunked response, one HTTP chunk per piece (as an engine writes its events)."""
    return b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in pieces if p) + b"0\r\n\r\n"


def _sink(read_time: list[float]) -> tuple[Any, RequestRecord, Any, SimpleNamespace]:
    record = RequestRecord(index=0)
    decoder = DECODERS["chat"](record)
    owner = SimpleNamespace(tokens_seen=0)
    sink = client_module._Sink(owner, decoder, record, _Timeout(), 0.0)  # type: ignore[arg-type]
    return sink, record, decoder, owner


def _outcome(sink: Any, record: RequestRecord, decoder: Any, owner: SimpleNamespace) -> dict[str, Any]:
    error = repr(sink.error) if sink.error is not None else None
    decoder.finish()
    return {"record": record.to_dict(), "tokens": record.chunk_tokens, "seen": owner.tokens_seen, "error": error}


def _read_both_ways(parser_class: Any, pieces: list[bytes], cuts: list[int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The response cut into reads at ``cuts``: through a _Pipe (aiohttp's parser feeding the queue, the sink
    taking each read's pieces), and through aiohttp's parser into its own StreamReader with every read's body
    bytes fed to the sink the general way. Every read has its own time, the same both ways."""
    raw = _HEAD + _chunked(pieces)
    bounds = sorted({0, len(raw), *(c for c in cuts if c < len(raw))})
    reads = [raw[a:b] for a, b in itertools.pairwise(bounds)]
    read_time = [0.0]

    async def read(piped: bool) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        protocol = SimpleNamespace(pause_reading=lambda: None, resume_reading=lambda **kw: None, connected=True)
        parser = parser_class(protocol, loop, 1 << 16, max_line_size=8190, max_field_size=8190)
        sink, record, decoder, owner = _sink(read_time)
        pipe = None
        transport = _Transport()
        reader: aiohttp.StreamReader | None = None
        for k, data in enumerate(reads):
            read_time[0] = 1.0 + k
            if reader is None:  # the head is aiohttp's own, as in the client
                messages, _, tail = parser.feed_data(data)
                if not messages:
                    continue
                reader = messages[0][1]
                assert not tail
                pending = reader.read_nowait()
                if pending:
                    sink.feed(pending, read_time[0])
                if piped and not reader.is_eof() and sink.error is None:
                    handler = SimpleNamespace(
                        _parser=parser,
                        transport=transport,
                        read_timeout=None,
                        _drop_timeout=lambda: None,
                        set_exception=lambda exc, cause=None: None,
                    )
                    pipe = client_module._Pipe(handler, reader, sink)
                continue
            if pipe is not None and transport.get_protocol() is pipe:
                pipe.data_received(data)
            elif not piped and not reader.is_eof():
                parser.feed_data(data)
                if reader.exception() is None:
                    body = reader.read_nowait()
                    if body:
                        sink.feed(body, read_time[0])
        if pipe is not None:
            if sink.error is None:
                assert transport.get_protocol() is not pipe  # the body ended: the handler is the protocol again
                assert type(reader) is aiohttp.StreamReader
            pipe.restore()  # what the reading coroutine does when it wakes (after a failure: the only restore)
            assert transport.get_protocol() is not pipe
            assert type(reader) is aiohttp.StreamReader
        assert client_module._pieces_waiting() == 0
        if sink.error is None:
            try:
                sink.close()
            except StreamFault as fault:
                sink.error = fault
        return _outcome(sink, record, decoder, owner)

    from orchestrator.load import pipe as pipe_module  # the pipe's reads: split out of the client

    perf = client_module._perf
    client_module._perf = pipe_module._perf = lambda: read_time[0]
    try:
        return asyncio.run(read(True)), asyncio.run(read(False))
    finally:
        client_module._perf = pipe_module._perf = perf


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
@given(
    parser_class=st.sampled_from(_PARSERS),
    events=st.lists(st.one_of(_token, _other), min_size=1, max_size=10),
    splits=st.lists(st.integers(0, 400)),
    cuts=st.lists(st.integers(0, 600)),
)
def test_the_pipe_reads_what_the_sink_reads(
    parser_class: Any, events: list[bytes], splits: list[int], cuts: list[int]
) -> None:
    # One event per HTTP chunk, as engines write them, and the body cut into chunks anywhere; each read in
    # pieces anywhere, the head included.
    body = b"".join(events)
    bounds = sorted({0, len(body), *(c for c in splits if c < len(body))})
    anywhere = [body[a:b] for a, b in itertools.pairwise(bounds)]
    for pieces in (events, anywhere):
        piped, plain = _read_both_ways(parser_class, pieces, cuts)
        assert piped == plain


def test_each_thread_has_its_own_queue_of_pieces() -> None:
    # A sweep runs an event loop per host slot, each in a thread: what one thread's parser hands over during a
    # read must land in that thread's queue only.
    classes: dict[str, Any] = {}

    def take(name: str) -> None:
        cls = client_module._piece_reader()
        assert client_module._piece_reader() is cls
        cls.feed_data(name.encode(), 0)
        classes[name] = cls

    threads = [threading.Thread(target=take, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    a, b = classes["a"], classes["b"]
    assert a is not b and a.pieces is not b.pieces
    assert issubclass(a, client_module._PieceReader) and a.__slots__ == ()
    assert (a.pieces.get_nowait(), b.pieces.get_nowait()) == (b"a", b"b")
    assert a.pieces.qsize() == b.pieces.qsize() == 0
    assert client_module._piece_reader() not in (a, b)


def test_the_pipe_takes_a_read_of_one_event_and_one_of_several() -> None:
    events = [_sse({"choices": [{"index": 0, "delta": {"content": "a"}}], "usage": {"completion_tokens": i}})
              for i in range(1, 5)]  # fmt: skip
    events.append(b"data: [DONE]\n\n")
    raw = _HEAD + _chunked(events)
    first = raw.index(b"data: ", len(_HEAD))  # the head alone, then one event, then the rest in one read
    second = raw.index(b"\r\n", raw.index(b"\n\n", first)) + 2
    piped, plain = _read_both_ways(_PARSERS[-1], events, [first, second])
    assert piped == plain
    assert piped["error"] is None
    assert piped["tokens"] == [1, 1, 1, 1]
    assert piped["record"]["output_tokens"] == 4


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
