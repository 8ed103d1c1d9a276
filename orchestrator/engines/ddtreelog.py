"""DDTree research builds: ``DDTREE metrics: key=value key=value ...`` lines.

Engine-neutral, like the other shared modules of this layer (not an engine package): a draft-tree method
prints these lines beside whatever engine serves it, so every engine's window reads them
(orchestrator/metrics/window.py); the per-interval check of these lines is ddtreeintervals.py.

The field report's line is ``DDTREE metrics: bs=1 budget=7 avg_actual_nodes=8.00 avg_accepted_drafts=2.00
avg_commit_len=2.00 avg_accepted_depth=5.00``. Every pair is kept, whatever its key, with numbers typed; the
window aggregate is the bs-weighted mean of each numeric key over the window's lines, named ``avg_<key>`` (a key that
already starts with ``avg_`` keeps its name). A line with a broken pair (``avg_commit_len=``, ``avg_x=??``) is
skipped and counted, not half-read. Consistency checks on these figures (accepted depth against
commit length) belong to the analysis, which reads them from here.

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from __future__ import annotations

import re
from typing import Any

from orchestrator.engines.lines import RankDeduper, candidate_lines, rank_prefix
from orchestrator.engines.samples import DDTreeSample, ParseResult, typed_value

__all__ = ["DEFINITION", "MARKER", "STANDARD_KEYS", "aggregate_ddtree", "parse_ddtree"]

MARKER = "DDTREE metrics:"
STANDARD_KEYS = ("avg_actual_nodes", "avg_accepted_drafts", "avg_commit_len", "avg_accepted_depth")
_PAIR = re.compile(r"([A-Za-z_][\w.\-/]*)=([^\s,;\"=]+)")

DEFINITION = (
    "DDTREE metrics: mean over the window's DDTREE lines of each numeric key, each line weighted by its bs= "
    "(the batch size its per-request averages were taken over; weight 1 when a line has no bs), bs and budget "
    "themselves unweighted; a key k is reported as avg_k, or as itself if it starts with avg_. In a window cut "
    "from a longer log, the first line of each group is left out like other interval lines (window_edge)."
)
_UNWEIGHTED = ("bs", "budget")


def parse_ddtree(text: str) -> ParseResult:
    """Every ``DDTREE metrics:`` line of ``text``; a line without any ``key=value`` pair is skipped."""
    result = ParseResult()
    dedupe = RankDeduper()
    for offset, line in candidate_lines(text, (MARKER,)):
        at = line.find(MARKER)
        body = line[at + len(MARKER) :]
        quote = body.find('"')
        if quote != -1:
            body = body[:quote]
        pairs = _pairs(body)
        if not pairs:
            result.skip(offset, line)
            continue
        prefix = rank_prefix(line, at)
        if dedupe.is_copy(prefix, body):
            result.duplicate(offset)
            continue
        values = {key: typed_value(raw) for key, raw in pairs}
        result.samples.append(DDTreeSample(values=values, timestamp=prefix.timestamp, ranks=prefix.ranks))
        result.read(offset)
    return result


def _pairs(body: str) -> list[tuple[str, str]] | None:
    """The line's pairs, or None when it has none or a broken one: a token with ``=`` that is not
    ``key=value``, or an ``avg_`` key whose value is not a number. Words without ``=`` are prose, ignored."""
    pairs: list[tuple[str, str]] = []
    for token in body.replace(",", " ").replace(";", " ").split():
        if "=" not in token:
            continue
        match = _PAIR.fullmatch(token)
        if match is None:
            return None
        key, raw = match.groups()
        if key.startswith("avg_") and isinstance(typed_value(raw), str):
            return None
        pairs.append((key, raw))
    return pairs or None


def _name(key: str, keys: set[str]) -> str:
    if key.startswith("avg_"):
        return key
    name = f"avg_{key}"
    return f"mean_{key}" if name in keys else name  # both "x" and "avg_x" printed: keep them apart


def aggregate_ddtree(samples: list[DDTreeSample]) -> dict[str, Any]:
    """``{avg_<key>: mean}`` over the lines, the standard keys always present (None when absent)."""
    sums: dict[str, float] = {}
    keys: set[str] = set()
    weights: dict[str, float] = {}
    for s in samples:
        keys.update(s.values)
        bs = s.values.get("bs")
        line_weight = float(bs) if isinstance(bs, int | float) and not isinstance(bs, bool) and bs > 0 else 1.0
        for key, value in s.values.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            weight = 1.0 if key in _UNWEIGHTED else line_weight
            sums[key] = sums.get(key, 0.0) + weight * value
            weights[key] = weights.get(key, 0.0) + weight
    out: dict[str, Any] = dict.fromkeys(STANDARD_KEYS)
    for key in sums:
        out[_name(key, keys)] = sums[key] / weights[key]
    return out
