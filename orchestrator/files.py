"""Reading files anyone may have put there, bounded: regular files only, never more than a limit.

A FIFO named ``records.jsonl`` blocks a plain ``open`` forever (and ignores SIGINT while it waits), a link to
``/dev/zero`` never ends, a 4 GB experiment file or a crash's 1 GB NUL tail ends in ``MemoryError``.

    read_bounded(path, limit)     the bytes of a regular file of at most ``limit`` bytes
    bounded_lines(path)           its lines, one at a time, each cut at ``MAX_LINE`` bytes (the rest of an
                                  over-long line is skipped, never held)

    read_start(path, count)       at most the first ``count`` bytes of a regular file, whatever its size

They raise :class:`NotReadable` (an ``OSError``, so every caller's ``except OSError`` still answers) saying
why: not a regular file (a FIFO, a device, a directory), or larger than the limit. Opening never blocks: the
file is opened non-blocking, checked with ``fstat``, and only then read.

Writing a file into a directory anyone may have filled (a run directory copied from elsewhere) goes the same
careful way: :func:`write_atomic` writes a new temporary file of a fresh name (``O_EXCL``: never through a
link planted there) and renames it over the target, so a symbolic link named like an output is replaced, never
written through to the file it points at.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MAX_LINE", "NotReadable", "bounded_lines", "read_bounded", "read_start", "write_atomic"]

#: The longest line read whole; a longer one (a NUL tail, a forged record) is cut here and its rest skipped.
MAX_LINE = 16 * 1024 * 1024
_CHUNK = 1024 * 1024


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: The process's umask, read once at import (reading it means setting it, which must not race a thread).
_UMASK = _read_umask()


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


def read_start(path: str | Path, count: int) -> bytes:
    """At most the first ``count`` bytes of the regular file ``path`` (NotReadable when it is not one)."""
    fd = _open_regular(path)
    try:
        chunks: list[bytes] = []
        total = 0
        while total < count:
            chunk = os.read(fd, min(_CHUNK, count - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: bytes | str, *, fsync: bool = False) -> None:
    """Write ``data`` (a str as UTF-8) to ``path`` whole or not at all: into a new temporary file of a fresh
    name beside it, then renamed over it (a link at ``path`` is replaced, not followed). With ``fsync`` the
    file and the directory entry are on disk before it returns. The temporary file is removed on failure."""
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, 0o666 & ~_UMASK)  # as open() would make it (mkstemp makes it 0600)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


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
