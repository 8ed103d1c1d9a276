"""Typed samples: what one log line (or one finished request) said, as numbers.

Each parser turns text into a ``ParseResult``: a list of samples plus the counts of lines it read, could not
read (skipped) and recognised as another rank's copy (duplicate). Samples are plain dataclasses; ``to_dict``
gives the JSON shape stored in records and printed by ``specsweep parse --json``. Non-finite numbers
(``nan``, ``inf``, which engines print for empty intervals) become ``None``: a JSON null, never a NaN. An
engine's own sample types live in its package (``orchestrator/engines/sglang/samples.py``,
``orchestrator/engines/llamacpp/samples.py``, ``orchestrator/engines/vllm/samples.py``); here are the shared
base, DDTree's (a drafter's lines any engine may print) and a user regex's.

Also the one piece of arithmetic two parsers share: recovering an integer count of verify steps (drafts)
from an accepted-token count and a mean acceptance length rounded to two decimals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

__all__ = [
    "DDTreeSample",
    "ParseResult",
    "Sample",
    "UserSample",
    "Value",
    "recover_steps",
    "to_float",
    "to_int",
    "typed_value",
]

Value = int | float | str | bool | None


def to_float(text: str | None) -> float | None:
    """A finite float, or None for missing, unparseable, ``nan`` or ``inf``."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def to_int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def typed_value(text: str) -> Value:
    """An int if the text is an integer literal, a float if it is a finite number, a bool for True/False, None
    for nan/inf, else the text itself (stripped of a trailing comma or semicolon)."""
    text = text.rstrip(",;")
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) else None


def recover_steps(
    accepted: int, mean_len: float, *, decimals: int = 2, candidate: float | None = None
) -> tuple[int | None, bool]:
    """The integer number of verify steps (drafts) behind ``mean_len = 1 + accepted / steps``.

    ``mean_len`` is printed rounded to ``decimals``, so it only bounds the step count: every integer ``n``
    with ``1 + accepted / n`` rounding to ``mean_len`` is possible. A ``candidate`` (e.g. drafted tokens / k)
    inside those bounds is taken as is; otherwise the integer nearest ``accepted / (mean_len - 1)`` within
    the bounds. Returns ``(steps, exact)`` where ``exact`` means the bounds allowed one integer only (or the
    candidate fitted). ``(None, False)`` when nothing can be recovered (no accepted token, inconsistent
    figures) and no candidate helps.
    """
    half = 0.5 * 10.0**-decimals
    excess = mean_len - 1.0
    usable = candidate is not None and math.isfinite(candidate) and candidate >= 1 and float(candidate).is_integer()
    if accepted == 0:
        return (int(candidate), True) if usable and candidate is not None else (None, False)
    if accepted < 0 or not math.isfinite(excess) or excess + half <= 0:
        return None, False
    low = accepted / (excess + half)
    high = accepted / (excess - half) if excess > half else math.inf
    if usable and candidate is not None and low - 1e-9 <= candidate <= high + 1e-9:
        return int(candidate), True
    if excess <= 0:
        return None, False  # printed as 1.00: only a lower bound on the steps, nothing to round to
    first = max(math.ceil(low - 1e-9), 1)
    last = math.floor(high + 1e-9) if math.isfinite(high) else None
    steps = max(round(accepted / excess), first)
    if last is not None and last >= first:
        steps = min(steps, last)
    return steps, last is not None and first == last


@dataclass(slots=True)
class Sample:
    """Base of every sample: ``kind`` names the line family, ``to_dict`` is the JSON shape."""

    kind: ClassVar[str] = "sample"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = dict(value) if isinstance(value, dict) else list(value) if isinstance(value, list) else value
        return out


@dataclass(slots=True)
class DDTreeSample(Sample):
    """One ``DDTREE metrics:`` line: every ``key=value`` pair, numbers typed."""

    kind: ClassVar[str] = "ddtree"

    values: dict[str, Value] = field(default_factory=dict)
    timestamp: str | None = None
    ranks: str | None = None


@dataclass(slots=True)
class UserSample(Sample):
    """One match of a user regex parser: its named groups, numbers typed."""

    kind: ClassVar[str] = "user"

    parser: str = ""
    groups: dict[str, Value] = field(default_factory=dict)


SKIPPED, DUPLICATE, READ = 0, 1, 2


@dataclass(slots=True)
class ParseResult:
    """What parsers read from a text: samples, and per candidate line (by its offset in the text) whether it
    was read, was another rank's copy, or could not be read. A line two parsers look at counts once, with
    the best outcome (read over copy over skipped)."""

    samples: list[Sample] = field(default_factory=list)
    status: dict[int, int] = field(default_factory=dict)
    skipped_examples: list[str] = field(default_factory=list)

    def read(self, offset: int) -> None:
        self.status[offset] = READ

    def duplicate(self, offset: int) -> None:
        if self.status.get(offset, SKIPPED) < DUPLICATE:
            self.status[offset] = DUPLICATE

    def skip(self, offset: int, line: str, keep: int = 5) -> None:
        if offset not in self.status:
            self.status[offset] = SKIPPED
        if len(self.skipped_examples) < keep:
            self.skipped_examples.append(line[:300])

    def count(self, outcome: int) -> int:
        return sum(1 for value in self.status.values() if value == outcome)

    @property
    def matched(self) -> int:
        return self.count(READ)

    @property
    def skipped(self) -> int:
        return self.count(SKIPPED)

    @property
    def duplicates(self) -> int:
        return self.count(DUPLICATE)

    def extend(self, other: ParseResult, keep: int = 5) -> None:
        self.samples.extend(other.samples)
        for offset, outcome in other.status.items():
            if outcome > self.status.get(offset, -1):
                self.status[offset] = outcome
        room = keep - len(self.skipped_examples)
        if room > 0:
            self.skipped_examples.extend(other.skipped_examples[:room])
