"""A sweep's remaining time, learned while it runs and from earlier runs of the same experiment.

The remaining time is ``remaining deployments x the cost of one deployment + the remaining points' estimates x
the ratio of measured to estimated point time``.

The cost of a deployment is what it takes from the end of one deployment's last point to the start of the next
one's first point: stopping the old server, starting the new one, loading the model, warming up, the lossless
probe. It is learned from the wall clock: each worker thread's first measured point after a ``load_observed``
closes a deployment, whose cost is the time from that worker's previous point (or the model's creation) to that
point's start. Deployments differ in what the plan expects of them (the autoregressive baseline answers the
lossless probe three times), so where the sweep says which deployment a worker takes (:meth:`EtaModel.planned`),
each cost is compared with its own planned start, and a remaining deployment costs the plan's mean start plus
the mean of those errors: the first deployment, a baseline, no longer sets the pace of the others. Else, the
mean cost stands in. Until one is known, the mean observed load time (and the plan's probe at the engine's
observed speed, below) stands in, and before that the
history's, and before that the plan's guess (:func:`planned_start_seconds`: the simulator's own start where
the command runs it, else ``server.expected_load_time``).

A decide round (``load.decide``) is not in the plan: when one starts, its deployments and their points are
added (:meth:`EtaModel.add_planned`), so the remaining time counts the round under way.

The point ratio is the sum of measured point seconds over the sum of their estimates; a point that was never
measured (``seconds <= 0``: a deployment that did not start fails its points at once) only leaves the remaining
estimates and teaches nothing.

Before the first point: the engine's observed speed (issue 59). The requests a deployment sends one at a time
outside its points, the warm-up's (before them) and the lossless probe's answers alone (after them), are timed
against what the plan's pace expects of one request alone (:meth:`EtaModel.requests_done`); their ratio is the
engine's speed against the plan's. Until a point is measured it scales the remaining points (before the
history's ratio: this run's engine, not an earlier one's); until a deployment's whole cost is known, it scales
the lossless probe of every deployment still to start (the part of a start the health wait does not measure,
``expected_probe_seconds``); and it scales what is left of a probe under way (:meth:`EtaModel.phase_started`:
its planned seconds x the ratio, less the time it has run). So a slow engine's ETA is its own from its first
warm-up answer on, not the plan's guess until a point ends, and the ETA counts the probe under way, whose
deployment's health (``load_observed``) took it out of the remaining starts.

History: :func:`eta_history` reads the newest earlier runs of an experiment (its run directories): each
deployment's cost (its ``deploy`` event to its first record's start), and each successful point's measured
time against the estimate its ``plan.json`` gave. The file's guesses can be far off (a default
``expected_load_time`` of 60 s for a 1 s start); one earlier run, or the first deployment of this one, is
enough to correct them. On the simulator the plan reads its own figures (orchestrator/plan/pace.py).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.plan.deployments import Deployment, Plan

__all__ = ["EtaHistory", "EtaModel", "eta_history", "planned_start_seconds"]


def planned_start_seconds(plan: Plan, default: float) -> float:
    """The first guess at one start: the mean of the plan's deployments' (the simulator's own figure where the
    command runs it, orchestrator/plan/pace.py; else the file's ``server.expected_load_time``, ``default``)."""
    starts = [d.wall_start_seconds for d in plan.deployments]
    return statistics.fmean(starts) if starts else default


@dataclass(frozen=True)
class EtaHistory:
    """What earlier runs of an experiment say: seconds per deployment and measured/estimated point time."""

    deployment_seconds: float | None = None
    point_scale: float | None = None
    runs: int = 0

    @property
    def known(self) -> bool:
        return self.runs > 0 and (self.deployment_seconds is not None or self.point_scale is not None)

    def describe(self) -> str:
        if not self.known:
            return "no earlier run"
        parts = []
        if self.deployment_seconds is not None:
            parts.append(f"{self.deployment_seconds:.1f} s per deployment")
        if self.point_scale is not None:
            parts.append(f"points take {self.point_scale:.2f}x their estimate")
        return f"learned from {self.runs} earlier run(s): " + ", ".join(parts)


@dataclass
class EtaModel:
    expected_load_seconds: float
    remaining_loads: int
    remaining_point_estimates: float
    history: EtaHistory | None = None
    #: The plan's mean lossless probe of one deployment (:func:`orchestrator.plan.deployments.probe_seconds`):
    #: what a start costs beyond its health wait, at the plan's pace.
    expected_probe_seconds: float = 0.0
    #: The monotonic clock (a test's own).
    clock: Callable[[], float] = time.monotonic
    _loads: list[float] = field(default_factory=list)
    _deployments: list[float] = field(default_factory=list)
    _observed_points: float = 0.0
    _estimated_points: float = 0.0
    _marks: dict[int, float] = field(default_factory=dict)
    _loaded: set[int] = field(default_factory=set)
    _planned: dict[int, float] = field(default_factory=dict)
    _errors: list[float] = field(default_factory=list)
    _created: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _speed_observed: float = 0.0
    _speed_estimated: float = 0.0
    _request_marks: dict[int, float] = field(default_factory=dict)
    _phases: dict[int, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self._created is None:
            self._created = self.clock()

    def planned(self, deployments: Iterable[Deployment]) -> Iterator[Deployment]:
        """``deployments`` as a worker takes them, each one's planned start noted for that worker's thread: the
        deployment's cost, once observed, teaches its error against the plan (module docstring)."""
        for deployment in deployments:
            with self._lock:
                worker = threading.get_ident()
                self._planned[worker] = deployment.wall_start_seconds
                # A worker's first deployment counts from when the worker takes it: what the sweep did before
                # (opening the run, the host's lock, undoing what a killed run left) is not a deployment's cost.
                self._marks.setdefault(worker, self.clock())
            yield deployment

    def load_observed(self, seconds: float) -> None:
        with self._lock:
            self._loads.append(seconds)
            self._loaded.add(threading.get_ident())
            self.remaining_loads = max(0, self.remaining_loads - 1)

    def add_planned(self, loads: int, point_estimates: float) -> None:
        """More to measure than the plan said (a decide round's deployments): ``loads`` starts and points whose
        estimates sum to ``point_estimates``, each scaled as the plan's are."""
        with self._lock:
            self.remaining_loads += max(0, loads)
            self.remaining_point_estimates += max(0.0, point_estimates)

    def load_skipped(self) -> None:
        with self._lock:
            self.remaining_loads = max(0, self.remaining_loads - 1)

    def phase_started(self, planned_seconds: float) -> None:
        """This worker's deployment begins a phase before its first point (the warm-up, the lossless probe) that the
        plan expects to take ``planned_seconds`` at its pace: its remainder counts in the ETA until it ends."""
        now = self.clock()
        with self._lock:
            self._phases[threading.get_ident()] = (max(0.0, planned_seconds), now)
            self._request_marks[threading.get_ident()] = now

    def phase_ended(self) -> None:
        with self._lock:
            self._phases.pop(threading.get_ident(), None)
            self._request_marks.pop(threading.get_ident(), None)

    def requests_done(self, count: int, expected_each: float) -> None:
        """``count`` more requests of this worker's phase, sent one at a time, ended since its last ones (or its
        start); the plan's pace expects ``expected_each`` seconds of each: the engine's speed (module docstring)."""
        now = self.clock()
        worker = threading.get_ident()
        with self._lock:
            mark = self._request_marks.get(worker)
            self._request_marks[worker] = now
            if mark is None or count <= 0 or expected_each <= 0 or now <= mark:
                return
            self._speed_observed += now - mark
            self._speed_estimated += count * expected_each

    def speed_scale(self) -> float | None:
        """The engine's observed seconds over the plan's for the requests before a point; None: none timed."""
        with self._lock:
            return self._speed_scale()

    def _speed_scale(self) -> float | None:
        return self._speed_observed / self._speed_estimated if self._speed_estimated > 0 else None

    def point_observed(self, estimated: float, seconds: float) -> None:
        now = self.clock()
        worker = threading.get_ident()
        with self._lock:
            self._phases.pop(worker, None)
            self._request_marks.pop(worker, None)
            self.remaining_point_estimates = max(0.0, self.remaining_point_estimates - estimated)
            if seconds > 0:
                self._observed_points += seconds
                self._estimated_points += estimated
                if worker in self._loaded:
                    self._loaded.discard(worker)
                    start = now - seconds
                    cost = max(0.0, start - self._marks.get(worker, self._created or 0.0))
                    self._deployments.append(cost)
                    planned = self._planned.pop(worker, None)
                    if planned is not None:
                        self._errors.append(cost - planned)
            self._marks[worker] = now

    def deployment_seconds(self) -> float:
        """The cost of one deployment as known now (see the module docstring)."""
        with self._lock:
            return self._deployment_seconds()

    def _deployment_seconds(self) -> float:
        history = self.history
        if self._errors:  # the plan's mean start, corrected by what the measured ones cost beyond their own plan
            return max(0.0, self.expected_load_seconds + statistics.fmean(self._errors))
        if self._deployments:
            return statistics.fmean(self._deployments)
        # Before a deployment closes: its observed health wait plus the plan's probe at the engine's speed.
        probe = self.expected_probe_seconds * (self._speed_scale() or 1.0)
        started = statistics.fmean(self._loads) + probe if self._loads else 0.0
        if history is not None and history.deployment_seconds is not None:
            return max(history.deployment_seconds, started)
        if self._loads:
            return started
        return self.expected_load_seconds

    def point_scale(self) -> float:
        with self._lock:
            return self._point_scale()

    def _point_scale(self) -> float:
        if self._estimated_points > 0:
            return self._observed_points / self._estimated_points
        if (speed := self._speed_scale()) is not None:
            return speed
        if self.history is not None and self.history.point_scale is not None:
            return self.history.point_scale
        return 1.0

    def remaining(self, parallel: int = 1) -> float:
        now = self.clock()
        with self._lock:
            total = self.remaining_loads * self._deployment_seconds()
            total += self.remaining_point_estimates * self._point_scale()
            scale = self._speed_scale() or self._point_scale()
            total += sum(max(0.0, planned * scale - (now - since)) for planned, since in self._phases.values())
        return total / max(1, parallel)


def _time(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _lines(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    out.append(value)
    except OSError:
        return []
    return out


def _run_figures(run_dir: Path) -> tuple[list[float], float, float]:
    """(deployment costs, measured point seconds, their estimates) of one run directory."""
    try:
        plan = json.loads((run_dir / "plan.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [], 0.0, 0.0
    estimates: dict[str, float] = {}
    for deployment in plan.get("deployments", []) if isinstance(plan, dict) else []:
        for point in deployment.get("load_points", []) if isinstance(deployment, dict) else []:
            if isinstance(point, dict) and isinstance(point.get("estimated_seconds"), int | float):
                estimates[str(point.get("id"))] = float(point["estimated_seconds"])
    first_start: dict[tuple[str, str], float] = {}
    observed = estimated = 0.0
    for record in _lines(run_dir / "records.jsonl"):
        if record.get("status") != "ok" or record.get("baseline_source"):
            continue  # a reused baseline was measured in another run
        start, end = _time(record.get("started_at")), _time(record.get("finished_at"))
        if start is None or end is None or end <= start:
            continue
        key = (str(record.get("host")), str(record.get("deployment_id")))
        first_start[key] = min(first_start.get(key, start), start)
        point_estimate = estimates.get(str(record.get("point_id")))
        if point_estimate:
            observed += end - start
            estimated += point_estimate
    costs: list[float] = []
    seen: set[tuple[str, str]] = set()
    for event in _lines(run_dir / "events.jsonl"):
        if event.get("kind") != "deploy":
            continue
        key = (str(event.get("host")), str(event.get("deployment")))
        began, first = _time(event.get("time")), first_start.get(key)
        if key in seen or began is None or first is None or first < began:
            continue
        seen.add(key)
        costs.append(first - began)
    return costs, observed, estimated


def eta_history(results_root: str | Path, experiment: str, *, exclude: Path | None = None, runs: int = 3) -> EtaHistory:
    """What the newest ``runs`` earlier runs of ``experiment`` under ``results_root`` say (module docstring);
    ``exclude`` leaves out one run directory (the run being resumed)."""
    from orchestrator.runs.runref import runs_of

    excluded = exclude.resolve() if exclude is not None else None
    candidates = [p for p in runs_of(Path(results_root), experiment) if p.resolve() != excluded]
    costs: list[float] = []
    observed = estimated = 0.0
    used = 0
    for run_dir in reversed(candidates):
        run_costs, run_observed, run_estimated = _run_figures(run_dir)
        if not run_costs and not run_estimated:
            continue
        costs += run_costs
        observed += run_observed
        estimated += run_estimated
        used += 1
        if used >= runs:
            break
    return EtaHistory(
        deployment_seconds=statistics.median(costs) if costs else None,
        point_scale=observed / estimated if estimated > 0 else None,
        runs=used,
    )
