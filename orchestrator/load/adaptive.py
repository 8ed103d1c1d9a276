"""Adaptive stopping: a load point runs until its headline figure's interval is tight enough.

The loops ask :meth:`AdaptiveStop.keep_going` before every dispatch. Once at least ``min_requests`` requests
have finished, it computes the ``figure``'s interval over the finished requests (the bootstrap of
:mod:`orchestrator.load.uncertainty`, that figure only) and says stop as soon as half its width is within
``rel_ci`` of the figure (with 5% to spare); the requests in flight then finish and count. The caps are the
loop's own (``requests`` and ``duration_s`` of the settings). The interval is recomputed when a request has finished
since the last look, at most every ``min_interval_s`` seconds (it costs a few milliseconds), so a fast
server is not slowed by its own stopping rule.

A figure the server does not give (an accept length from an autoregressive server) falls back to the throughput,
and the record's ``until.figure`` says so.

Stopping when the interval first looks narrow enough is a sequential test: the final interval covers the
truth slightly less often than its nominal level (bench/RESULTS-trust.md measures how much). A minimum of a
few dozen requests keeps that small.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orchestrator.load.uncertainty import headline_interval

if TYPE_CHECKING:
    from orchestrator.load.loops import LoopState

__all__ = ["AdaptiveStop"]

_MARGIN = 0.95


@dataclass
class AdaptiveStop:
    """The stopping rule of one adaptive point (see the module docstring)."""

    rel_ci: float
    figure: str = "output_tok_s"
    min_requests: int = 16
    open_loop: bool = False
    level: float = 0.95
    min_interval_s: float = 0.2
    #: Set once the rule said stop: the relative half-width then, and how many requests had finished.
    reached_rel: float | None = None
    reached_at: int | None = None
    last_rel: float | None = None
    checks: int = 0
    _seen: int = 0
    _last_check: float = field(default=0.0)

    @property
    def reached(self) -> bool:
        return self.reached_rel is not None

    def keep_going(self, state: LoopState) -> bool:
        """False once the interval is tight enough (and from then on)."""
        if self.reached:
            return False
        finished = [r for r in state.records if not r.warmup]
        ok = sum(1 for r in finished if r.ok)
        if ok < self.min_requests or len(finished) == self._seen:
            return True
        now = time.perf_counter()
        if now - self._last_check < self.min_interval_s and self.checks:
            return True
        self._seen = len(finished)
        self._last_check = now
        self.checks += 1
        interval = headline_interval(
            finished, self.figure, output_tok_s=1.0, open_loop=self.open_loop, level=self.level, seed=self.checks
        )
        if interval is None and self.figure != "output_tok_s":
            # The figure does not exist here (an accept length on an autoregressive server): steer by throughput.
            self.figure = "output_tok_s"
            interval = headline_interval(
                finished, self.figure, output_tok_s=1.0, open_loop=self.open_loop, level=self.level, seed=self.checks
            )
        if interval is None:
            return True
        self.last_rel = interval.rel_halfwidth
        # A little inside the target: the interval the record keeps is computed again from every request with
        # other resamples, and must not come out just above it by resampling noise.
        if self.last_rel <= self.rel_ci * _MARGIN:
            self.reached_rel = self.last_rel
            self.reached_at = ok
            return False
        return True
