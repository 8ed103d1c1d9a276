"""One window's server metrics: run the engine's parsers over the window's text and aggregate.

A window is what the server logged while one load point ran (the runner cuts it by journal cursor or log
offset and keeps the raw text). ``parse_window`` reads that text once and returns a ``WindowMetrics``:
headline figures (accept length with the bonus token, acceptance rate, generation throughput), DDTree
averages, user-parser fields, every sample, line counts, and a ``definitions`` note per figure saying
exactly how it was computed for this engine. Lines are never averaged across windows: every figure comes
from this text only.

Engines: any the registry knows (:mod:`orchestrator.engines.registry`): ``sglang`` and ``sim`` (the
built-in simulator prints SGLang's lines), ``vllm``, ``llamacpp``, or one a user's package adds; each parses
and aggregates its own lines. DDTree's lines are read for every engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from orchestrator.engines.ddtree import log as ddtree
from orchestrator.engines.integrity import Integrity
from orchestrator.engines.lines import EDGE_DEFINITION, count_lines, ranks_info
from orchestrator.engines.regex.log import DEFINITION as USER_DEFINITION
from orchestrator.engines.regex.log import UserParser, aggregate_user, compile_user_parsers, parse_user
from orchestrator.engines.registry import engine_names, get_engine, is_engine
from orchestrator.engines.samples import (
    DDTreeSample,
    ParseResult,
    Sample,
    UserSample,
)
from orchestrator.errors import MetricsError

__all__ = ["EDGE_DEFINITION", "WindowMetrics", "drop_window_edges", "parse_window"]

S = TypeVar("S", bound=Sample)


_LINE_DEFINITIONS = {
    "lines_total": "Lines in the window's text.",
    "lines_matched": "Lines read into a sample (each of a llama.cpp request's several lines counts).",
    "lines_skipped": "Lines that carry one of the engine's metric markers but could not be read.",
    "lines_duplicate": (
        "Copies of one DP group's line printed by another rank of that group (ATTN_CP, PP, MOE_DP, TP, EP tags: "
        "metrics/lines.py RANK_TAGS): counted once."
    ),
}


@dataclass(slots=True)
class WindowMetrics:
    """The server's own metrics over one window, aggregated the way each source defines its numbers."""

    engine: str
    lines_total: int = 0
    lines_matched: int = 0
    lines_skipped: int = 0
    lines_duplicate: int = 0
    accept_len: float | None = None
    acceptance_rate: float | None = None
    gen_throughput: float | None = None
    ddtree: dict[str, float | None] = field(default_factory=lambda: dict.fromkeys(ddtree.STANDARD_KEYS))
    ddtree_lines: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    skipped_examples: list[str] = field(default_factory=list)
    definitions: dict[str, str] = field(default_factory=dict)
    #: Whether the window is whole, and how exact each figure is (orchestrator/engines/integrity.py).
    integrity: Integrity = field(default_factory=Integrity)
    exactness: dict[str, dict[str, Any]] = field(default_factory=dict)

    def figures(self) -> dict[str, float | None]:
        """The figures other sources can be compared on (see ``compare_sources``)."""
        return {
            "accept_len": self.accept_len,
            "acceptance_rate": self.acceptance_rate,
            "gen_throughput": self.gen_throughput,
            **self.ddtree,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: headline figures, DDTree averages at top level, details, user fields, samples, notes."""
        return {
            "engine": self.engine,
            "lines_total": self.lines_total,
            "lines_matched": self.lines_matched,
            "lines_skipped": self.lines_skipped,
            "lines_duplicate": self.lines_duplicate,
            "accept_len": self.accept_len,
            "acceptance_rate": self.acceptance_rate,
            "gen_throughput": self.gen_throughput,
            **self.ddtree,
            "ddtree_lines": self.ddtree_lines,
            "details": dict(self.details),
            "user_parsers": dict(self.user),
            "samples": [s.to_dict() for s in self.samples],
            "skipped_examples": list(self.skipped_examples),
            "definitions": dict(self.definitions),
            "integrity": self.integrity.to_dict(),
            "exactness": {k: dict(v) for k, v in self.exactness.items()},
        }


def _edge_group(sample: Sample) -> str:
    ranks = getattr(sample, "ranks", None)
    if isinstance(ranks, str):
        return ranks_info(ranks)[1]
    index = getattr(sample, "engine_index", None)
    return "" if index is None else str(index)


def drop_window_edges(samples: Sequence[S]) -> tuple[list[S], int, int]:
    """``(kept, dropped, groups kept with their edge line)``: each group's first interval line is left out
    when the group has another line in the window (see EDGE_DEFINITION)."""
    counts: dict[str, int] = {}
    for sample in samples:
        key = _edge_group(sample)
        counts[key] = counts.get(key, 0) + 1
    seen: set[str] = set()
    kept: list[S] = []
    for sample in samples:
        key = _edge_group(sample)
        if key not in seen:
            seen.add(key)
            if counts[key] > 1:
                continue
        kept.append(sample)
    dropped = sum(1 for n in counts.values() if n > 1)
    return kept, dropped, len(counts) - dropped


def _edge_details(figures: dict[str, Any], dropped: int, kept_groups: int) -> dict[str, Any]:
    figures["details"] = {**figures.get("details", {}), "edge_lines_dropped": dropped, "edge_lines_kept": kept_groups}
    return figures


def _engine_parse(
    engine: str, text: str, cut: bool, version: str | None
) -> tuple[ParseResult, dict[str, Any], dict[str, str]]:
    spec = get_engine(engine)
    result = spec.parse_log(text)
    window = spec.aggregate(result, edges=drop_window_edges if cut else _keep_edges, version=version)
    figures, definitions = window.figures, dict(window.definitions)
    if cut and window.intervals:
        figures = _edge_details(figures, window.dropped, window.kept)
        definitions["window_edge"] = EDGE_DEFINITION
    return result, figures, definitions


def _keep_edges(samples: Sequence[S]) -> tuple[list[S], int, int]:
    return list(samples), 0, 0


def parse_window(
    engine: str,
    text: str | bytes,
    user_parsers: Sequence[tuple[str, str] | UserParser] = (),
    *,
    cut: bool = False,
    version: str | None = None,
) -> WindowMetrics:
    """Parse one window's log text for ``engine`` and aggregate it.

    ``cut``: the text was cut out of a longer log at the window's start (the runner's windows), so each
    group's first interval line began before the window and is left out (``EDGE_DEFINITION``). A whole
    saved log is read as it is. ``version``: the engine version the server reported (``engine_info``), which
    decides what a version-dependent field means (SGLang's ``accept rate``, docs/engines.md).

    Never raises on the text (unreadable lines are skipped and counted); raises ``MetricsError`` for an
    unknown engine and ``ConfigError`` for an invalid user regex.
    """
    if not is_engine(engine):
        raise MetricsError(f"unknown engine {engine!r}; expected one of {', '.join(engine_names())}")
    parsers = compile_user_parsers(user_parsers)
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    result, figures, definitions = _engine_parse(engine, text, cut, version)
    tree = ddtree.parse_ddtree(text)
    result.extend(tree)
    user = parse_user(text, parsers) if parsers else ParseResult()
    tree_samples = [s for s in tree.samples if isinstance(s, DDTreeSample)]
    if cut:
        tree_samples = drop_window_edges(tree_samples)[0]
    wm = WindowMetrics(
        engine=engine,
        lines_total=count_lines(text),
        lines_matched=result.matched,
        lines_skipped=result.skipped,
        lines_duplicate=result.duplicates,
        accept_len=figures["accept_len"],
        acceptance_rate=figures["acceptance_rate"],
        gen_throughput=figures["gen_throughput"],
        ddtree=ddtree.aggregate_ddtree(tree_samples),
        ddtree_lines=len(tree_samples),
        details=figures["details"],
        user=aggregate_user([s for s in user.samples if isinstance(s, UserSample)], parsers),
        samples=result.samples + user.samples,
        skipped_examples=result.skipped_examples,
    )
    wm.definitions = {**_LINE_DEFINITIONS, **definitions, "ddtree": ddtree.DEFINITION}
    if parsers:
        wm.definitions["user_parsers"] = USER_DEFINITION
    return wm
