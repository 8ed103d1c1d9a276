"""Closing a log window: wait for the engine's stats tick after the load, so the last interval is in it.

An engine that logs per stats interval (vLLM's ``Engine NNN:`` and ``SpecDecoding metrics:`` lines, printed
together every ``VLLM_LOG_STATS_INTERVAL`` seconds) prints what the load's last seconds did only at its next
tick. A window read right after the load ends misses that interval: its log figures are short by it (a trial
missed 19 drafts of 537). So after the load, when the engine declares ticks (``Engine.tick_patterns``,
``Engine.stats_interval``: orchestrator/engines/base.py) and the window already shows one (the engine prints
them at this log level), :func:`close_window` reads the window again until a tick line appears after the text
the load left, bounded by the interval (with slack for a loaded event loop). The tick found closes the window;
the lines printed with it (the spec line right after the Engine line) are waited for briefly too. No tick in
time: the window stays open, and ``parse_window``'s caller marks its log figures partial
(:func:`orchestrator.metrics.window.mark_open_end`), so the frame takes a whole source.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from orchestrator.engines.registry import get_engine

__all__ = ["Closed", "close_window", "tick_after", "wait_bound"]

#: Seconds a tick may come after its interval ends (the stats loop's sleep plus a busy event loop's delay).
SLACK_S = 3.0
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

    def open_detail(self) -> str | None:
        """Why the window is open (for the integrity reason), or None when it is closed or not tick-based."""
        if self.closed is not False:
            return None
        return (
            f"no stats tick of the engine came within {self.waited_s:.1f} s after the load ended (interval "
            f"{self.interval_s:g} s): the log's last interval is not in the window"
        )


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
) -> Closed:
    """The window's text once a stats tick after ``text`` (what was logged when the load ended) closed it;
    ``read`` reads the whole window again. See the module docstring."""
    spec = get_engine(engine)
    patterns = tuple(getattr(spec, "tick_patterns", ()) or ())
    interval = spec.stats_interval(command, environment) if patterns else None
    if interval is None or not any(p.search(text) for p in patterns):
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
            return Closed(current, False, clock() - start, interval)
        stop.wait(poll)
        current = read()
