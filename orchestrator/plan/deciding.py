"""The budget of ``load.decide``'s extra rounds and its worst case, as ``plan`` and the dry run state it.

A round (``round_deployment`` in ``orchestrator/plan/deployments.py``) redeploys a configuration and measures
one more repeat of the loads it is still in contention at (``orchestrator/analysis/deciding.py`` says which):
repeat ``load.repeats + round``, the same content-hashed points a larger ``load.repeats`` would have planned,
stored as records like any other, found again by ``--resume``, and combined with the planned windows by the
analysis (``orchestrator/analysis/intervals.py``).

The worst case the plan states: every load undecided in every round, every configuration in contention, for
as many rounds as ``max_rounds`` and ``max_requests`` allow, capped by ``max_duration``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.experiment.durations import format_duration
from orchestrator.plan.deployments import decide_point_ids, decide_rounds, round_deployment

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Plan

__all__ = ["DecideBudget", "decide_budget", "decide_point_ids", "decide_rounds", "round_deployment"]


@dataclass(frozen=True)
class DecideBudget:
    """What ``load.decide`` may add to a plan at most."""

    rounds: int
    #: Requests a point may send, all its windows together (None: no such cap).
    max_requests: int | None
    #: Seconds all extra rounds together may take (None: no such cap).
    max_duration: float | None
    #: The plan's guess of one round with every configuration at every load (restarts included).
    round_seconds: float
    round_requests: int | None
    #: What sets ``rounds``: ``max_rounds``, or ``max_requests`` (its windows of ``load.requests``).
    rounds_by: str = "max_rounds"

    @property
    def rounds_reason(self) -> str:
        """Why no round follows the last one allowed, as the answer says it."""
        if self.rounds_by == "max_requests":
            return f"max_requests ({self.max_requests} a point) reached"
        return f"max_rounds ({self.rounds}) reached"

    @property
    def worst_seconds(self) -> float:
        seconds = self.rounds * self.round_seconds
        return min(seconds, self.max_duration) if self.max_duration is not None else seconds

    def describe(self) -> str:
        """``max_requests 32 a point, max_duration 20m 0s, max_rounds 8``: the budget as the file gives it."""
        parts = [f"max_requests {self.max_requests} a point"] if self.max_requests is not None else []
        if self.max_duration is not None:
            parts.append(f"max_duration {format_duration(self.max_duration)}")
        parts.append(f"at most {self.rounds} extra round{'s' if self.rounds != 1 else ''}")
        return ", ".join(parts)

    def lead(self) -> str:
        """The plan's line: the budget and its worst case."""
        each = f"one round of every configuration: ~{format_duration(self.round_seconds)}"
        return (
            f"decide: until the winner at each load is decided or the budget is spent ({self.describe()}); "
            f"worst case +{format_duration(self.worst_seconds)} ({each})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_rounds": self.rounds,
            "max_requests_per_point": self.max_requests,
            "max_duration_seconds": self.max_duration,
            "round_seconds": round(self.round_seconds, 1),
            "round_requests": self.round_requests,
            "worst_case_seconds": round(self.worst_seconds, 1),
        }


def decide_budget(experiment: Experiment, plan: Plan) -> DecideBudget | None:
    """The budget of ``load.decide`` over ``plan`` (None without it)."""
    decide = experiment.load.decide
    if decide is None:
        return None
    load = experiment.load
    rounds, rounds_by = decide_rounds(experiment)
    firsts = [round_deployment(experiment, d, 1, lambda _p: True) for d in plan.deployments]
    round_seconds = sum(d.estimated_seconds() for d in firsts)
    per_round = sum(p.requests or 0 for d in firsts for p in d.load_points) if load.requests else None
    return DecideBudget(
        rounds=rounds,
        max_requests=decide.max_requests,
        max_duration=decide.max_duration,
        round_seconds=round_seconds,
        round_requests=per_round,
        rounds_by=rounds_by,
    )
