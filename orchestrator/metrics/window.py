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

Whole windows (docs/engines.md, "Whole windows"). A window's figures assume one process: the engine's lines
printed once per process start (``Engine.start_patterns``: SGLang's ``server_args=``, vLLM's version banner and
its ``(APIServer pid=N)`` prefix, llama-server's ``initializing ...`` and ``common_params_print_info`` lines)
are looked for in the text (:func:`process_starts`). A start inside a cut window, or a second start (or one
after metric lines) in a whole log, is a restart: ``integrity`` says ``restart`` naming the lines, and the
figures come from the text after the last start only (``part = "since_restart"``), its first interval line
of each group left out as well (it spans the start-up: SGLang's ``last_decode_stats_tic`` is set at scheduler
init, vLLM's loggers' ``last_log_time`` at their creation); nothing left, no figure. Lines whose partner the
window cut (vLLM's engine-stats line and its spec-decoding line) give no figure: ``integrity`` says
``cut_pair``, the figures come from the whole pairs (``part = "whole_pairs"``).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.engines import ddtreelog as ddtree
from orchestrator.engines.integrity import Integrity
from orchestrator.engines.lines import EDGE_DEFINITION, count_lines, plain_log, ranks_info
from orchestrator.engines.lost import LOST_LINES_DEFINITION, LostLines, lost_lines
from orchestrator.engines.registry import engine_names, get_engine, is_engine
from orchestrator.engines.samples import (
    DDTreeSample,
    ParseResult,
    Sample,
    UserSample,
)
from orchestrator.engines.userregex import DEFINITION as USER_DEFINITION
from orchestrator.engines.userregex import UserParser, aggregate_user, compile_user_parsers, parse_user
from orchestrator.errors import MetricsError

if TYPE_CHECKING:
    from orchestrator.engines.base import Engine

__all__ = [
    "EDGE_DEFINITION",
    "RESTART_DEFINITION",
    "ProcessStart",
    "WindowMetrics",
    "drop_first_lines",
    "drop_window_edges",
    "mark_open_end",
    "parse_window",
    "process_starts",
]

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


#: How a window with a process start in it is read (parse_window).
RESTART_DEFINITION = (
    "A window whose text holds a process start (a line the engine prints once per start: Engine.start_patterns, "
    "orchestrator/engines/<name>/__init__.py; or a new pid in vLLM's '(APIServer pid=N)' prefix, vllm/logger.py) "
    "inside a cut window, or a second start, or one after metric lines, in a whole log, covers two processes "
    "(systemd restarted a crashed server), maybe of two configurations: its figures come from the text after the "
    "last start only (integrity part 'since_restart'), each group's first interval line after it left out too, "
    "as it spans the start-up (SGLang: SchedulerMetricsReporter._init_metrics sets last_decode_stats_tic at "
    "scheduler init, managers/scheduler_components/metrics_reporter.py; vLLM: LoggingStatLogger and "
    "SpecDecodingLogging set last_log_time when created, v1/metrics/loggers.py, v1/spec_decode/metrics.py); "
    "details.restart names the starts and details.startup_lines_dropped counts the lines left out. No line "
    "left: no figure."
)


@dataclass(frozen=True, slots=True)
class ProcessStart:
    """One process start in a window's text: where its first line begins and the lines that say so."""

    offset: int  # of its first line in the text
    line: int  # that line's number, from 1
    lines: tuple[str, ...]  # "who: the line" for each line of this start

    def describe(self) -> str:
        shown = self.lines[0] if len(self.lines[0]) <= 100 else self.lines[0][:97] + "..."
        more = f" (+{len(self.lines) - 1} more start-up line(s))" if len(self.lines) > 1 else ""
        return f"line {self.line}: {shown}{more}"

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "offset": self.offset, "lines": list(self.lines)}


def _line_at(text: str, pos: int) -> tuple[int, str]:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return start, text[start : end if end != -1 else len(text)].rstrip("\r")


#: Lines systemd writes into a unit's journal once per start of its main process, whatever the engine: a saved
#: ``journalctl -u UNIT`` holds them between two server instances even when the engine's own start lines are not in
#: it (systemd 252 src/core/job.c ``job_emit_done_message``: "Started %s." with the unit's name and description, as
#: ``systemd[1]: Started ...`` in the short format, the message alone in ``-o cat``/``MESSAGE``). A service only:
#: a session's scope starting (``Started session-42.scope``) is no server's start.
SYSTEMD_START_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("systemd", re.compile(r"\bsystemd\[1\]: Started [\w@.:-]+\.service\b", re.MULTILINE)),
    ("systemd", re.compile(r"^Started [\w@.:-]+\.service\b", re.MULTILINE)),
)


def process_starts(engine: Engine, text: str, metric_offsets: Sequence[int] = ()) -> list[ProcessStart]:
    """The process starts in ``text``, in order, from ``engine.start_patterns`` (orchestrator/engines/base.py)
    and systemd's ``Started`` line (``SYSTEMD_START_PATTERNS``).

    A start is one or more start lines together: a line begins a new start when its pattern was already seen in
    the current one, or when a metric line (``metric_offsets``, sorted: the offsets of the lines the parsers
    looked at) lies between it and the current start's last line. A pattern with a ``pid`` group marks a start
    where a process (its ``proc`` group) logs with a pid other than the one it logged with before in the text.
    """
    hits: list[tuple[int, object, str]] = []  # (line offset, pattern key, "who: line")
    for index, (who, pattern) in enumerate((*engine.start_patterns, *SYSTEMD_START_PATTERNS)):
        if "pid" in pattern.groupindex:
            hits.extend(_identity_hits(index, who, pattern, text))
            continue
        for match in pattern.finditer(text):
            start, line = _line_at(text, match.start())
            hits.append((start, index, f"{who}: {line.strip()}"))
    if not hits:
        return []
    hits.sort(key=lambda h: h[0])
    starts: list[ProcessStart] = []
    keys: set[object] = set()
    last_offset = -1
    for offset, key, line in hits:
        if starts and offset == last_offset:  # one line that two patterns (or one twice) found
            keys.add(key)
            continue
        between = bisect.bisect_right(metric_offsets, last_offset) < bisect.bisect_left(metric_offsets, offset)
        if not starts or key in keys or between:
            starts.append(ProcessStart(offset, text.count("\n", 0, offset) + 1, (line,)))
            keys = {key}
        else:
            current = starts[-1]
            starts[-1] = ProcessStart(current.offset, current.line, (*current.lines, line))
            keys.add(key)
        last_offset = offset
    return starts


def _identity_hits(index: int, who: str, pattern: re.Pattern[str], text: str) -> list[tuple[int, object, str]]:
    # findall runs in C: one (proc, pid) per line; the lines are walked only when some process has two pids.
    groups = pattern.groupindex
    found = pattern.findall(text)
    if not found:
        return []
    pid_at, proc_at = groups["pid"] - 1, groups.get("proc", 0) - 1
    rows = found if isinstance(found[0], tuple) else [(f,) for f in found]
    pids: dict[str, set[str]] = {}
    for row in set(rows):
        pids.setdefault(row[proc_at] if proc_at >= 0 else "", set()).add(row[pid_at])
    if all(len(seen) == 1 for seen in pids.values()):
        return []
    hits: list[tuple[int, object, str]] = []
    current: dict[str, str] = {}
    for match in pattern.finditer(text):
        proc, pid = match.groupdict().get("proc") or "", match["pid"]
        before = current.get(proc)
        current[proc] = pid
        if before is not None and before != pid:
            start, line = _line_at(text, match.start())
            hits.append((start, (index, proc), f"{who}: {line.strip()} (pid {before} before)"))
    return hits


def _restarted(starts: list[ProcessStart], metric_offsets: Sequence[int], cut: bool) -> bool:
    """Whether ``starts`` mean two processes: any start inside a cut window (it opened on a running server);
    in a whole log, a second start or one with metric lines before it."""
    if not starts:
        return False
    if cut or len(starts) > 1:
        return True
    return bool(metric_offsets) and metric_offsets[0] < starts[0].offset


def _cut_pair(sample: Any) -> bool:
    return bool(getattr(sample, "cut_pair", None))


def _withdraw_end_cuts(samples: Sequence[Any]) -> None:
    """Withdraw the marks that the window's end cut a pair (``cut_at_end``: a guess from the text alone) from a
    window its reader closed on the engine's tick after waiting for the lines printed with it (parse_window
    ``closed``): a tail line without a partner then had none (vLLM: an interval that generated tokens without a
    draft prints no SpecDecoding line)."""
    for sample in samples:
        if getattr(sample, "cut_at_end", False):
            sample.cut_pair = None
            sample.cut_at_end = False


def _edge_group(sample: Sample) -> str:
    ranks = getattr(sample, "ranks", None)
    if isinstance(ranks, str):
        return ranks_info(ranks)[1]
    index = getattr(sample, "engine_index", None)
    return "" if index is None else str(index)


def drop_window_edges(samples: Sequence[S]) -> tuple[list[S], int, int]:
    """``(kept, dropped, groups kept with their edge line)``: each group's first interval line is left out
    when the group has another line in the window (see EDGE_DEFINITION). A line whose partner the window cut
    (``cut_pair``: vLLM's spec line whose ``Engine NNN:`` line is before the window) is always left out; when it
    is its group's first line, it is that group's edge line, and the group's next line is kept."""
    counts: dict[str, int] = {}
    for sample in samples:
        key = _edge_group(sample)
        counts[key] = counts.get(key, 0) + 1
    seen: set[str] = set()
    kept: list[S] = []
    dropped = 0
    for sample in samples:
        key = _edge_group(sample)
        first = key not in seen
        seen.add(key)
        if _cut_pair(sample) or (first and counts[key] > 1):
            dropped += first
            continue
        kept.append(sample)
    return kept, dropped, len(counts) - dropped


def drop_first_lines(samples: Sequence[S]) -> tuple[list[S], int, int]:
    """``(kept, dropped, 0)``: each group's first interval line left out whatever the group's count, as after a
    process start (RESTART_DEFINITION: the line spans the start-up), and every ``cut_pair`` line."""
    seen: set[str] = set()
    kept: list[S] = []
    dropped = 0
    for sample in samples:
        key = _edge_group(sample)
        if key not in seen:
            seen.add(key)
            dropped += 1
            continue
        if not _cut_pair(sample):
            kept.append(sample)
    return kept, dropped, 0


def _edge_details(figures: dict[str, Any], dropped: int, kept_groups: int) -> dict[str, Any]:
    figures["details"] = {**figures.get("details", {}), "edge_lines_dropped": dropped, "edge_lines_kept": kept_groups}
    return figures


def _aggregate(
    spec: Engine, result: ParseResult, edges: Any, version: str | None, *, restart: bool, cut: bool
) -> tuple[dict[str, Any], dict[str, str]]:
    window = spec.aggregate(result, edges=edges, version=version)
    figures, definitions = window.figures, dict(window.definitions)
    if restart and window.intervals:
        figures["details"] = {**figures.get("details", {}), "startup_lines_dropped": window.dropped}
        definitions["restart"] = RESTART_DEFINITION
    elif cut and window.intervals:
        figures = _edge_details(figures, window.dropped, window.kept)
        definitions["window_edge"] = EDGE_DEFINITION
    return figures, definitions


def _keep_edges(samples: Sequence[S]) -> tuple[list[S], int, int]:
    return [s for s in samples if not _cut_pair(s)], 0, 0


def parse_window(
    engine: str,
    text: str | bytes,
    user_parsers: Sequence[tuple[str, str] | UserParser] = (),
    *,
    cut: bool = False,
    version: str | None = None,
    lost: str | None = None,
    aligned: bool = False,
    closed: bool = False,
) -> WindowMetrics:
    """Parse one window's log text for ``engine`` and aggregate it.

    ``cut``: the text was cut out of a longer log at the window's start (the runner's windows), so each
    group's first interval line began before the window and is left out (``EDGE_DEFINITION``). A whole
    saved log is read as it is. ``version``: the engine version the server reported (``engine_info``), which
    decides what a version-dependent field means (SGLang's ``accept rate``, docs/engines.md). ``aligned``: a cut
    window opened right after the engine's stats tick (orchestrator/sweep/closing.py ``open_window``), so every
    interval line in it began inside it: no edge line is left out (ALIGNED_DEFINITION); a process start in it is
    still a restart. ``closed``: the reader closed the window on the engine's stats tick and waited for the lines
    printed with it (``close_window``), so the text's last tick kept its partner if it had one: a mark that the
    window's end cut a pair, guessed from the text alone (``cut_at_end``), is withdrawn.

    A text that holds a restart (RESTART_DEFINITION) gives the figures of its part after the last process start
    only; a pair of lines the window cut gives none (the module docstring): ``integrity`` says so. The line
    counts are the whole text's; ``samples`` are those of the part the figures come from. A text that says it
    lost lines (journald's notices, orchestrator/engines/lost.py), or whose reader says so (``lost``: the
    journal removed the window's start, ``LogChunk.lost``), gives no figure (``lost_lines``).

    Never raises on the text (unreadable lines are skipped and counted); raises ``MetricsError`` for an
    unknown engine and ``ConfigError`` for an invalid user regex.
    """
    if not is_engine(engine):
        raise MetricsError(f"unknown engine {engine!r}; expected one of {', '.join(engine_names())}")
    parsers = compile_user_parsers(user_parsers)
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = plain_log(text)  # colour codes out, JSON log records back to LEVEL TIME MESSAGE
    spec = get_engine(engine)
    version = version or spec.version_from_log(text)  # a saved log without a server to ask
    result = spec.parse_log(text)
    if closed:
        _withdraw_end_cuts(result.samples)
    tree = ddtree.parse_ddtree(text)
    metric_offsets = sorted({*result.status, *tree.status})
    starts = process_starts(spec, text, metric_offsets)
    restart = _restarted(starts, metric_offsets, cut)
    part, part_result, part_tree = text, result, tree
    if restart:
        part = text[starts[-1].offset :]
        part_result, part_tree = spec.parse_log(part), ddtree.parse_ddtree(part)
        if closed:
            _withdraw_end_cuts(part_result.samples)
    edges = drop_first_lines if restart else drop_window_edges if cut and not aligned else _keep_edges
    figures, definitions = _aggregate(spec, part_result, edges, version, restart=restart, cut=cut and not aligned)
    if cut and aligned and not restart:
        figures["details"] = {**figures.get("details", {}), "window_aligned": True}
        definitions["window_edge"] = ALIGNED_DEFINITION
    tree_samples = edges([s for s in part_tree.samples if isinstance(s, DDTreeSample)])[0]
    samples = part_result.samples + part_tree.samples
    result.extend(tree)
    user = parse_user(part, parsers) if parsers else ParseResult()
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
        samples=samples + user.samples,
        skipped_examples=result.skipped_examples,
    )
    if restart:
        _restart_integrity(wm, text, starts, cut=cut)
        wm.details["restart"]["parts"] = _process_parts(spec, text, starts, version, cut=cut and not aligned)
    _pair_integrity(wm, samples)
    # The engine's aggregation says how exact each figure is, and what in the window breaks them.
    wm.exactness = {k: dict(v) for k, v in (figures.get("exactness") or {}).items()}
    for reason, detail in figures.get("integrity") or ():
        wm.integrity.broken(reason, detail)
    notices = lost_lines(text)
    if notices or lost:
        _lost_integrity(wm, notices, lost)
    wm.definitions = {**_LINE_DEFINITIONS, **definitions, "ddtree": ddtree.DEFINITION}
    if notices or lost:
        wm.definitions["lost_lines"] = LOST_LINES_DEFINITION
    if parsers:
        wm.definitions["user_parsers"] = USER_DEFINITION
    return wm


def _any_figure(wm: WindowMetrics) -> bool:
    return any(v is not None for v in wm.figures().values()) or any(
        data.get("matches") for data in wm.user.values() if isinstance(data, dict)
    )


def _restart_integrity(wm: WindowMetrics, text: str, starts: list[ProcessStart], *, cut: bool) -> None:
    last = starts[-1]
    after = count_lines(text[last.offset :])
    where = "; ".join(start.describe() for start in starts)
    what = (
        f"the server started again inside the window, which opened on a running one ({where})"
        if cut
        else f"{len(starts)} process starts in the log ({where})"
        if len(starts) > 1
        else f"a process start after the log's metric lines ({where})"
    )
    has = _any_figure(wm)
    tail = (
        f"figures from the {after} lines from line {last.line} on, each group's first interval line after it "
        "left out (it spans the start-up); each process's own in details.restart.parts"
        if has
        else f"no interval line after the start-up one in the {after} lines from line {last.line} on: no figure"
    )
    wm.integrity.broken("restart", f"{what}; {tail}")
    wm.integrity.part = "since_restart" if has else None
    wm.details["restart"] = {"starts": [s.to_dict() for s in starts], "part_from_line": last.line}


def _process_parts(
    spec: Engine, text: str, starts: list[ProcessStart], version: str | None, *, cut: bool
) -> list[dict[str, Any]]:
    """Each process's figures on their own (details.restart.parts): the text before the first start (when it
    holds lines: the process the window or log opened on) and from each start to the next, each start's first
    interval line left out as in the part after the last start (RESTART_DEFINITION). A blend of two processes
    is never a figure."""
    offsets = [s.offset for s in starts]
    bounds = [0, *offsets, len(text)] if offsets[0] > 0 else [*offsets, len(text)]
    parts: list[dict[str, Any]] = []
    for begin, end in itertools.pairwise(bounds):
        chunk = text[begin:end]
        opened = begin == 0 and starts[0].offset > 0  # the process the text opened on, its start not in it
        edges = (drop_window_edges if cut else _keep_edges) if opened else drop_first_lines
        window = spec.aggregate(spec.parse_log(chunk), edges=edges, version=version)
        tree = edges([s for s in ddtree.parse_ddtree(chunk).samples if isinstance(s, DDTreeSample)])[0]
        figures = {k: window.figures.get(k) for k in ("accept_len", "acceptance_rate", "gen_throughput")}
        tree_figures = {k: v for k, v in ddtree.aggregate_ddtree(tree).items() if v is not None}
        parts.append(
            {
                "from_line": text.count("\n", 0, begin) + 1,
                "lines": count_lines(chunk),
                "started_in_text": not opened,
                **figures,
                **tree_figures,
            }
        )
    return parts


def _lost_integrity(wm: WindowMetrics, lost: list[LostLines], reader: str | None) -> None:
    """The log says it dropped lines in the window (orchestrator/engines/lost.py), or its reader found the
    window's start gone (``reader``): what is left is not the window's intervals, so no log figure; the record's
    figures come from a whole source."""
    counts = [entry.count for entry in lost if entry.count is not None]
    parts: list[str] = []
    if lost:
        said = f"{sum(counts)} message(s) lost" if len(counts) == len(lost) else "lines lost"
        where = "; ".join(f"line {entry.line}: {entry.detail}" for entry in lost[:4])
        more = f" and {len(lost) - 4} more notice(s)" if len(lost) > 4 else ""
        parts.append(f"{said} ({where}{more})")
    if reader:
        parts.append(reader)
    wm.integrity.broken("lost_lines", "; ".join(parts) + ": the figures from what is left are not the window's")
    wm.integrity.part = None
    wm.accept_len = wm.acceptance_rate = wm.gen_throughput = None
    wm.ddtree = dict.fromkeys(wm.ddtree)
    wm.exactness = {}
    wm.details["lost_lines"] = {
        "messages": sum(counts) if lost and len(counts) == len(lost) else None,
        "notices": [{"line": e.line, "count": e.count, "detail": e.detail, "text": e.text} for e in lost],
        "reader": reader,
    }


#: How a window opened on the engine's stats tick is read (parse_window ``aligned``).
ALIGNED_DEFINITION = (
    "The window opened right after the engine's stats tick (or after a whole interval without one: everything "
    "before was logged), so each interval line in it covers time inside the window only and every line counts; "
    "it was closed by the first tick after the load (orchestrator/sweep/closing.py; vLLM: v1/metrics/loggers.py "
    "LoggingStatLogger.log every VLLM_LOG_STATS_INTERVAL seconds, v1/spec_decode/metrics.py resetting its counts "
    "when it prints)."
)

#: What the log figures of a window whose last stats interval is missing are (mark_open_end).
OPEN_END_DEFINITION = (
    "An engine that logs per stats interval (vLLM: v1/metrics/loggers.py LoggingStatLogger.log, called every "
    "VLLM_LOG_STATS_INTERVAL seconds) prints a load's last seconds only at its next tick; the sweep waits for "
    "that tick after the load (orchestrator/sweep/closing.py). When none came in time, the log's figures are "
    "short by the last interval: they are withheld (details.open_end_figures keeps them) and integrity says "
    "'open_interval', so the record's figures come from a whole source (the counters, the responses)."
)


def mark_open_end(wm: WindowMetrics, detail: str) -> None:
    """The window ended before the engine's last stats tick (OPEN_END_DEFINITION): its log figures are not the
    window's; they move to ``details.open_end_figures`` and integrity says ``open_interval``."""
    kept = {name: value for name, value in wm.figures().items() if value is not None}
    wm.integrity.broken("open_interval", detail)
    wm.integrity.part = None
    wm.accept_len = wm.acceptance_rate = wm.gen_throughput = None
    for key in wm.ddtree:
        wm.ddtree[key] = None
    wm.exactness = {}
    wm.details["open_end_figures"] = kept
    if isinstance(wm.details.get("per_position_acceptance"), list):
        wm.details["open_end_figures"]["per_position_acceptance"] = wm.details.pop("per_position_acceptance")
    wm.definitions["open_end"] = OPEN_END_DEFINITION


def _pair_integrity(wm: WindowMetrics, samples: Sequence[Sample]) -> None:
    cut = [s for s in samples if _cut_pair(s)]
    if not cut:
        return
    why = sorted({f"a {getattr(s, 'kind', 'sample')} line: {getattr(s, 'cut_pair', '')}" for s in cut})
    wm.integrity.broken("cut_pair", f"{len(cut)} line(s) without their partner, left out ({'; '.join(why)})")
    if wm.integrity.part is None and _any_figure(wm):
        wm.integrity.part = "whole_pairs"
    wm.details["cut_pair_lines"] = len(cut)
