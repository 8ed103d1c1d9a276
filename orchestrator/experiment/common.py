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

__all__ = ["MAX_SETTING", "MAX_SETTING_CHARS", "Duration", "Scalar", "read_regular_file", "setting_problem"]

Duration = Annotated[float, BeforeValidator(parse_duration)]
Scalar = str | int | float | bool

#: The largest magnitude of a number a matrix, an include/exclude entry or a template field gives: 2^53, the
#: largest integer the analysis's float64 columns hold exactly (a matrix value of 10^300 passed and then broke
#: the report's frame; issue 58, R15). No engine setting comes near it.
MAX_SETTING = 2**53
#: The longest text such a value may be: far above any command-line value (a JSON speculative config is a few
#: hundred characters), far below what makes every table, label and name of the run megabytes long.
MAX_SETTING_CHARS = 4096


def setting_problem(value: object) -> str | None:
    """Why ``value`` (a matrix value, an include/exclude value, a template field) is no server setting: a
    number beyond +-:data:`MAX_SETTING` or not finite, a text longer than :data:`MAX_SETTING_CHARS`; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if not -MAX_SETTING <= value <= MAX_SETTING:  # NaN compares false too
            # an int past 10^308 has no float, and str() of one past 4,300 digits raises: its size is said
            shown = f"{value:.3g}" if isinstance(value, float) else f"about 10^{int(abs(value).bit_length() * 0.30103)}"
            return f"{shown} is no setting (a number is finite and at most 2^53 = {MAX_SETTING} in size)"
    elif isinstance(value, str) and len(value) > MAX_SETTING_CHARS:
        return f"a text of {len(value):,} characters is no setting (at most {MAX_SETTING_CHARS:,})"
    return None


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
