"""Cheap line scanning shared by the log parsers.

A journal window is mostly lines no parser wants (access logs, prefill lines, warnings). Instead of a Python
loop over every line, each parser names the marker substrings its lines must contain; ``candidate_lines`` finds
them with ``str.find`` (C speed) and cuts out only the lines that hold one. This is what keeps the SGLang
parser well above half a million lines per second on one core (see bench/RESULTS-parse.md).

Also here: the rank prefix SGLang puts before every message (``[2026-05-30 00:39:10 DP0 TP3]``) and the
de-duplication of a line that several tensor-parallel ranks print identically.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["RankDeduper", "RankPrefix", "candidate_lines", "count_lines", "rank_prefix"]


def count_lines(text: str) -> int:
    """Number of lines in ``text`` (a final line without a newline counts; an empty text has none)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def candidate_lines(text: str, markers: tuple[str, ...]) -> list[tuple[int, str]]:
    """Every line of ``text`` that contains at least one of ``markers``, once each, in text order.

    Returns ``(offset of the line's first character, line without its newline)`` pairs.
    """
    found: dict[int, str] = {}
    find = text.find
    rfind = text.rfind
    size = len(text)
    for marker in markers:
        if not marker:
            continue
        pos = find(marker)
        while pos != -1:
            start = rfind("\n", 0, pos) + 1
            end = find("\n", pos)
            if end == -1:
                end = size
            if start not in found:
                line = text[start:end]
                found[start] = line[:-1] if line.endswith("\r") else line
            pos = find(marker, end)
    if len(markers) == 1:
        return list(found.items())  # one marker: already in text order
    return sorted(found.items())


# SGLang's logger format is "[%(asctime)s{prefix}] message" with prefix " TP0", " DP1 TP4", " PP0 TP0 EP0"...
_PREFIX = re.compile(
    r"\[\s*(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)?(?P<ranks>(?:\s*[A-Z][A-Z_]*\d+)*)\s*\]\s*$"
)


@dataclass(frozen=True, slots=True)
class RankPrefix:
    """What the engine's own bracketed prefix says about a line: its timestamp and the ranks that printed it."""

    timestamp: str | None
    ranks: str | None  # e.g. "DP0 TP3"; None when the line carries no rank tag

    @property
    def group(self) -> str:
        """The ranks that carry different data (DP, PP...), i.e. everything but the TP/EP copies."""
        if not self.ranks:
            return ""
        return " ".join(t for t in self.ranks.split() if not t.startswith(("TP", "EP", "ATTN_TP")))

    @property
    def has_tp(self) -> bool:
        return self.ranks is not None and any(t.startswith(("TP", "ATTN_TP")) for t in self.ranks.split())


_NO_PREFIX = RankPrefix(None, None)


def rank_prefix(before_marker: str) -> RankPrefix:
    """Parse the bracketed prefix that ends right before a message (tolerates any journal prefix before it)."""
    bracket = before_marker.rfind("[")
    if bracket == -1:
        return _NO_PREFIX
    match = _PREFIX.match(before_marker, bracket)
    if match is None:
        return _NO_PREFIX
    ranks = " ".join(match.group("ranks").split()) or None
    return RankPrefix(match.group("ts"), ranks)


@dataclass(slots=True)
class RankDeduper:
    """Recognises the second and later copies of a line printed by several TP ranks.

    Two lines are copies when they have the same engine timestamp, the same non-TP ranks (DP groups carry
    different requests, so they are never merged) and the same message text, and differ in their TP rank.
    Lines without a TP tag are never merged: two identical untagged lines are two intervals.
    """

    limit: int = 512
    _seen: dict[tuple[str | None, str, str], str] = field(default_factory=dict)

    def is_copy(self, prefix: RankPrefix, message: str) -> bool:
        if not prefix.has_tp:
            return False
        key = (prefix.timestamp, prefix.group, message)
        first = self._seen.get(key)
        if first is not None:
            return first != prefix.ranks
        self._seen[key] = prefix.ranks or ""
        if len(self._seen) > self.limit:
            del self._seen[next(iter(self._seen))]
        return False
