"""The search space: the candidates a search chooses from, and where each sits on the parameters' axes.

A candidate is one non-baseline configuration of the plan (a restart-1 deployment: one rendered server
configuration, identical configurations already merged by the plan). Its coordinates are, per matrix key,
the index of its value in the order the file lists the values: integer and ordered parameters keep their
order (a step along ``budget: [8, 16, 32, 64]`` is a step to a neighbour); a text or yes/no parameter is
categorical (only equal or different). With several non-baseline variants, the variant itself is one more
categorical axis. ``where`` rules (``"budget >= topk"``) prune combinations before the plan is built
(:func:`admitted`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.experiment.search import admitted

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Deployment, Plan

__all__ = ["Axis", "Candidate", "SearchSpace", "admitted"]

Scalar = str | int | float | bool


@dataclass(frozen=True)
class Axis:
    """One parameter: its values in file order; ``ordered`` when every value is a number."""

    name: str
    values: tuple[Scalar, ...]
    ordered: bool


@dataclass(frozen=True)
class Candidate:
    """One configuration a search may deploy: its plan deployment (rung 0) and its coordinates."""

    index: int
    deployment: Deployment
    coords: tuple[int | None, ...]

    @property
    def key(self) -> str:
        return self.deployment.config_hash

    @property
    def label(self) -> str:
        return self.deployment.config_label


@dataclass
class SearchSpace:
    """The candidates of a plan, with the axes a strategy moves along."""

    axes: list[Axis]
    candidates: list[Candidate]
    baselines: list[Deployment] = field(default_factory=list)

    @classmethod
    def from_plan(cls, plan: Plan) -> SearchSpace:
        firsts = [d for d in plan.deployments if d.restart == 1]
        baselines = [d for d in firsts if d.baseline]
        others = [d for d in firsts if not d.baseline]
        values: dict[str, list[Scalar]] = {}
        variants = list(dict.fromkeys(d.variant for d in others))
        for d in others:
            for key, value in d.params.items():
                bucket = values.setdefault(key, [])
                if value not in bucket:
                    bucket.append(value)
        axes = [
            Axis(
                name,
                tuple(vals),
                all(isinstance(v, int | float) and not isinstance(v, bool) for v in vals),
            )
            for name, vals in values.items()
        ]
        for axis in axes:
            if axis.ordered:
                object.__setattr__(axis, "values", tuple(sorted(axis.values, key=float)))
        if len(variants) > 1:
            axes.insert(0, Axis("variant", tuple(variants), False))
        candidates = []
        for index, d in enumerate(others):
            coords: list[int | None] = []
            for axis in axes:
                own: Any = d.variant if axis.name == "variant" else d.params.get(axis.name)
                coords.append(axis.values.index(own) if own in axis.values else None)
            candidates.append(Candidate(index, d, tuple(coords)))
        return cls(axes, candidates, baselines)

    def __len__(self) -> int:
        return len(self.candidates)

    def distance(self, a: Sequence[int | None], b: Sequence[int | None]) -> float:
        """Normalised distance: an ordered axis counts its index steps over its span, a categorical one 0/1; a
        coordinate one side lacks counts as a full step."""
        total = 0.0
        for axis, x, y in zip(self.axes, a, b, strict=True):
            if x is None or y is None:
                total += 0.0 if x == y else 1.0
            elif axis.ordered:
                span = max(len(axis.values) - 1, 1)
                total += abs(x - y) / span
            else:
                total += 0.0 if x == y else 1.0
        return total

    def nearest(self, coords: Sequence[int | None], *, exclude: set[str] | None = None) -> Candidate | None:
        """The candidate nearest ``coords`` that is not in ``exclude`` (ties: plan order)."""
        pool = [c for c in self.candidates if not exclude or c.key not in exclude]
        if not pool:
            return None
        return min(pool, key=lambda c: (self.distance(c.coords, coords), c.index))

    def neighbours(self, candidate: Candidate) -> list[Candidate]:
        """Candidates one step away along one ordered axis (or differing in one categorical value)."""
        out = []
        for other in self.candidates:
            diffs = [
                (axis, x, y) for axis, x, y in zip(self.axes, candidate.coords, other.coords, strict=True) if x != y
            ]
            if len(diffs) != 1:
                continue
            axis, x, y = diffs[0]
            if not axis.ordered or (x is not None and y is not None and abs(x - y) == 1):
                out.append(other)
        return out


def space_of(experiment: Experiment, plan: Plan) -> SearchSpace:
    """The search space of ``plan`` (the experiment is for symmetry with the other builders)."""
    del experiment
    return SearchSpace.from_plan(plan)
