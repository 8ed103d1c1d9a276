"""What a search costs, up front: restarts and GPU-hours for the whole grid and for the chosen budget.

A restart costs the experiment's ``server.expected_load_time`` (what the ETA starts from; 480 s for the
motivating 8-GPU host) plus the estimated time of its load points; GPU-hours multiply by ``search.gpus``, the
GPUs one deployment holds. A ``gpu_hours`` budget becomes the restarts it affords; every restart counts,
baselines included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Plan

__all__ = ["SearchCost", "budget_restarts", "search_cost"]


def _restart_seconds(experiment: Experiment, plan: Plan) -> float:
    candidates = [d for d in plan.deployments if not d.baseline] or plan.deployments
    if not candidates:
        return experiment.server.expected_load_time
    return sum(d.estimated_seconds() for d in candidates) / len(candidates)


def budget_restarts(experiment: Experiment, plan: Plan) -> int:
    """The restarts the search may spend, baselines included (the grid's when there is no budget)."""
    search = experiment.search
    grid = len([d for d in plan.deployments if d.restart == 1])
    if search is None or search.budget is None or search.strategy == "grid":
        return grid
    if search.budget.restarts is not None:
        return min(search.budget.restarts, grid)
    seconds = _restart_seconds(experiment, plan)
    hours_each = seconds * search.gpus / 3600.0
    return max(1, min(grid, math.floor((search.budget.gpu_hours or 0.0) / hours_each + 1e-9)))


@dataclass(frozen=True)
class SearchCost:
    strategy: str
    grid_restarts: int
    budget_restarts: int
    restart_seconds: float
    gpus: int
    baselines: int
    candidates: int

    def gpu_hours(self, restarts: int) -> float:
        return restarts * self.restart_seconds * self.gpus / 3600.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "candidates": self.candidates,
            "baselines": self.baselines,
            "restart_seconds": round(self.restart_seconds, 1),
            "gpus": self.gpus,
            "grid": {"restarts": self.grid_restarts, "gpu_hours": round(self.gpu_hours(self.grid_restarts), 2)},
            "budget": {
                "restarts": self.budget_restarts,
                "gpu_hours": round(self.gpu_hours(self.budget_restarts), 2),
                "share_of_grid": round(self.budget_restarts / max(self.grid_restarts, 1), 3),
            },
        }

    def describe(self) -> str:
        return (
            f"search {self.strategy}: at most {self.budget_restarts} restarts "
            f"({self.gpu_hours(self.budget_restarts):.1f} GPU-hours) instead of the grid's {self.grid_restarts} "
            f"({self.gpu_hours(self.grid_restarts):.1f} GPU-hours) over {self.candidates} candidates and "
            f"{self.baselines} baseline(s); a restart: {self.restart_seconds:.0f} s on {self.gpus} GPU(s)"
        )


def search_cost(experiment: Experiment, grid_plan: Plan, plan: Plan | None = None) -> SearchCost:
    """The cost of the experiment's search: ``grid_plan`` is the full grid (``build_plan``), ``plan`` the
    search's own (its candidates measured at the objective's load only)."""
    plan = plan or grid_plan
    firsts = [d for d in grid_plan.deployments if d.restart == 1]
    search = experiment.search
    return SearchCost(
        strategy=search.strategy if search is not None else "grid",
        grid_restarts=len(firsts),
        budget_restarts=budget_restarts(experiment, grid_plan),
        restart_seconds=_restart_seconds(experiment, plan),
        gpus=search.gpus if search is not None else 1,
        baselines=sum(1 for d in firsts if d.baseline),
        candidates=sum(1 for d in firsts if not d.baseline),
    )
