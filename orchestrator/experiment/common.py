"""What every section's model is built of: the strict base model, durations and scalars, the whole-string
patterns of names, units and URLs, and the check that a path, URL or name holds no control character."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict

from orchestrator.experiment.durations import parse_duration

__all__ = ["Duration", "Scalar", "read_regular_file"]

Duration = Annotated[float, BeforeValidator(parse_duration)]
Scalar = str | int | float | bool

# Whole-string patterns, always used with fullmatch (``re.match`` with ``$`` accepts a trailing newline).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_UNIT = re.compile(r"[A-Za-z0-9:_.\\@-]{1,240}\.service")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_URL = re.compile(r"https?://[^\s/?#]+(?:[/?#]\S*)?")
#: C0 and C1 controls, DEL and the Unicode line separators: never part of a path, URL, host or name.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _no_control(value: str | None, what: str) -> str | None:
    """``value`` unchanged, or a ValueError naming the control character a path, URL or name cannot hold."""
    if value is not None:
        hit = _CONTROL.search(value)
        if hit:
            raise ValueError(f"{what} cannot contain the control character {hit.group()!r}")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def read_regular_file(path: Path, limit: int, *, what: str = "the file") -> bytes:
    """At most ``limit`` bytes of the regular file ``path``; a ValueError saying why not. The file is opened
    without blocking and checked before it is read, so a FIFO (which would wait for a writer for ever) or a
    device like /dev/zero (which never ends) is refused instead of hanging or filling the memory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise ValueError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{what} {path} is not a regular file (a FIFO, a device or a directory)")
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise ValueError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
