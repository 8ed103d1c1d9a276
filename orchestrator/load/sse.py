"""An incremental Server-Sent Events reader that tolerates what real inference servers send.

Bytes arrive split anywhere (inside a line ending, inside a UTF-8 character, inside ``data:``); lines end in
``\\n``, ``\\r\\n`` or ``\\r``; comments (``: keep-alive``) and ``id:``/``retry:`` fields appear between
events; an ``event:`` field names error events. The common case, one ``data: {...}`` line per event, takes a
fast path (one split per network read, no per-line loop), because at C=512 this code runs for every token.

Data stays ``bytes``: ``json.loads`` accepts it, and decoding only what is parsed is cheaper. Searches use
``bytes.find``, never ``in``: CPython's ``bytes.__contains__`` first tries its argument as an integer and raises
and clears a ``TypeError`` (a formatted message) before it searches, several times the cost of the search.

Two leniencies beyond the WHATWG rules, both seen in the wild: the tail of a stream that ends without a blank
line is still delivered by :meth:`SSEParser.close`, and a BOM at the start is dropped.
"""

from __future__ import annotations

__all__ = ["SSEEvent", "SSEParser", "single_event"]

# (event type or None for the default "message", data)
SSEEvent = tuple[str | None, bytes]

_BOM = b"\xef\xbb\xbf"


class SSEParser:
    """Feed raw body bytes with :meth:`feed`; each call returns the events completed by those bytes."""

    __slots__ = ("_buf", "_comments", "_cr_pending", "_started", "clean")

    def __init__(self) -> None:
        self._buf = b""
        self._cr_pending = False  # the last chunk ended in "\r": a "\n" starting the next one belongs to it
        self._started = False
        self._comments = 0
        # Between events: nothing held back, past the start of the stream. A caller may then take a piece that
        # is exactly one "data: ...\n\n" event (no other line break, no "\r") as that event without feeding it
        # (see :func:`single_event`): the result is the same, and the parser stays clean.
        self.clean = False

    @property
    def pending(self) -> int:
        """Bytes held back: an event not ended yet (a caller that bounds an event's size reads it)."""
        return len(self._buf)

    @property
    def comments(self) -> int:
        """Comment lines seen so far (keep-alives); informational."""
        return self._comments

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            return []
        self.clean = False
        if not self._started:
            self._started = True
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
        if self._cr_pending:
            self._cr_pending = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if chunk.find(b"\r") >= 0:
            self._cr_pending = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf + chunk if self._buf else chunk
        if buf.find(b"\n\n") < 0:
            self._buf = buf
            self.clean = False
            return []
        blocks = buf.split(b"\n\n")
        self._buf = blocks.pop()
        self.clean = not self._buf and not self._cr_pending
        events: list[SSEEvent] = []
        for block in blocks:
            # Fast path: exactly one "data:" line and nothing else in the block (one copy of the payload).
            if block.startswith(b"data") and block.find(b"\n") < 0:
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

    def data_only(self, chunk: bytes) -> list[bytes] | None:
        """The data of every event in ``chunk`` when the parser is clean (or has been fed nothing yet: a stream's
        first read, all of a short response when the loop came late to it) and ``chunk`` is nothing but whole
        ``data: ...`` events, one line each, with their blank lines (no ``\r``, no other line break): what
        :meth:`feed` would return for it, without the event types. Else None (then call :meth:`feed`).

        Checked with C-level searches instead of a loop over lines: ``chunk`` is ``data: `` + S + a blank line;
        S split at every ``\n\ndata: `` (a search that skips ahead) gives the payloads, and when no payload
        holds a line break (a ``memchr`` each), every line break of the chunk is one of those blank lines."""
        if not self.clean and self._started:
            return None
        if chunk[:6] != b"data: " or chunk[-2:] != b"\n\n" or chunk.find(b"\r") >= 0:
            return None
        payloads = chunk[6:-2].split(b"\n\ndata: ")
        for payload in payloads:
            if payload.find(b"\n") >= 0:
                return None
        if not self._started:  # a fresh parser: a chunk that starts with "data: " has no BOM to drop
            self._started = True
            self.clean = True
        return payloads

    def close(self) -> list[SSEEvent]:
        """The stream ended: deliver an event left without its closing blank line (lenient, see module doc)."""
        tail, self._buf = self._buf, b""
        self.clean = False
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


def single_event(chunk: bytes) -> bytes | None:
    """The data of ``chunk`` if it is exactly one ``data: ...`` event with its blank line and nothing else (no
    other line break, no ``\r``): what a real engine writes per HTTP chunk. Else None."""
    if (
        chunk.endswith(b"\n\n")
        and chunk.startswith(b"data: ")
        and chunk.find(b"\n") == len(chunk) - 2
        and chunk.find(b"\r") < 0
    ):
        return chunk[6:-2]
    return None
