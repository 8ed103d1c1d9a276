"""Durations in experiment files: ``900s``, ``15m``, ``1h``, ``1h30m``, ``250ms``, or a plain number of seconds."""

from __future__ import annotations

import math
import re

__all__ = ["format_duration", "parse_duration"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


#: The longest duration an experiment may give: a year (what is longer is a typo, and waits for ever).
MAX_SECONDS = 366 * 86400.0


def _checked(seconds: float, value: object) -> float:
    if math.isnan(seconds) or math.isinf(seconds):
        raise ValueError(f"a duration is a finite number of seconds, got {value!r}")
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {value!r}")
    if seconds > MAX_SECONDS:
        raise ValueError(f"a duration of more than a year ({MAX_SECONDS:g}s) is not one, got {value!r}")
    return seconds


def parse_duration(value: object) -> float:
    """Seconds from a duration value; raises ``ValueError`` with a message fit for a user."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration like 900s, 15m or 1h, got {value!r}")
    if isinstance(value, int | float):
        return _checked(float(value), value)
    if not isinstance(value, str):
        raise ValueError(f"expected a duration like 900s, 15m or 1h, got {value!r}")
    text = value.strip().replace(" ", "")
    if not text:
        raise ValueError("expected a duration like 900s, 15m or 1h, got an empty string")
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return _checked(seconds, value)
    pos = 0
    total = 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"expected a duration like 900s, 15m, 1h or 1h30m, got {value!r}")
    return _checked(total, value)


def format_duration(seconds: float) -> str:
    """A short human form: ``45s``, ``12m05s``, ``2h03m``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
