"""The load client's read path while a response streams (:class:`_Pipe`): each read of the connection goes
through aiohttp's HTTP parser into the stream's sink (:class:`orchestrator.load.client._Sink`), the body's
pieces collected in a queue per thread (:class:`_PieceReader`). Split out of :mod:`orchestrator.load.client`
(see its docstring for the timing it keeps)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import socket
import struct
import sys
import threading
import time
from typing import Any

import aiohttp

from orchestrator.load.decoders import StreamFault
from orchestrator.load.httptext import _is_page

__all__: list[str] = []

_perf = time.perf_counter
_wall = time.time

#: Linux's ``SO_TIMESTAMPNS`` (``SO_TIMESTAMPNS_OLD``: a ``struct timespec`` of CLOCK_REALTIME): the kernel stamps
#: each segment as it arrives, and ``recvmsg`` returns the stamp of the last one a read takes.
_SO_TIMESTAMPNS = 35
_STAMP_SPACE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
_KERNEL_STAMPS = sys.platform == "linux" and _STAMP_SPACE > 0 and os.environ.get("SPECSWEEP_KERNEL_STAMPS", "1") != "0"
_unpack_timespec = struct.Struct("qq").unpack_from


class _KernelReads:
    """A streamed response's reads taken by the pipe itself, with the kernel's arrival time of each.

    The transport's own reads give the bytes alone, stamped when the client's process gets to run: on a
    machine where another process keeps a core busy that is up to a scheduler slice (several ms) after they
    came, which a metronome's 50 ms TTFT read as 57. Here the socket is asked for ``SO_TIMESTAMPNS``, the
    transport stops reading (``pause_reading``), and a reader of the loop's own (on a ``dup`` of the socket's
    descriptor: the loop refuses a second reader on a transport's) reads with ``recvmsg``; a read's time is
    ``perf_counter()`` now minus how long ago (by CLOCK_REALTIME, the stamp's clock) its last segment arrived.
    At the end of the body, or on EOF or an error, the transport reads again (and sees the EOF or the error
    itself). ``SPECSWEEP_KERNEL_STAMPS=0`` turns it off; off Linux, or on a socket or loop that refuses any of
    it, reads are the transport's, stamped as they are handed over."""

    __slots__ = ("fd", "loop", "pipe", "sock", "transport")

    def __init__(self, pipe: _Pipe, transport: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.pipe = pipe
        self.transport = transport
        self.loop = loop
        raw = transport.get_extra_info("socket")
        fd = raw.fileno() if raw is not None else -1
        if fd < 0 or not transport.is_reading():
            raise OSError("no socket to read")
        dup = os.dup(fd)
        try:
            self.sock = socket.socket(fileno=dup)
            self.sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            self.sock.setblocking(False)
        except BaseException:
            os.close(dup)
            raise
        self.fd = dup
        transport.pause_reading()
        try:
            loop.add_reader(dup, self.read)
        except BaseException:
            transport.resume_reading()
            self.sock.close()
            raise

    @staticmethod
    def start(pipe: _Pipe, transport: Any) -> _KernelReads | None:
        if not _KERNEL_STAMPS:
            return None
        try:
            return _KernelReads(pipe, transport, asyncio.get_running_loop())
        except (OSError, RuntimeError, AttributeError, NotImplementedError, ValueError):
            return None

    def read(self) -> None:
        try:
            data, ancillary, _flags, _address = self.sock.recvmsg(_READ_SIZE, _STAMP_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.stop()  # the transport reads again, and meets the error itself
            return
        now = _perf()
        if not data:
            self.stop()  # EOF: the transport's to see
            return
        if ancillary:
            _level, _kind, stamp = ancillary[0]
            if len(stamp) >= 16:
                seconds, nanoseconds = _unpack_timespec(stamp)
                age = _wall() - (seconds + nanoseconds * 1e-9)
                if 0.0 < age < 1.0:  # a clock step of CLOCK_REALTIME in between: the read's own time stands
                    now -= age
        self.pipe.data_received_at(data, now)

    def stop(self) -> None:
        """The transport reads again (idempotent)."""
        if self.fd < 0:
            return
        self.loop.remove_reader(self.fd)
        self.sock.close()
        self.fd = -1
        if self.pipe.kernel is self:
            self.pipe.kernel = None
        with contextlib.suppress(AttributeError, RuntimeError):
            if not self.transport.is_closing():
                self.transport.resume_reading()


#: The most one read takes (orchestrator/load/client.py ``_READ_SIZE``: below glibc's mmap threshold).
_READ_SIZE = 64 * 1024


class _PieceReader(aiohttp.StreamReader):
    """aiohttp's body reader while a :class:`_Pipe` reads its response: every piece the parser hands it
    (``feed_data(data, size)``: once per HTTP chunk, or per part of one in a read) goes into a queue (its
    ``put``, a C function: no Python frame per piece), which the pipe empties after each read; the HTTP chunk
    boundaries (``begin_/end_http_chunk_receiving``, around every chunk) are for ``readchunk()``, which nobody
    calls here. Everything else is aiohttp's own: ``feed_eof`` ends the body and hands the connection back,
    ``set_exception`` wakes ``wait_eof()``. Same object layout as its base, so that ``__class__`` can be
    switched and switched back.

    ``feed_data`` belongs to the class, so each thread has a subclass and a queue of its own
    (:func:`_piece_reader`): a sweep runs one event loop per host slot, each in its thread, and a read's pieces
    must not meet another thread's."""

    __slots__ = ()
    pieces: queue.SimpleQueue[bytes]
    # A C builtin that takes no argument, stored as a static method, does nothing without a Python frame.
    begin_http_chunk_receiving = end_http_chunk_receiving = staticmethod(bool)  # type: ignore[assignment]


_THREAD = threading.local()


def _piece_reader() -> type[_PieceReader]:
    """This thread's :class:`_PieceReader` class, its ``feed_data`` the ``put`` of this thread's queue."""
    cls: type[_PieceReader] | None = getattr(_THREAD, "piece_reader", None)
    if cls is None:
        pieces: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        namespace = {"__slots__": (), "pieces": pieces, "feed_data": staticmethod(pieces.put)}  # put(item, block)
        cls = type("_PieceReader", (_PieceReader,), namespace)
        _THREAD.piece_reader = cls
    return cls


def _pieces_waiting() -> int:
    """Pieces in this thread's queue (none, between two reads)."""
    return _piece_reader().pieces.qsize()


class _Pipe(asyncio.Protocol):
    """The connection's protocol while one response streams: each read goes through aiohttp's HTTP parser
    into the :class:`_Sink`, with none of aiohttp's per-read Python around it.

    aiohttp's ``ResponseHandler.data_received`` reschedules its read timer and checks for upgrades and
    websockets on every read; its ``StreamReader`` then buffers each HTTP chunk and wakes the coroutine
    reading it (Python calls, a future and a task switch per chunk). For a token stream, one token per chunk,
    that is more than the parsing itself. From the moment a streamed request goes out, the transport's protocol
    is this one (``transport.set_protocol``); the reads that bring the response's headers are aiohttp's
    (:meth:`head`), and from the one that completes them on, the body's are the pipe's: a read is stamped,
    given to the parser (its body pieces collect in a queue at C speed: :class:`_PieceReader`), and the pieces
    go to the sink together (they share the read's time). Taking the body over only when the reading coroutine
    next ran left a stream's first tens of tokens, on a busy loop, to aiohttp's reader one read each. The
    coroutine sleeps in ``wait_eof()`` until the body ends (``feed_eof``, which also hands the connection back
    to the pool), the connection fails (``connection_lost``, delegated to aiohttp's handler) or the sink fails
    (it sets the exception itself). Then the handler is the protocol again, at once. The read timeout
    (``sock_read``: no byte for that long) is one timer per timeout period instead of one per read.
    """

    __slots__ = (
        "eof",
        "feed",
        "handler",
        "idle",
        "kernel",
        "last",
        "next_piece",
        "partial",
        "reader",
        "reader_class",
        "sink",
        "transport",
        "waiting",
        "watchdog",
    )

    @staticmethod
    def fits(handler: object) -> bool:
        """Whether ``handler`` is the aiohttp protocol this was written against (else: the ordinary way)."""
        return (
            handler is not None
            and all(hasattr(handler, name) for name in _HANDLER_PARTS)
            and getattr(handler, "_parser", None) is not None
            and not getattr(handler, "_upgraded", True)
            and getattr(handler, "_payload_parser", True) is None
            and hasattr(getattr(handler, "transport", None), "set_protocol")
        )

    def __init__(
        self, handler: Any, reader: aiohttp.StreamReader | None, sink: Any
    ) -> None:  # the client's _Sink (not imported: no circle)
        """Become the connection's protocol; with ``reader`` (the response's body reader, its headers read) take
        the body over now, else when the headers come (:meth:`head`)."""
        self.handler = handler
        self.reader: aiohttp.StreamReader | None = None
        self.sink = sink
        self.feed = handler._parser.feed_data
        self.transport = handler.transport
        self.eof = False
        self.partial = b""  # the last bytes of a read that did not complete the headers (head)
        self.last = _perf()
        self.idle: float | None = None
        self.watchdog: asyncio.TimerHandle | None = None
        self.reader_class = _piece_reader()
        self.waiting = self.reader_class.pieces.qsize
        self.next_piece = self.reader_class.pieces.get_nowait
        self.transport.set_protocol(self)
        self.kernel: _KernelReads | None = _KernelReads.start(self, self.transport)
        if reader is not None:
            try:
                self.take_over(reader, _perf())
            except BaseException:
                self.restore()
                raise

    def head(self, data: bytes, now: float | None = None) -> None:
        """A read before the response's headers were complete: aiohttp's handler reads the headers. Once they
        are, the body is this pipe's if it is the stream the request waits for (status 200, not JSON nor a web
        page, a body still to come); else the handler is the protocol again, for the rest of this response. The
        handler is given the headers alone: a body that came with them (all of it, when the loop came late to this
        connection) then goes the pipe's way, not into aiohttp's reader one HTTP chunk at a time (each taken
        out of it again with a Python call and a ``resume_reading``)."""
        now = _perf() if now is None else now
        handler = self.handler
        partial = self.partial
        probe = partial + data if partial else data
        end = probe.find(b"\r\n\r\n")
        if end < 0:
            self.partial = probe[-3:]
            handler.data_received(data)
            return
        split = end + 4 - len(partial)
        self.partial = b""
        rest = data[split:]
        handler.data_received(data[:split] if rest else data)
        queued = handler._buffer
        if not queued:
            if rest:
                handler.data_received(rest)  # not the end of a response's headers after all: aiohttp decides
            return
        (message, reader), _ = queued[-1]
        if (
            message.code == 200
            and type(reader) is aiohttp.StreamReader
            and reader is handler._payload
            and "json" not in message.headers.get("Content-Type", "")
            and not _is_page(message.headers.get("Content-Type", ""))  # a web page is read whole (send)
            and not reader.is_eof()
            and reader.exception() is None
            and not handler._upgraded
            and self.transport.get_protocol() is self
        ):
            self.take_over(reader, now)
            if rest and self.reader is not None and self.transport.get_protocol() is self:
                self.body(rest, now)
        else:
            self.restore()
            if rest:
                handler.data_received(rest)

    def take_over(self, reader: aiohttp.StreamReader, now: float) -> None:
        """From here on the body's reads are this pipe's; what aiohttp's reader holds goes to the sink first,
        read at ``now``."""
        handler = self.handler
        self.reader = reader
        self.last = now
        self.idle = handler.read_timeout or None
        handler._drop_timeout()  # aiohttp's per-read timer; the watchdog below stands in for it
        if self.idle:
            self.watchdog = asyncio.get_running_loop().call_later(self.idle, self.watch)
        pending = reader.read_nowait()  # what came with the headers (raises if the connection broke)
        reader.on_eof(self.ended)
        reader.__class__ = self.reader_class
        sink = self.sink
        sink.pipe = self
        if pending and sink.error is None:
            sink.feed(pending, now)
            if sink.error is not None:
                self.fail(sink.error)
        if reader.is_eof():
            self.restore()

    def data_received(self, data: bytes) -> None:
        self.data_received_at(data, _perf())

    def data_received_at(self, data: bytes, now: float) -> None:
        """A read that came at ``now`` (the transport's, or :class:`_KernelReads`' with the kernel's time)."""
        if self.reader is None:
            self.head(data, now)
        else:
            self.body(data, now)

    def body(self, data: bytes, now: float) -> None:
        """A read of the body, at ``now``."""
        self.last = now
        try:
            messages, upgraded, tail = self.feed(data)
        except BaseException as exc:
            self.drain(now)
            self.broken(exc)
            if not isinstance(exc, Exception):
                raise
            return
        n = self.waiting()
        if n:
            next_piece = self.next_piece
            body = next_piece() if n == 1 else b"".join([next_piece() for _ in range(n)])
            sink = self.sink
            if sink.error is None:
                try:
                    sink.take(body, now)
                except Exception as exc:  # a StreamFault, or a bug: either way it ends this request, not the run
                    self.fail(exc)
        if messages or upgraded or tail:
            # A response nobody asked for after this one: not HTTP as a client knows it. aiohttp would queue it
            # for the next request on this connection; the connection is closed instead.
            self.handler._should_close = True
            self.transport.close()
        if self.eof:
            self.restore()

    def drain(self, now: float) -> None:
        """Give the sink what is left in the queue (nothing, unless taking the first piece failed)."""
        n = self.waiting()
        if n:
            pieces = b"".join([self.next_piece() for _ in range(n)])
            if self.sink.error is None:
                self.sink.feed(pieces, now)
                if self.sink.error is not None:
                    self.fail(self.sink.error)

    def fail(self, exc: BaseException) -> None:
        self.sink.error = exc
        if self.reader is not None and self.reader.exception() is None:
            self.reader.set_exception(exc)  # wakes wait_eof() with it

    def broken(self, exc: BaseException) -> None:
        """The parser refused the bytes: what aiohttp's handler does then (close, and fail the response)."""
        self.restore()
        self.transport.close()
        fault = StreamFault("protocol", f"not valid HTTP: {exc!r}")
        self.handler.set_exception(fault, exc)
        self.fail(fault)

    def ended(self) -> None:
        self.eof = True  # the body's last byte (feed_eof); restored at the end of this read

    def watch(self) -> None:
        """No byte for the read timeout: aiohttp's own handling of it (a stall); else look again later."""
        self.watchdog = None
        if self.idle is None or self.transport.get_protocol() is not self:
            return
        quiet = _perf() - self.last
        if quiet >= self.idle:
            self.handler._on_read_timeout()
        else:
            self.watchdog = asyncio.get_running_loop().call_later(self.idle - quiet, self.watch)

    def restore(self) -> None:
        """The handler is the connection's protocol again, the reader aiohttp's own, the reads the transport's
        (idempotent)."""
        if self.kernel is not None:
            self.kernel.stop()
        if self.watchdog is not None:
            self.watchdog.cancel()
            self.watchdog = None
        if self.reader is not None and type(self.reader) is self.reader_class:
            self.reader.__class__ = aiohttp.StreamReader  # type: ignore[assignment]
        if self.transport.get_protocol() is self:
            self.transport.set_protocol(self.handler)

    # Everything but reads is the handler's.
    def connection_lost(self, exc: BaseException | None) -> None:
        self.drain(_perf())
        self.restore()
        self.handler.connection_lost(exc)

    def eof_received(self) -> bool | None:
        answer: bool | None = self.handler.eof_received()
        return answer

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()


_HANDLER_PARTS = (
    "_parser",
    "_payload",
    "_buffer",
    "_drop_timeout",
    "_on_read_timeout",
    "read_timeout",
    "set_exception",
    "data_received",
)
