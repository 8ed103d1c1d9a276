"""vLLM's interval lines grouped into the rounds its front end logs them in, and the window's throughput from them.

``StatLoggerManager.log`` -> ``PerEngineStatLoggerAdapter.log`` (vllm/v1/metrics/loggers.py, 0.33.0) runs every
engine's ``LoggingStatLogger.log`` once per ``_force_log`` round; an engine idle in this round and the last logs
at DEBUG, so the INFO log can miss lines. :func:`log_rounds` groups the window's lines into rounds (engine order,
timestamps, the spec lines' seconds) and :func:`throughput` weighs each round by its measured length (a missing
line is 0 tokens/s), or bounds it (:mod:`orchestrator.engines.vllm.log` aggregates the window with it).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from orchestrator.engines.base import Edges
from orchestrator.engines.bounds import weighted_mean, weighted_mean_bounds
from orchestrator.engines.vllm.samples import VllmEngineSample, VllmSpecSample

__all__ = ["GEN_HALF", "LogRound", "Marked", "log_rounds", "throughput"]

GEN_HALF = 0.05  # 'Avg generation throughput' is printed with one decimal (loggers.py: %.1f)


@dataclass
class LogRound:
    """One call of the front end's stat loggers (``StatLoggerManager.log`` ->
    ``PerEngineStatLoggerAdapter.log``, vllm/v1/metrics/loggers.py): every engine's ``LoggingStatLogger.log``
    in engine order, each printing its ``Engine NNN:`` line and its spec line, at INFO, or at DEBUG when this
    and the previous interval were idle. ``lines`` are the engine lines printed at INFO, in order; ``spec`` the
    spec line each printed after its engine line; ``hidden_before``: rounds no engine printed, just before this
    one (counted in :func:`_count_rounds`)."""

    lines: list[VllmEngineSample] = field(default_factory=list)
    spec: dict[int, VllmSpecSample] = field(default_factory=dict)
    stamps: list[float] = field(default_factory=list)
    hidden_before: int = 0

    def total(self) -> float:
        return sum(line.generation_throughput or 0.0 for line in self.lines)

    def idle(self) -> bool:
        """Every printed line says nothing happened (loggers.py engine_is_idle needs this interval's zeros)."""
        return all(_zero(line) for line in self.lines)


def _zero(line: VllmEngineSample) -> bool:
    return not (line.generation_throughput or line.prompt_throughput)


def _stamp_seconds(stamp: str | None) -> float | None:
    """``"05-30 00:39:10"`` as seconds within a (leap) year: differences within a window are what matter."""
    if not stamp:
        return None
    try:
        moment = datetime.strptime("2000-" + stamp, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    return (moment - datetime(2000, 1, 1)).total_seconds()


def log_rounds(samples: Sequence[VllmSpecSample | VllmEngineSample | Any]) -> list[LogRound]:
    """The window's lines grouped by the log() call that printed them: an engine line starts a new round when
    its engine index is not above the previous line's (each round prints engines in order), or when its time
    stamp is 2 s or more after it (one round's lines are printed together). A spec line belongs to the round of
    the engine line before it; one before any engine line (the window cut a pair) opens the first round."""
    rounds: list[LogRound] = []
    current: LogRound | None = None
    last_index: int | None = None
    last_stamp: float | None = None
    for sample in samples:
        if isinstance(sample, VllmEngineSample):
            index = sample.engine_index or 0
            stamp = _stamp_seconds(sample.timestamp)
            late = stamp is not None and last_stamp is not None and stamp - last_stamp >= 2
            if current is None or (current.lines and (last_index is None or index <= last_index or late)):
                current = LogRound()
                rounds.append(current)
            current.lines.append(sample)
            if stamp is not None:
                current.stamps.append(stamp)
            last_index, last_stamp = index, stamp
        elif isinstance(sample, VllmSpecSample) and sample.form != "v0":
            if current is None:
                current = LogRound()
                rounds.append(current)
            current.spec[sample.engine_index or 0] = sample
    return rounds


@dataclass
class _Spot:
    """A place where the log cannot show how many rounds there were: ``split`` (round ``r``'s lines from
    ``position`` on may be a round of their own: each engine before was idle and hidden in the next, each one
    after hidden in this one) or ``gap`` (rounds no engine printed may come before round ``r``: every printed
    line of round r - 1 was idle, so the next ones may have been logged at DEBUG only)."""

    kind: str
    round: int
    position: int = 0
    value: int | None = None


def _spots(rounds: list[LogRound]) -> list[_Spot]:
    spots: list[_Spot] = []
    seen_zero: dict[int, bool] = {}  # engine -> its last printed line was idle (or none was printed yet)
    for r, rnd in enumerate(rounds):
        if r > 0 and rounds[r - 1].idle():
            spots.append(_Spot("gap", r))
        for p in range(1, len(rnd.lines)):
            before, after = rnd.lines[:p], rnd.lines[p:]
            if all(_zero(line) for line in before) and all(
                not _zero(line) and seen_zero.get(line.engine_index or 0, True) for line in after
            ):
                spots.append(_Spot("split", r, p))
        for line in rnd.lines:
            seen_zero[line.engine_index or 0] = _zero(line)
    return spots


def _period(rounds: list[LogRound]) -> float | None:
    """The logging interval as the time stamps show it: the smallest gap between rounds whose boundary is
    certain (an engine index that does not rise), when there is one (a longer gap holds rounds no engine
    printed)."""
    gaps = []
    for r in range(1, len(rounds)):
        prev, rnd = rounds[r - 1], rounds[r]
        rises = bool(prev.lines and rnd.lines) and (rnd.lines[0].engine_index or 0) > (prev.lines[-1].engine_index or 0)
        if prev.stamps and rnd.stamps and not rises:
            gaps.append(rnd.stamps[0] - prev.stamps[-1])
    return min(gaps) if gaps else None


def _count_rounds(rounds: list[LogRound]) -> tuple[list[_Spot], float | None]:
    """Settle every spot (``value``: 1 or 0 for a split, the number of unprinted rounds for a gap) from what
    the log holds, and return the spots, unsettled ones with ``value`` None, and the interval's length.

    Two clocks count rounds. vLLM's spec line measures its seconds since the same engine's previous printed spec
    line (SpecDecodingLogging.last_log_time, reset only when it prints), so between two spec lines of one
    engine there are round(seconds / interval) rounds, every one of them one VLLM_LOG_STATS_INTERVAL (the
    front end sleeps the interval, then logs: entrypoints/launchers/utils/server_utils.py _force_log). And time
    stamps (to the second) of rounds 3 s or more apart tell rounds apart, and count the ones between."""
    spots = _spots(rounds)
    where = {}  # (round, engine) -> position of its line in the round
    for r, rnd in enumerate(rounds):
        for p, line in enumerate(rnd.lines):
            where[(r, line.engine_index or 0)] = p
    spans: list[tuple[tuple[int, int], tuple[int, int], float]] = []
    last_spec: dict[int, tuple[int, int]] = {}
    for r, rnd in enumerate(rounds):
        for engine, spec in rnd.spec.items():
            at = (r, where.get((r, engine), 0))
            if engine in last_spec and spec.elapsed_s:
                spans.append((last_spec[engine], at, spec.elapsed_s))
            last_spec[engine] = at

    def inside(spot: _Spot, start: tuple[int, int], end: tuple[int, int]) -> bool:
        if spot.kind == "gap":
            return start[0] < spot.round <= end[0]
        return start < (spot.round, spot.position) <= end

    period_ts = _period(rounds)
    if period_ts is not None and period_ts >= 3:
        # Rounds are more than 2 s apart, so lines stamped within a second of each other are one round's.
        for spot in spots:
            if spot.kind == "split":
                spot.value = 0
            elif rounds[spot.round].stamps and rounds[spot.round - 1].stamps:
                gap = rounds[spot.round].stamps[0] - rounds[spot.round - 1].stamps[-1]
                spot.value = max(0, round(gap / period_ts) - 1)
    clean = [(b[0] - a[0], s) for a, b, s in spans if b[0] > a[0] and not any(inside(x, a, b) for x in spots)]
    period = statistics.median(s / n for n, s in clean) if clean else period_ts
    if period is None or period <= 0:
        return spots, period
    changed = True
    while changed:
        changed = False
        for a, b, seconds in spans:
            open_spots = [x for x in spots if inside(x, a, b) and x.value is None]
            if len(open_spots) != 1:
                continue
            settled = sum(x.value or 0 for x in spots if inside(x, a, b) and x.value is not None)
            extra = round(seconds / period) - (b[0] - a[0]) - settled
            spot = open_spots[0]
            if extra < 0 or (spot.kind == "split" and extra > 1):
                continue  # not a count these lines can give: left open
            spot.value = extra
            changed = True
    return spots, period


def throughput(rounds: list[LogRound], edges: Edges | None) -> dict[str, Any]:
    """The window's generation throughput from its rounds: every engine's printed throughput over every round
    of the window, the rounds an engine did not print (idle, logged at DEBUG) counting as 0 tokens/s, each
    round weighted by its seconds (loggers.py: a line's throughput is its tokens / the seconds since the
    engine's previous log() call, one round)."""
    spots, period = _count_rounds(rounds)
    # Rounds as they really were: a settled split opens a round, a settled gap adds rounds no engine printed.
    real: list[Marked] = []
    for r, rnd in enumerate(rounds):
        for spot in spots:
            if spot.kind == "gap" and spot.round == r and spot.value:
                real.extend(Marked([]) for _ in range(spot.value))
        cuts = sorted(
            {0, len(rnd.lines)} | {x.position for x in spots if x.kind == "split" and x.round == r and x.value}
        )
        for lo, hi in itertools.pairwise(cuts):
            part = rnd.lines[lo:hi]
            indexes = {line.engine_index or 0 for line in part}
            real.append(Marked(part, {e: sp for e, sp in rnd.spec.items() if e in indexes}))
        if not rnd.lines:  # spec lines only: the window cut the round's pair; it is the window's edge round
            real.append(Marked([], dict(rnd.spec), orphan=True))
    # A round's seconds: a spec line's, when the same engine printed one in the round before (its seconds run
    # from that one: SpecDecodingLogging.last_log_time), which is that round's length.
    # A spec line whose engine's previous one is further back times the rounds between together: where all
    # but one of them are timed, that one is the rest.
    last: dict[int, int] = {}
    spans: list[tuple[int, int, float]] = []
    for i, marked in enumerate(real):
        for engine, sp in marked.spec.items():
            if engine in last and sp.elapsed_s:
                if last[engine] == i - 1:
                    marked.seconds = sp.elapsed_s
                else:
                    spans.append((last[engine] + 1, i, sp.elapsed_s))
            last[engine] = i
    settled = True
    while settled:
        settled = False
        for first, end, seconds in spans:
            untimed = [m for m in real[first : end + 1] if m.seconds is None]
            rest = seconds - sum(m.seconds or 0.0 for m in real[first : end + 1])
            if len(untimed) == 1 and rest > 0:
                untimed[0].seconds = rest
                settled = True
    kept = [m for m in (edges(real)[0] if edges is not None else real) if not m.orphan]
    engines = sorted({line.engine_index or 0 for m in kept for line in m.lines})
    unsettled = [x for x in spots if x.value is None]
    out: dict[str, Any] = {
        "value": None,
        "rounds": len(kept),
        "rounds_timed": sum(1 for m in kept if m.seconds is not None),
        "hidden_rounds": sum(1 for m in kept if not m.lines),
        "hidden_intervals": sum(len(engines) - len(m.lines) for m in kept),
        "unsettled": [f"{x.kind} at round {x.round}" for x in unsettled],
        "period": period,
        "engines": engines,
    }
    if not engines or unsettled:
        return out
    totals = [sum(line.generation_throughput or 0.0 for line in m.lines) for m in kept]
    widths = [GEN_HALF * len(m.lines) for m in kept]
    timed = [m.seconds for m in kept if m.seconds is not None]
    typical = statistics.median(timed) if timed else 1.0
    weights = [m.seconds if m.seconds is not None else typical for m in kept]
    out["value"] = weighted_mean(totals, weights)
    if len(timed) == len(kept):
        low, high = weights, weights
    elif timed:  # an untimed round lasts one interval too: between the shortest and the longest timed one
        low = [m.seconds if m.seconds is not None else min(timed) for m in kept]
        high = [m.seconds if m.seconds is not None else max(timed) for m in kept]
    else:
        low, high = [0.0] * len(kept), [math.inf] * len(kept)
    out["bounds"] = weighted_mean_bounds(
        [t - w for t, w in zip(totals, widths, strict=True)],
        [t + w for t, w in zip(totals, widths, strict=True)],
        low,
        high,
    )
    out["timed"] = len(timed) == len(kept)
    return out


@dataclass
class Marked:
    """One round as it really was, handed to the window's edge rule (it has no engine: the first round of the
    window is the one cut at its start); ``seconds`` its length where a spec line measured it."""

    lines: list[VllmEngineSample]
    spec: dict[int, VllmSpecSample] = field(default_factory=dict)
    orphan: bool = False
    seconds: float | None = None
