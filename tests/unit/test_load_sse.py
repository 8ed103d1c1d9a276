"""The SSE reader: the fast path, the WHATWG rules, and bytes split anywhere."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.load.sse import SSEParser


def parse(*chunks: bytes) -> list[tuple[str | None, bytes]]:
    parser = SSEParser()
    events = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.close())
    return events


@pytest.mark.parametrize(
    ("stream", "expected"),
    [
        pytest.param(b"data: {}\n\n", [(None, b"{}")], id="one-event"),
        pytest.param(b"data:{}\n\n", [(None, b"{}")], id="no-space"),
        pytest.param(b"data:  x\n\n", [(None, b" x")], id="only-one-space-stripped"),
        pytest.param(b"data: a\r\n\r\ndata: b\r\n\r\n", [(None, b"a"), (None, b"b")], id="crlf"),
        pytest.param(b"data: a\r\rdata: b\r\r", [(None, b"a"), (None, b"b")], id="cr"),
        pytest.param(b": keep-alive\n\ndata: a\n\n", [(None, b"a")], id="comment-block"),
        pytest.param(b": ping\ndata: a\n\n", [(None, b"a")], id="comment-in-block"),
        pytest.param(b"data: a\ndata: b\n\n", [(None, b"a\nb")], id="multi-line-data"),
        pytest.param(b"event: error\ndata: {}\n\n", [("error", b"{}")], id="event-type"),
        pytest.param(b"id: 7\nretry: 100\ndata: a\n\n", [(None, b"a")], id="id-retry-ignored"),
        pytest.param(b"data\n\n", [(None, b"")], id="field-without-colon"),
        pytest.param(b"event: ping\n\n", [], id="event-without-data"),
        pytest.param(b"\n\n\n\ndata: a\n\n\n\n", [(None, b"a")], id="extra-blank-lines"),
        pytest.param(b"\xef\xbb\xbfdata: a\n\n", [(None, b"a")], id="bom"),
        pytest.param(b"data: a\n\ndata: [DONE]", [(None, b"a"), (None, b"[DONE]")], id="tail-without-blank"),
        pytest.param(b"data: a\n\ndata: b\n", [(None, b"a"), (None, b"b")], id="tail-single-newline"),
        pytest.param("data: é\n\n".encode(), [(None, "é".encode())], id="utf8"),
    ],
)
def test_parses(stream: bytes, expected: list[tuple[str | None, bytes]]) -> None:
    assert parse(stream) == expected


def test_counts_comments() -> None:
    parser = SSEParser()
    parser.feed(b": a\n\n: b\ndata: x\n\n")
    assert parser.comments == 2


def test_crlf_split_between_cr_and_lf() -> None:
    assert parse(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n") == [(None, b"a"), (None, b"b")]


def test_events_come_out_as_soon_as_complete() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\n") == []
    assert parser.feed(b"\ndata: b") == [(None, b"a")]
    assert parser.feed(b"\n\n") == [(None, b"b")]
    assert parser.close() == []


_event = st.tuples(
    st.sampled_from([None, "error", "message"]),
    st.lists(st.binary(max_size=20).filter(lambda b: b"\n" not in b and b"\r" not in b), min_size=1, max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(_event, max_size=8),
    newline=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    comments=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_any_split_gives_the_same_events(
    events: list[tuple[str | None, list[bytes]]], newline: bytes, comments: bool, cuts: list[int]
) -> None:
    stream = b""
    expected = []
    for event_type, lines in events:
        if comments:
            stream += b": keep-alive" + newline
        if event_type is not None:
            stream += b"event: " + event_type.encode() + newline
        for line in lines:
            stream += b"data: " + line + newline
        stream += newline
        expected.append((event_type, b"\n".join(lines)))
    points = sorted({min(c, len(stream)) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert parse(*chunks) == expected
    assert parse(stream) == expected


def test_a_field_that_only_starts_with_data_is_not_data() -> None:
    assert parse(b"database: x\n\ndata: y\n\n") == [(None, b"y")]
