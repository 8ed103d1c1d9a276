"""Reading files anyone may have put there, bounded: regular files only, never more than a limit.

A FIFO named ``records.jsonl`` blocks a plain ``open`` forever (and ignores SIGINT while it waits), a link to
``/dev/zero`` never ends, a 4 GB experiment file or a crash's 1 GB NUL tail ends in ``MemoryError``.

    read_bounded(path, limit)     the bytes of a regular file of at most ``limit`` bytes
    bounded_lines(path)           its lines, one at a time, each cut at ``MAX_LINE`` bytes (the rest of an
                                  over-long line is skipped, never held)

Both raise :class:`NotReadable` (an ``OSError``, so every caller's ``except OSError`` still answers) saying
why: not a regular file (a FIFO, a device, a directory), or larger than the limit. Opening never blocks: the
file is opened non-blocking, checked with ``fstat``, and only then read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MAX_LINE", "NotReadable", "bounded_lines", "read_bounded"]

#: The longest line read whole; a longer one (a NUL tail, a forged record) is cut here and its rest skipped.
MAX_LINE = 16 * 1024 * 1024
_CHUNK = 1024 * 1024


class NotReadable(OSError):
    """A file that is not a regular file, or larger than what is read of it."""


def _open_regular(path: str | Path) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) else "a device or socket"
            raise NotReadable(errno.EINVAL, f"not a regular file ({kind})", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bounded(path: str | Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``; NotReadable when it is not one or holds more than ``limit``."""
    fd = _open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise NotReadable(errno.EFBIG, f"{size} bytes, more than the {limit} read of it", str(path))
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while read
                raise NotReadable(errno.EFBIG, f"more than the {limit} bytes read of it", str(path))
        return b"".join(chunks)
    finally:
        os.close(fd)


def bounded_lines(path: str | Path, *, max_line: int = MAX_LINE) -> Iterator[bytes]:
    """The lines of the regular file ``path`` (with their newline), each at most ``max_line`` bytes: a longer
    one is given cut, and the rest of it skipped without being held."""
    fd = _open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        while True:
            line = fh.readline(max_line)
            if not line:
                return
            if len(line) == max_line and not line.endswith(b"\n"):
                while True:  # skip to the end of the over-long line
                    rest = fh.readline(_CHUNK)
                    if not rest or rest.endswith(b"\n"):
                        break
            yield line
