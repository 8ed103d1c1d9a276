"""``load.decide``: after the planned deployments, rounds of repeats at the loads whose winner is not decided.

    DecidingSchedule.deployments_for(target):
        the plan's deployments (Schedule, unchanged)
        round r = 1, 2, ... while the budget lasts:
            the answer's winners from the run directory -> loads not decided (orchestrator/analysis/deciding.py)
            each configuration still in contention at one of them -> its deployment for round r, measuring
                repeat load.repeats + r of those loads only (orchestrator/plan/deciding.py)
            yield each (the slot deploys and measures it like any other) -> what it took, into decide.json

The budget (``load.decide``): ``max_rounds``; ``max_requests`` a point (a load whose contenders would pass it
is left out of the round: it is out of budget); ``max_duration`` of the rounds together (a round whose estimate,
the plan's scaled by what the deployments so far took against theirs, would pass it is not started). This follows
how benchmark tools bound a measurement: GuideLLM stops a benchmark on ``max_seconds`` / ``max_requests``
constraints (src/guidellm/scheduler/constraints/request.py), and AIPerf repeats a profile run until a
convergence criterion holds or ``--num-profile-runs`` is reached (``AdaptiveStrategy`` with ``min_runs`` /
``max_runs``, aiperf/orchestrator/strategies.py). Here the criterion is the question the sweep answers (is
the winner told apart from the runner-up?) rather than the width of one interval, and, as in racing methods
for choosing among configurations (Maron and Moore's Hoeffding races, 1994), only configurations still in
contention get more measurements.

Resume: a round's points are content-hashed like the plan's, so a resumed run asks the same question again from
every record it holds, skips each point already measured, and measures only what is missing; the seconds
spent are kept in ``decide.json`` after each deployment (a deployment cut short by an interruption is not
counted). ``decide.json`` also says how the rounds ended (``decided``, ``budget`` with why); an interrupted
run has none until it is resumed to the end.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.analysis.deciding import DECIDE_FILE, LoadKey, load_key, load_states, read_decide_log
from orchestrator.experiment.durations import format_duration
from orchestrator.plan.deciding import DecideBudget, decide_budget, round_deployment
from orchestrator.sweep.schedule import Schedule

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Deployment, LoadPoint, Plan
    from orchestrator.runs.store import ResumeState

__all__ = ["DecidingSchedule", "RoundStep", "next_round"]


def _point_key(point: LoadPoint) -> LoadKey:
    load = point.concurrency if point.mode == "concurrency" else point.rate
    return load_key(point.workload, point.mode, load)


def _keeps(loads: set[LoadKey]) -> Callable[[LoadPoint], bool]:
    return lambda point: _point_key(point) in loads


class RoundStep:
    """What round ``number`` measures: each configuration's loads, or why the rounds end (``ended``)."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.wanted: dict[str, set[LoadKey]] = {}
        self.labels: dict[LoadKey, str] = {}
        #: Loads left out because a contender there would pass max_requests (their label -> why).
        self.out_of_requests: dict[str, str] = {}
        self.ended: str | None = None
        self.why: str | None = None


def next_round(
    number: int,
    best: Any,
    frame: Any,
    budget: DecideBudget,
    per_window: int | None,
) -> RoundStep:
    """Round ``number`` from the answer's winners (``best``) and its point frame (requests so far)."""
    step = RoundStep(number)
    undecided = [s for s in load_states(best) if not s.decided]
    if not undecided:
        step.ended, step.why = "decided", None
        return step
    if number > budget.rounds:
        step.ended, step.why = "budget", budget.rounds_reason
        return step
    spent: dict[tuple[str, LoadKey], int] = {}
    if not frame.empty and "requests" in frame.columns:
        for row in frame[frame["alias_of"].isna()].to_dict("records"):
            key = (str(row.get("label")), load_key(row.get("workload"), row.get("mode"), row.get("load")))
            value = row.get("requests")
            if isinstance(value, int | float) and value == value:
                spent[key] = spent.get(key, 0) + int(value)
    for state in undecided:
        if budget.max_requests is not None and per_window:
            over = [c for c in state.contenders if spent.get((c, state.key), 0) + per_window > budget.max_requests]
            if over:
                step.out_of_requests[state.load_label] = (
                    f"max_requests ({budget.max_requests} a point) reached by {', '.join(over)}"
                )
                continue
        step.labels[state.key] = state.load_label
        for label in state.contenders:
            step.wanted.setdefault(label, set()).add(state.key)
    if not step.wanted:
        step.ended = "budget"
        step.why = "; ".join(sorted(set(step.out_of_requests.values()))) or "nothing left to measure"
    return step


class DecidingSchedule(Schedule):
    """The plan's order, then rounds until every load is decided or the budget is spent (module docstring)."""

    def __init__(
        self, experiment: Experiment, plan: Plan, targets: Sequence[str], resume: ResumeState, run_dir: Path | None
    ) -> None:
        super().__init__(plan, targets, resume.final)
        budget = decide_budget(experiment, plan)
        assert budget is not None, "DecidingSchedule needs load.decide"
        self.experiment = experiment
        self.budget = budget
        self.run_dir = run_dir
        self._extra: set[str] = set()
        self._yielded = 0
        #: Told when a round starts: ``(round, most rounds, the round's deployments still to measure)`` (the
        #: sweep's ETA adds them, and the console says which round runs).
        self.round_started: Callable[[int, int, list[Deployment]], None] | None = None
        old = read_decide_log(run_dir) if run_dir is not None else None
        self.log: dict[str, Any] = {
            "budget": budget.describe(),
            "spent_seconds": float((old or {}).get("spent_seconds") or 0.0),
            "estimated_seconds": float((old or {}).get("estimated_seconds") or 0.0),
            "loads": dict((old or {}).get("loads") or {}),
            "rounds": list((old or {}).get("rounds") or []),
            "planned_seconds": float((old or {}).get("planned_seconds") or 0.0),
            "planned_estimated": float((old or {}).get("planned_estimated") or 0.0),
            "ended": None,
            "why": None,
        }

    # -- the Schedule interface ------------------------------------------------------------------------

    def extra_round(self, deployment: Deployment) -> bool:
        return deployment.id in self._extra

    def position(self, deployment: Deployment) -> tuple[int, int]:
        if deployment.id in self._extra:
            index = len(self.plan.deployments) + self._yielded
            return index, index
        return super().position(deployment)

    def deployments_for(
        self, target: str, *, going: Callable[[], bool], skipped: Callable[[], None]
    ) -> Iterator[Deployment]:
        for planned in super().deployments_for(target, going=going, skipped=skipped):
            left = self.pending_points(target, planned)
            started = time.monotonic()
            yield planned
            if left:  # what the planned deployments took against the plan's guesses: the rounds' scale
                guess = planned.expected_load_seconds + sum(p.estimated_seconds for p in left)
                self.log["planned_seconds"] += time.monotonic() - started
                self.log["planned_estimated"] += guess
        number = 0
        while going():
            number += 1
            step = self._step(number)
            if step.ended is not None:
                self._end(step)
                return
            deployments = [
                round_deployment(self.experiment, d, number, _keeps(step.wanted[d.config_label]))
                for d in self.plan.deployments
                if d.config_label in step.wanted
            ]
            pending = [d for d in deployments if self.pending_points(target, d)]
            if pending and self._over_time(pending, step):
                self._end(step)
                return
            self._note_round(step, [d.label for d in deployments])
            if self.round_started is not None:
                self.round_started(number, self.budget.rounds, pending)
            for deployment in pending:
                if not going():
                    return
                self._extra.add(deployment.id)
                self._yielded += 1
                started = time.monotonic()
                yield deployment
                self._spend(deployment, time.monotonic() - started, step)

    # -- the rounds ----------------------------------------------------------------------------------------

    def _step(self, number: int) -> RoundStep:
        from orchestrator.analysis import analyse

        assert self.run_dir is not None
        analysis = analyse(self.run_dir)
        step = next_round(number, analysis.best, analysis.frame, self.budget, self.experiment.load.requests)
        for label, why in step.out_of_requests.items():
            self.log["loads"].setdefault(label, {})["why"] = why
        return step

    def _over_time(self, pending: list[Deployment], step: RoundStep) -> bool:
        """Whether the round's estimate would pass ``max_duration`` (the reason goes into ``step``)."""
        limit = self.budget.max_duration
        if limit is None:
            return False
        spent, estimated = self.log["spent_seconds"], self.log["estimated_seconds"]
        took = spent + float(self.log.get("planned_seconds") or 0.0)
        guessed = estimated + float(self.log.get("planned_estimated") or 0.0)
        scale = took / guessed if took > 0 and guessed > 0 else 1.0
        estimate = scale * sum(d.estimated_seconds() for d in pending)
        if spent + estimate <= limit:
            return False
        step.ended = "budget"
        step.why = (
            f"round {step.number} (~{format_duration(estimate)}) would pass max_duration "
            f"({format_duration(spent)} of {format_duration(limit)} spent)"
        )
        return True

    def _note_round(self, step: RoundStep, deployments: list[str]) -> None:
        rounds = [r for r in self.log["rounds"] if r.get("round") != step.number]
        rounds.append({"round": step.number, "loads": sorted(step.labels.values()), "deployments": deployments})
        self.log["rounds"] = sorted(rounds, key=lambda r: int(r.get("round") or 0))
        for label in step.labels.values():
            entry = self.log["loads"].setdefault(label, {})
            entry["rounds"] = max(int(entry.get("rounds") or 0), step.number)
        self._write()

    def _spend(self, deployment: Deployment, seconds: float, step: RoundStep) -> None:
        self.log["spent_seconds"] += seconds
        self.log["estimated_seconds"] += deployment.estimated_seconds()
        share = seconds / max(len(deployment.load_points), 1)
        for point in deployment.load_points:
            label = step.labels.get(_point_key(point))
            if label is not None:
                entry = self.log["loads"].setdefault(label, {})
                entry["seconds"] = float(entry.get("seconds") or 0.0) + share
        self._write()

    def _end(self, step: RoundStep) -> None:
        self.log["ended"], self.log["why"] = step.ended, step.why
        self._write()

    def _write(self) -> None:
        if self.run_dir is None:
            return
        target = self.run_dir / DECIDE_FILE
        tmp = target.with_name(f".{target.name}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(self.log, indent=2) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
