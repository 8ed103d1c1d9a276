"""A saved log read as one window (``specsweep parse``): what the log alone says about its last interval.

An engine that logs per stats interval (vLLM: ``LoggingStatLogger.log`` every ``VLLM_LOG_STATS_INTERVAL``
seconds, vllm/v1/metrics/loggers.py) prints the work after its last tick only at the next one. The sweep waits for
that tick (orchestrator/sweep/closing.py); a saved log has no next tick to wait for. When an engine's last tick in
the log says requests were still running or waiting (``Running: %d reqs``, ``Waiting: %d reqs``, the tick's own
parts), their remaining steps were never logged (a request finished after the last tick, then the server
stopped, or the log was saved before the next tick): the log's figures are short by that interval, so they are
withheld as the sweep withholds an open window's (:func:`orchestrator.metrics.window.mark_open_end`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from orchestrator.engines.lines import plain_log
from orchestrator.engines.registry import get_engine
from orchestrator.engines.userregex import UserParser
from orchestrator.metrics.window import WindowMetrics, mark_open_end, parse_window

__all__ = ["open_end_of_saved_log", "parse_saved_log"]

# vllm/v1/metrics/loggers.py LoggingStatLogger.log: "Running: %d reqs, Waiting: %d reqs" among the tick's parts.
_IN_FLIGHT = re.compile(r"\bRunning: (?P<running>\d+) reqs, Waiting: (?P<waiting>\d+) reqs\b")


def open_end_of_saved_log(engine: str, text: str) -> str | None:
    """Why the log's last interval is not in it (an engine's last tick holds requests), or None."""
    ticks = tuple(getattr(get_engine(engine), "tick_patterns", ()) or ())
    if not ticks:
        return None
    last: dict[str, tuple[int, str]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = next((m for m in (p.search(line) for p in ticks) if m is not None), None)
        if match is not None:
            last[match.groupdict().get("engine") or ""] = (number, line)
    busy = []
    for group, (number, line) in sorted(last.items()):
        flight = _IN_FLIGHT.search(line)
        if flight is not None and (int(flight["running"]) or int(flight["waiting"])):
            who = f"engine {group}'s" if group else "the engine's"
            busy.append(
                f"{who} last stats tick (line {number}) holds {flight['running']} running and {flight['waiting']} "
                "waiting request(s)"
            )
    if not busy:
        return None
    return "; ".join(busy) + ": the work after it was never logged, so the log is short by its last interval"


def parse_saved_log(
    engine: str, text: str | bytes, user_parsers: Sequence[tuple[str, str] | UserParser] = (), *, cut: bool = False
) -> WindowMetrics:
    """``parse_window`` of a saved log, labelled as a sweep's window without responses is (``reconcile_log``), its
    figures withheld when the log lacks its last interval (:func:`open_end_of_saved_log`; integrity
    ``open_interval``, ``details.open_end_figures``)."""
    wm = parse_window(engine, text, user_parsers, cut=cut)
    # No responses beside a saved log: the engine labels what its lines count that was not committed as a sweep
    # without responses does (SGLang: drafts past a request's end, overshoot.py label_log), one rule everywhere.
    get_engine(engine).reconcile_log(wm, {})
    plain = plain_log(text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text)
    detail = open_end_of_saved_log(engine, plain)
    if detail is not None and "lost_lines" not in wm.integrity.names():
        mark_open_end(wm, detail)
    return wm
