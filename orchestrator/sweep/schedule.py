"""Which deployment a slot runs next, which points remain, and what the run's plan adds up to.

A sweep's *targets* are the distinct names of its launcher's slots (the hosts of a pool; one name for all the
slots of a scheduler partition). The points of a target are keyed ``(target, point id)``, as records are.

- Baselines are measured on every target, once: the slots of a target take them from that target's own
  queue, in plan order, before anything else (each host of a pool measures its own baselines, so every
  comparison stays within one host).
- Every other deployment is measured once in all, by whichever slot is free (a shared queue, in plan order).
  With one target this is the plan's order; with several (a pool), a shared point counts as done once any
  target has it, and a deployment whose points all are is skipped.

With ``load.repeats_across_restarts`` above 1 the plan holds each configuration once per restart round; the
rounds run one after the other (each round's baselines, then its shared deployments), so every configuration
is deployed once before any is deployed again.

``final`` is the live set of (target, point id) not to run again (the run's
:class:`~orchestrator.runs.store.ResumeState`): the schedule reads it, the loop adds to it.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.plan.deployments import Deployment, LoadPoint, Plan

__all__ = ["Schedule"]


class Schedule:
    """The order of one sweep's deployments over its targets (see the module docstring)."""

    def __init__(self, plan: Plan, targets: Sequence[str], final: set[tuple[str, str]]) -> None:
        if not targets:
            raise ValueError("a schedule needs at least one target")
        self.plan = plan
        self.targets = list(dict.fromkeys(targets))
        self.pooled = len(self.targets) > 1
        self.final = final
        self.rounds = sorted({d.restart for d in plan.deployments}) or [1]
        self._baselines: dict[tuple[str, int], queue.SimpleQueue[Deployment]] = {}
        self._shared: dict[int, queue.SimpleQueue[Deployment]] = {}
        for round_ in self.rounds:
            for target in self.targets:
                own: queue.SimpleQueue[Deployment] = queue.SimpleQueue()
                for deployment in plan.deployments:
                    if deployment.baseline and deployment.restart == round_:
                        own.put(deployment)
                self._baselines[(target, round_)] = own
            shared: queue.SimpleQueue[Deployment] = queue.SimpleQueue()
            for deployment in plan.deployments:
                if not deployment.baseline and deployment.restart == round_:
                    shared.put(deployment)
            self._shared[round_] = shared

    # -- what remains -------------------------------------------------------------------------------

    def pending_points(self, target: str, deployment: Deployment) -> list[LoadPoint]:
        """The points of ``deployment`` that ``target`` has not finished."""
        return [p for p in deployment.load_points if (target, p.id) not in self.final]

    def shared_done(self, deployment: Deployment) -> bool:
        """Every point of ``deployment`` finished by some target (a pool measures a shared point once)."""
        return all(any((t, p.id) in self.final for t in self.targets) for p in deployment.load_points)

    def pending_count(self) -> int:
        """The points still to measure: every target's baselines, and each shared point once."""
        if not self.pooled:
            return sum(len(self.pending_points(self.targets[0], d)) for d in self.plan.deployments)
        baseline = sum(
            len(self.pending_points(t, d)) for t in self.targets for d in self.plan.deployments if d.baseline
        )
        shared = sum(
            1
            for d in self.plan.deployments
            if not d.baseline
            for p in d.load_points
            if not any((t, p.id) in self.final for t in self.targets)
        )
        return baseline + shared

    @property
    def total_points(self) -> int:
        """The points of the plan as the sweep counts them (a pool: each host's baselines, each shared point
        once, as :meth:`pending_count` counts what remains)."""
        if not self.pooled:
            return self.plan.load_point_count
        return sum(len(d.load_points) * (len(self.targets) if d.baseline else 1) for d in self.plan.deployments)

    def remaining_loads(self) -> int:
        """The restarts still to come (for the ETA)."""
        loads = sum(
            1
            for t in self.targets
            for d in self.plan.deployments
            if (d.baseline or not self.pooled) and self.pending_points(t, d)
        )
        if self.pooled:
            loads += sum(
                1
                for d in self.plan.deployments
                if not d.baseline and any(self.pending_points(t, d) for t in self.targets)
            )
        return loads

    def remaining_point_seconds(self) -> float:
        """The estimated seconds of the points still to measure (for the ETA)."""
        seconds = sum(
            p.estimated_seconds
            for t in self.targets
            for d in self.plan.deployments
            for p in self.pending_points(t, d)
            if d.baseline or not self.pooled
        )
        if self.pooled:
            seconds += sum(
                p.estimated_seconds
                for d in self.plan.deployments
                if not d.baseline
                for p in d.load_points
                if (self.targets[0], p.id) not in self.final
            )
        return seconds

    @property
    def planned_deployments(self) -> int:
        """The deployments the sweep plans (a search: its budget of restarts)."""
        return len(self.plan.deployments)

    def extra_round(self, deployment: Deployment) -> bool:
        """Whether ``deployment`` is a round ``load.decide`` added (it measures no lossless probe again)."""
        return False

    def position(self, deployment: Deployment) -> tuple[int, int]:
        """Which deployment of how many this is (progress lines say ``[index/total]``)."""
        return self.plan.deployments.index(deployment) + 1, len(self.plan.deployments)

    # -- what a slot runs next ----------------------------------------------------------------------

    def deployments_for(
        self, target: str, *, going: Callable[[], bool], skipped: Callable[[], None]
    ) -> Iterator[Deployment]:
        """The deployments a slot of ``target`` runs, one at a time, round by round: its target's baselines of
        the round, then the round's shared ones while ``going()``; a shared deployment already finished
        everywhere is skipped (``skipped()`` hears of it: one restart fewer to come). Slots of one target share
        its baselines, so each runs once."""
        for round_ in self.rounds:
            own = self._baselines[(target, round_)]
            while True:
                try:
                    deployment = own.get_nowait()
                except queue.Empty:
                    break
                yield deployment
            shared = self._shared[round_]
            while going():
                try:
                    deployment = shared.get_nowait()
                except queue.Empty:
                    break
                if self.shared_done(deployment):
                    skipped()
                    continue
                yield deployment
            if not going():
                return
