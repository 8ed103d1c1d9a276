"""What a search will do, before it runs: its cost against the grid's, and its first round.

``specsweep plan`` prints the cost (:func:`orchestrator.search.cost.search_cost`) under the candidates;
``specsweep sweep --dry-run`` shows the first round: the baselines and the strategy's first batch (successive
halving's spread first rung, the random draw, the Bayesian search's spread start trials), each deployment
with the host actions a sweep would take. Later rounds depend on what the first one measures.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from orchestrator.search.cost import SearchCost, budget_restarts, search_cost
from orchestrator.search.driver import make_strategy, search_plan, uses_search
from orchestrator.search.space import SearchSpace

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Plan

__all__ = ["first_round", "plan_and_cost"]


def plan_and_cost(experiment: Experiment, grid: Plan) -> tuple[Plan, SearchCost | None]:
    """The plan a sweep of ``experiment`` starts from, and the search's cost (None without a search)."""
    if experiment.search is None:
        return grid, None
    plan = search_plan(experiment, grid) if uses_search(experiment) else grid
    return plan, search_cost(experiment, grid, plan)


def first_round(experiment: Experiment, grid: Plan) -> tuple[Plan, SearchCost]:
    """The baselines and the strategy's first batch, as a plan (what ``--dry-run`` describes)."""
    from orchestrator.plan.deployments import Plan

    plan, cost = plan_and_cost(experiment, grid)
    assert cost is not None
    space = SearchSpace.from_plan(plan)
    restarts = max(budget_restarts(experiment, grid) - len(space.baselines), 0)
    strategy = make_strategy(experiment, space, restarts, None)
    if strategy.name == "bayesian":
        from orchestrator.search.strategies import spread

        startup = int(getattr(strategy, "startup", 3))
        seed = experiment.search.seed if experiment.search is not None else 0
        batch = spread(space, min(startup, restarts), random.Random(seed))
    else:
        batch = [p.candidate for p in strategy.ask()]
    deployments = list(space.baselines) + [c.deployment for c in batch]
    return Plan(experiment=plan.experiment, deployments=deployments), cost
