"""Log windows on an engine's stats ticks: opened after one, closed by the one after the load.

An engine that logs per stats interval (vLLM's ``Engine NNN:`` and ``SpecDecoding metrics:`` lines, printed
together every ``VLLM_LOG_STATS_INTERVAL`` seconds) prints what the load's last seconds did only at its next
tick. A window read right after the load ends misses that interval: its log figures are short by it (a trial
missed 19 drafts of 537). So after the load, when the engine declares ticks (``Engine.tick_patterns``,
``Engine.stats_interval``: orchestrator/engines/base.py) and the window already shows one (the engine prints
them at this log level), :func:`close_window` reads the window again until a tick line appears after the text
the load left, bounded by the interval (with slack for a loaded event loop). The tick found closes the window;
the lines printed with it (the spec line right after the Engine line) are waited for briefly too. The window is
read first thing when the load ends, so a tick after that text is one after the load's end. That read may still
come late (a loaded machine, a short interval): vLLM's tick after the load and the idle one after it may both be
in it already, and then no tick follows at INFO (an interval idle after an idle one is logged at DEBUG,
vllm/v1/metrics/loggers.py LoggingStatLogger._update_stats and log). So when no tick comes in time but every
engine's last tick in the window says it did nothing and holds no request (``Engine.idle_tick_patterns``), the
window is closed all the same (``Closed.idle``): anything the engine did after such a tick would have been
logged at INFO within the wait. Otherwise the window stays open, and ``parse_window``'s caller marks its log
figures partial (:func:`orchestrator.metrics.window.mark_open_end`), so the frame takes a whole source.

The window's start is the same question the other way round: an interval line covers the time since the previous
tick, so the window's first line may hold what ran before the window (a warm-up, the lossless probe, the previous
point's tail). :func:`open_window` takes the cursor after the engine's next tick (and the lines printed with it),
or after a whole interval without one (an engine idle for two intervals logs its ticks at DEBUG, vLLM
v1/metrics/loggers.py LoggingStatLogger.log, so everything before was logged): every interval line of such a
window ("aligned") began inside it, and the window is read whole, no edge line left out.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from orchestrator.engines.registry import get_engine

__all__ = [
    "Closed",
    "Opened",
    "close_window",
    "idle_at_end",
    "open_window",
    "tick_after",
    "ticking",
    "wait_bound",
]

#: Seconds a tick may come after its interval ends (the stats loop's sleep plus a busy event loop's delay).
SLACK_S = 1.5
#: Seconds the lines printed with a tick (in the same log() call) are waited for once the tick is seen.
GRACE_S = 0.5


@dataclass(frozen=True)
class Closed:
    """The window's text, and whether a tick after the load closed it (None: the engine has no ticks, or the
    window shows none, so nothing was waited for); ``waited_s`` is how long it took."""

    text: str
    closed: bool | None
    waited_s: float = 0.0
    interval_s: float | None = None
    #: closed by the engines' idle ticks when no tick came after the load (the module docstring)
    idle: bool = False

    def open_detail(self) -> str | None:
        """Why the window is open (for the integrity reason), or None when it is closed or not tick-based."""
        if self.closed is not False:
            return None
        return (
            f"no stats tick of the engine came within {self.waited_s:.1f} s after the load ended (interval "
            f"{self.interval_s:g} s): the log's last interval is not in the window"
        )


class _Logs(Protocol):
    def journal_cursor(self) -> str: ...

    def journal_since(self, cursor: str) -> str: ...


@dataclass(frozen=True)
class Opened:
    """Where a window opens: its cursor, and whether it is aligned on the engine's ticks (False: the engine has
    no ticks, or a stop came first; the window is then read as cut at its start)."""

    cursor: str
    aligned: bool
    waited_s: float = 0.0
    tick_seen: bool = False


def _patterns(engine: str, member: str) -> tuple[re.Pattern[str], ...]:
    """The engine's ``tick_patterns`` or ``idle_tick_patterns`` (none for an engine from outside without them)."""
    return tuple(getattr(get_engine(engine), member, ()) or ())


def _ticks(
    engine: str, command: str | None, environment: Mapping[str, str]
) -> tuple[tuple[re.Pattern[str], ...], float | None]:
    patterns = _patterns(engine, "tick_patterns")
    return patterns, (get_engine(engine).stats_interval(command, environment) if patterns else None)


def ticking(engine: str) -> bool:
    """Whether the engine declares stats ticks (``Engine.tick_patterns``): its window is read first thing when
    the load ends, so that a tick after that text is one after the load (:func:`close_window`)."""
    return bool(_patterns(engine, "tick_patterns"))


def idle_at_end(engine: str, text: str) -> bool:
    """Whether every engine's last tick line in ``text`` is an idle one (``Engine.idle_tick_patterns``: it did
    nothing in its interval and holds no request); False when ``text`` has no tick or the engine names no idle
    tick. A pattern's ``engine`` group tells the engines apart (none: one engine)."""
    ticks, idle = _patterns(engine, "tick_patterns"), _patterns(engine, "idle_tick_patterns")
    if not ticks or not idle:
        return False
    last: dict[str, bool] = {}
    for line in text.splitlines():
        match = next((m for m in (p.search(line) for p in ticks) if m is not None), None)
        if match is not None:
            last[match.groupdict().get("engine") or ""] = any(p.search(line) is not None for p in idle)
    return bool(last) and all(last.values())


def open_window(
    engine: str,
    logs: _Logs,
    *,
    command: str | None,
    environment: Mapping[str, str],
    stop: threading.Event,
    clock: Callable[[], float] = time.monotonic,
    poll: float = 0.25,
) -> Opened:
    """The cursor a window opens at: after the engine's next stats tick, or after a whole interval without one
    (the module docstring)."""
    patterns, interval = _ticks(engine, command, environment)
    if interval is None:
        return Opened(logs.journal_cursor(), False)
    start = clock()
    deadline = start + wait_bound(interval)
    cursor = logs.journal_cursor()
    while not stop.is_set():
        if tick_after(patterns, str(logs.journal_since(cursor)), 0) is not None:
            stop.wait(GRACE_S)  # the lines printed with the tick
            return Opened(logs.journal_cursor(), not stop.is_set(), clock() - start, True)
        if clock() >= deadline:
            return Opened(logs.journal_cursor(), True, clock() - start, False)
        stop.wait(poll)
    return Opened(logs.journal_cursor(), False, clock() - start, False)


def wait_bound(interval: float) -> float:
    """The longest wait for the tick that closes a window: one whole interval plus slack."""
    return interval * 1.25 + SLACK_S


def tick_after(patterns: tuple[re.Pattern[str], ...], text: str, offset: int) -> int | None:
    """The end offset of the first tick line starting at or after ``offset`` in ``text``, or None."""
    first: int | None = None
    for pattern in patterns:
        match = pattern.search(text, offset)
        if match is not None and (first is None or match.start() < first):
            first = match.start()
    if first is None:
        return None
    end = text.find("\n", first)
    return len(text) if end == -1 else end + 1


def close_window(
    engine: str,
    text: str,
    read: Callable[[], str],
    *,
    command: str | None,
    environment: Mapping[str, str],
    stop: threading.Event,
    clock: Callable[[], float] = time.monotonic,
    poll: float = 0.25,
    expect_tick: bool = False,
) -> Closed:
    """The window's text once a stats tick after ``text`` (the window read first thing when the load ended)
    closed it, or once the engines' idle ticks did; ``read`` reads the whole window again. It waits when the
    window shows a tick or ``expect_tick`` (its opening saw the engine tick at this log level). See the module
    docstring."""
    patterns, interval = _ticks(engine, command, environment)
    if interval is None or not (expect_tick or any(p.search(text) for p in patterns)):
        return Closed(text, None)
    start = clock()
    deadline = start + wait_bound(interval)
    end_of_load = len(text)
    current = text
    while True:
        if tick_after(patterns, current, end_of_load) is not None:
            # The lines printed in the same log() call (vLLM's spec line after its Engine line) may lag a little.
            stop.wait(GRACE_S)
            return Closed(read(), True, clock() - start, interval)
        if clock() >= deadline or stop.is_set():
            idle = not stop.is_set() and idle_at_end(engine, current)
            return Closed(current, idle, clock() - start, interval, idle=idle)
        stop.wait(poll)
        current = read()
