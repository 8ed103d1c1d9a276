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

__all__ = ["PREFIX", "RankDeduper", "RankPrefix", "candidate_lines", "count_lines", "rank_prefix", "ranks_info"]


def count_lines(text: str) -> int:
    """Number of lines in ``text`` (a final line without a newline counts; an empty text has none)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _scan(text: str, marker: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    append, find, rfind, size = out.append, text.find, text.rfind, len(text)
    pos = find(marker)
    while pos != -1:
        start = rfind("\n", 0, pos) + 1
        end = find("\n", pos)
        if end == -1:
            end = size
        append((start, text[start : end - 1] if text[end - 1] == "\r" else text[start:end]))
        pos = find(marker, end)  # the next occurrence on a later line: each line once
    return out


def candidate_lines(text: str, markers: tuple[str, ...]) -> list[tuple[int, str]]:
    """Every line of ``text`` that contains at least one of ``markers``, once each, in text order.

    Returns ``(offset of the line's first character, line without its line ending)`` pairs.
    """
    markers = tuple(m for m in markers if m)
    if len(markers) == 1:
        return _scan(text, markers[0])
    found: dict[int, str] = {}
    for marker in markers:
        found.update(_scan(text, marker))
    return sorted(found.items())


# SGLang's logger format is "[%(asctime)s{prefix}] message" with prefix " TP0", " DP1 TP4", " PP0 TP0 EP0"...
PREFIX = re.compile(r"\[\s*(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)?((?:\s*[A-Z][A-Z_]*\d+)*)\s*\]\s*\Z")


@dataclass(frozen=True, slots=True)
class RankPrefix:
    """What the engine's own bracketed prefix says about a line: its timestamp and the ranks that printed it."""

    timestamp: str | None
    ranks: str | None  # e.g. "DP0 TP3"; None when the line carries no rank tag
    group: str = ""  # the ranks that carry different data (DP, PP...): everything but the TP/EP copies
    has_tp: bool = False


_NO_PREFIX = RankPrefix(None, None)
_TP_TAGS = ("TP", "EP", "ATTN_TP")
_ranks_cache: dict[str, tuple[str | None, str, bool]] = {}  # rank text -> (ranks, group, has_tp)


def ranks_info(text: str) -> tuple[str | None, str, bool]:
    """``(ranks, group, has_tp)`` for the rank tags of a prefix (``" DP1 TP4"`` -> ``("DP1 TP4", "DP1", True)``)."""
    found = _ranks_cache.get(text)
    if found is None:
        if len(_ranks_cache) >= 1024:
            _ranks_cache.clear()
        tags = text.split()
        group = " ".join(t for t in tags if not t.startswith(_TP_TAGS))
        found = _ranks_cache[text] = (" ".join(tags) or None, group, any(t.startswith(("TP", "ATTN_TP")) for t in tags))
    return found


def rank_prefix(line: str, end: int | None = None) -> RankPrefix:
    """Parse the ``[time ranks]`` prefix that ends right before ``line[end:]`` (any journal prefix may come
    before it)."""
    stop = len(line) if end is None else end
    bracket = line.rfind("[", 0, stop)
    if bracket == -1:
        return _NO_PREFIX
    match = PREFIX.match(line, bracket, stop)
    if match is None:
        return _NO_PREFIX
    timestamp, text = match.groups()
    ranks, group, has_tp = ranks_info(text)
    if timestamp is None and ranks is None:
        return _NO_PREFIX
    return RankPrefix(timestamp, ranks, group, has_tp)


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
        return self.seen_before(prefix.timestamp, prefix.ranks or "", prefix.group, message)

    def seen_before(self, timestamp: str | None, ranks: str, group: str, message: str) -> bool:
        """True when another rank already printed this message (call only for TP-tagged lines)."""
        key = (timestamp, group, message)
        first = self._seen.get(key)
        if first is not None:
            return first != ranks
        self._seen[key] = ranks
        if len(self._seen) > self.limit:
            del self._seen[next(iter(self._seen))]
        return False
