"""Cheap line scanning shared by the log parsers.

A journal window is mostly lines no parser wants (access logs, prefill lines, warnings). Instead of a Python
loop over every line, each parser names the marker substrings its lines must contain; ``candidate_lines`` finds
them with ``str.find`` (C speed) and cuts out only the lines that hold one. This is what keeps the SGLang
parser well above half a million lines per second on one core (see bench/RESULTS-parse.md).

Also here: :func:`plain_log`, the log as the parsers read it, whatever wrote it: the colour codes a formatter
puts in under a terminal taken out, and a JSON log record (one object a line, what log shippers and JSON
formatters write) turned back into ``LEVEL TIME MESSAGE``; and the rank prefix SGLang puts before every
message (``[2026-05-30 00:39:10 DP0 TP3]``) and the de-duplication of the copies of one DP group's line that
several ranks print (``RANK_TAGS``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

__all__ = [
    "EDGE_DEFINITION",
    "PREFIX",
    "RANK_TAGS",
    "RankDeduper",
    "RankPrefix",
    "candidate_lines",
    "count_lines",
    "plain_log",
    "rank_prefix",
    "ranks_info",
]


def count_lines(text: str) -> int:
    """Number of lines in ``text`` (a final line without a newline counts; an empty text has none)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


# ECMA-48 control sequences (CSI: ESC [ params intermediates final) and operating-system commands (OSC: ESC ]
# ... BEL or ESC \\), and two-character escapes: what a formatter writes for colours, bold, links.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
# The keys of one JSON log record: its message, level and time, in the names the writers use (python-json-logger,
# vLLM's --logging-config formatter json: message/levelname/asctime; llama.cpp's --log-jsonl, common/log.cpp
# common_log_entry::print: msg/level/time; Docker's json-file driver: log/time).
_MESSAGE_KEYS = ("message", "msg", "log")
_LEVEL_KEYS = ("levelname", "level")
_TIME_KEYS = ("asctime", "time", "timestamp")


def plain_log(text: str) -> str:
    """``text`` as the parsers read it: escape sequences removed (a coloured formatter's codes: vLLM's
    ``ColoredFormatter``, vllm/logging_utils/formatter.py; llama.cpp's ``--log-colors``, common/log.cpp), and each
    line that is one JSON log record replaced by its ``LEVEL TIME MESSAGE`` (the parts it has); every other line
    as it is. Cheap when there is nothing to do (two substring tests)."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if '"' not in text or not any(f'"{key}"' in text for key in _MESSAGE_KEYS):
        return text
    lines = text.split("\n")
    changed = False
    for i, line in enumerate(lines):
        record = _json_record(line)
        if record is not None:
            lines[i] = record
            changed = True
    return "\n".join(lines) if changed else text


def _json_record(line: str) -> str | None:
    stripped = line.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        obj = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    message = next((obj[k] for k in _MESSAGE_KEYS if isinstance(obj.get(k), str)), None)
    if message is None:
        return None
    level = next((obj[k] for k in _LEVEL_KEYS if obj.get(k) is not None), None)
    when = next((obj[k] for k in _TIME_KEYS if obj.get(k) is not None), None)
    parts = [str(v) for v in (level, when) if v is not None]
    body = message.rstrip("\n")
    if "\x1b" in body:
        body = _ANSI.sub("", body)
    return " ".join([*parts, body])


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


# SGLang's logger format is "[%(asctime)s{prefix}] message" (utils/common.py configure_logger; ".%(msecs)03d"
# after the seconds with SGLANG_LOG_MS), prefix " DP1 PP0 ATTN_CP1 MOE_DP1 TP4 EP4" (see RANK_TAGS).
PREFIX = re.compile(r"\[\s*(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)?((?:\s*[A-Z][A-Z_]*\d+)*)\s*\]\s*\Z")

RANK_TAGS = (
    "The rank tags of SGLang's log prefix, built by managers/scheduler.py configure_scheduler_process (sglang "
    "0.5.23; configure_scheduler in 0.5.10) in this order: ' DP<dp_rank>' when the scheduler has a DP rank, "
    "' PP<pp_rank>' when pp_size > 1, ' ATTN_CP<attn_cp_rank>' when attn_cp_size > 1, ' MOE_DP<moe_dp_rank>' "
    "when moe_dp_size > 1, ' TP<tp_rank>' when tp_size > 1, ' EP<moe_ep_rank>' when ep_size > 1. A scheduler "
    "prints its Decode line when it is a stats-logging rank (observability/metrics_collector.py init_new: "
    "attn_tp_rank == 0, and from 0.5.23 also attn_cp_rank == 0; every rank in old versions run with "
    "--enable-metrics-for-all-schedulers). With tp_rank = (attn_dp_rank * attn_cp_size + attn_cp_rank) * "
    "attn_tp_size + attn_tp_rank (runtime_context.py derive_attention_ranks), the printing ranks are one per "
    "DP group x ATTN_CP rank x PP stage. Only the DP groups carry different requests: the ATTN_CP ranks of a "
    "group run its batches, and every PP stage settles every micro-batch (scheduler_pp_mixin.py), so they print "
    "copies of their group's figures; MOE_DP, TP and EP are functions of tp_rank and differ between lines only "
    "together with ATTN_CP (or between TP copies). So a line's group is its DP tag, and within a group the lines "
    "of one printing rank (the first seen) are kept and every other rank's are copies, whatever their "
    "timestamps and last digits (each rank times its own intervals)."
)


@dataclass(frozen=True, slots=True)
class RankPrefix:
    """What the engine's own bracketed prefix says about a line: its timestamp and the ranks that printed it."""

    timestamp: str | None
    ranks: str | None  # e.g. "DP0 TP3"; None when the line carries no rank tag
    group: str = ""  # the DP tag: the ranks that carry different requests (see RANK_TAGS)
    has_tp: bool = False  # has a tag other than DP: the line may be one of several ranks' copies


_NO_PREFIX = RankPrefix(None, None)
_ranks_cache: dict[str, tuple[str | None, str, bool]] = {}  # rank text -> (ranks, group, has copy tags)


def ranks_info(text: str) -> tuple[str | None, str, bool]:
    """``(ranks, group, has_copy_tags)`` for the rank tags of a prefix: ``" DP1 ATTN_CP1 TP4"`` ->
    ``("DP1 ATTN_CP1 TP4", "DP1", True)``; the group is the DP tag (see RANK_TAGS)."""
    found = _ranks_cache.get(text)
    if found is None:
        if len(_ranks_cache) >= 1024:
            _ranks_cache.clear()
        tags = text.split()
        group = " ".join(t for t in tags if t.startswith("DP") and t[2:].isdigit())
        found = _ranks_cache[text] = (" ".join(tags) or None, group, len(tags) > (1 if group else 0))
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
    """Recognises the lines that are another rank's copy of a group's line (see RANK_TAGS).

    Per group (DP tag), the first rank seen printing is the group's printer; a line of the same group from any
    other rank is a copy. Lines without rank tags other than DP are never copies: two identical lines of one
    rank are two intervals.
    """

    _printer: dict[str, str] = field(default_factory=dict)  # group -> the ranks whose lines are kept

    def is_copy(self, prefix: RankPrefix, message: str = "") -> bool:
        if not prefix.has_tp:
            return False
        return self.seen_before(prefix.timestamp, prefix.ranks or "", prefix.group, message)

    def seen_before(self, timestamp: str | None, ranks: str, group: str, message: str = "") -> bool:
        """True when ``ranks`` is not its group's printer (call only for lines with copy tags)."""
        printer = self._printer.setdefault(group, ranks)
        return printer != ranks


#: How a cut window's interval lines are read (orchestrator.metrics.window.drop_window_edges applies it).
EDGE_DEFINITION = (
    "An engine's interval line (SGLang 'Decode batch', vLLM 'SpecDecoding metrics:' and 'Engine NNN:') covers "
    "the time and the tokens since that engine's previous line of its kind, so the first line of a window "
    "covers an interval that began before the window: after an idle gap its throughput includes the gap, and "
    "its counts may include the previous point's last unlogged steps (SGLang 0.5.23: "
    "managers/scheduler_components/metrics_reporter.py report_decode_stats, scheduler_metrics_mixin.py before, "
    "resets its counters and last_decode_stats_tic only when it prints a line; vLLM: v1/metrics/loggers.py "
    "LoggingStatLogger.log every VLLM_LOG_STATS_INTERVAL seconds, v1/spec_decode/metrics.py resetting only when "
    "it printed). See docs/engines.md. So the first line of each group (SGLang DP "
    "group, vLLM engine) is left out of the window's figures when the group has more lines in the window; "
    "details.edge_lines_dropped counts them and details.edge_lines_kept counts groups with one line only, "
    "whose figures then include the edge."
)
