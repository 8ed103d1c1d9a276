"""An incremental Server-Sent Events reader that tolerates what real inference servers send.

Bytes arrive split anywhere (inside a line ending, inside a UTF-8 character, inside ``data:``); lines end in
``\\n``, ``\\r\\n`` or ``\\r``; comments (``: keep-alive``) and ``id:``/``retry:`` fields appear between
events; an ``event:`` field names error events. The common case, one ``data: {...}`` line per event, takes a
fast path (one split per network read, no per-line loop), because at C=512 this code runs for every token.

Data stays ``bytes``: ``json.loads`` accepts it, and decoding only what is parsed is cheaper. Two leniencies
beyond the WHATWG rules, both seen in the wild: the tail of a stream that ends without a blank line is still
delivered by :meth:`SSEParser.close`, and a BOM at the start is dropped.
"""

from __future__ import annotations

__all__ = ["SSEEvent", "SSEParser"]

# (event type or None for the default "message", data)
SSEEvent = tuple[str | None, bytes]

_BOM = b"\xef\xbb\xbf"


class SSEParser:
    """Feed raw body bytes with :meth:`feed`; each call returns the events completed by those bytes."""

    __slots__ = ("_buf", "_comments", "_cr_pending", "_started")

    def __init__(self) -> None:
        self._buf = b""
        self._cr_pending = False  # the last chunk ended in "\r": a "\n" starting the next one belongs to it
        self._started = False
        self._comments = 0

    @property
    def comments(self) -> int:
        """Comment lines seen so far (keep-alives); informational."""
        return self._comments

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            return []
        if not self._started:
            self._started = True
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
        if self._cr_pending:
            self._cr_pending = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._cr_pending = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf + chunk if self._buf else chunk
        if b"\n\n" not in buf:
            self._buf = buf
            return []
        blocks = buf.split(b"\n\n")
        self._buf = blocks.pop()
        events: list[SSEEvent] = []
        for block in blocks:
            # Fast path: exactly one "data:" line and nothing else in the block (one copy of the payload).
            if block.startswith(b"data") and b"\n" not in block:
                if block.startswith(b"data: "):
                    events.append((None, block[6:]))
                elif block.startswith(b"data:"):
                    events.append((None, block[5:]))
                elif block == b"data":
                    events.append((None, b""))
                # else a field whose name only starts with "data" (like "database:"): ignored
            elif block:
                self._slow_block(block, events)
        return events

    def close(self) -> list[SSEEvent]:
        """The stream ended: deliver an event left without its closing blank line (lenient, see module doc)."""
        tail, self._buf = self._buf, b""
        events: list[SSEEvent] = []
        if tail.strip():
            self._slow_block(tail, events)
        return events

    def _slow_block(self, block: bytes, events: list[SSEEvent]) -> None:
        """Parse a block line by line (WHATWG rules); a blank line inside it dispatches as well."""
        data_lines: list[bytes] = []
        event_type: str | None = None
        for line in block.split(b"\n"):
            if not line:
                if data_lines:
                    events.append((event_type, b"\n".join(data_lines)))
                data_lines = []
                event_type = None
                continue
            if line[:1] == b":":
                self._comments += 1
                continue
            name, sep, value = line.partition(b":")
            if sep and value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                data_lines.append(value)
            elif name == b"event":
                event_type = value.decode("utf-8", "replace") or None
            # "id", "retry" and unknown fields are ignored, as the standard says.
        if data_lines:
            events.append((event_type, b"\n".join(data_lines)))
