"""What a search plans, before and between its deployments: pure functions of the experiment and the plan.

:func:`uses_search` says whether the deployments come from a strategy (``strategy: grid`` keeps the plan's
fixed order); :func:`search_plan` is the plan a search starts from: the baselines as the experiment loads them,
and every candidate at the objective's load only (:func:`objective_loads`); :func:`make_strategy` builds the
experiment's strategy over a search space; :func:`lossless_verdicts` reads which deployments' probe answers
match the autoregressive baseline's, for the objective's ``lossless`` constraint.

The sweep loop asks a strategy for its deployments through its own ``SearchSchedule``
(``sweep/searching.py``): this module decides *what* to deploy, never *where*.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.search.history import SEARCH_DIR
from orchestrator.search.strategies import GridStrategy, RandomStrategy, Strategy, SuccessiveHalving

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Deployment, Plan
    from orchestrator.search.space import SearchSpace

__all__ = ["at_loads", "lossless_verdicts", "make_strategy", "objective_loads", "search_plan", "uses_search"]


def uses_search(experiment: Experiment) -> bool:
    """Whether the experiment's deployments come from a strategy (grid keeps the plain schedule)."""
    return experiment.search is not None and experiment.search.strategy != "grid"


def objective_loads(experiment: Experiment) -> list[tuple[str, float, float]]:
    """``(mode, value, weight)`` of the objective's loads (every load of the experiment without ``at``)."""
    objective = experiment.objective
    if objective is not None and objective.at is not None:
        return objective.at.loads()
    loads = [("concurrency", float(c), 1.0) for c in experiment.load.concurrency]
    loads += [("rate", float(r), 1.0) for r in experiment.load.rates]
    return [(m, v, 1.0 / len(loads)) for m, v, _ in loads]


def at_loads(experiment: Experiment, factor: int = 1) -> Experiment:
    """The experiment with only the objective's loads, measured ``factor`` times longer."""
    loads = objective_loads(experiment)
    load = experiment.load
    update: dict[str, Any] = {
        "concurrency": [int(v) for m, v, _ in loads if m == "concurrency"],
        "rates": [v for m, v, _ in loads if m == "rate"],
    }
    if factor > 1:
        if load.requests is not None:
            update["requests"] = load.requests * factor
        if load.duration is not None:
            update["duration"] = load.duration * factor
        if load.until is not None:
            until = load.until
            update["until"] = until.model_copy(
                update={
                    "min_requests": until.min_requests * factor,
                    "max_requests": None if until.max_requests is None else until.max_requests * factor,
                    "max_duration": None if until.max_duration is None else until.max_duration * factor,
                }
            )
    objective = experiment.objective
    workload = objective.at.workload if objective is not None and objective.at is not None else None
    if workload is not None and load.workloads:
        update["workloads"] = {workload: load.workloads[workload]}  # the other workloads cannot change a score
    copy = experiment.model_copy(update={"load": load.model_copy(update=update)})
    copy._source = experiment.source
    return copy


def search_plan(experiment: Experiment, plan: Plan) -> Plan:
    """The plan a search starts from: baselines as planned (once), candidates at the objective's load only."""
    from orchestrator.plan.deployments import Plan, make_deployment

    brief = at_loads(experiment)
    deployments: list[Deployment] = []
    for d in plan.deployments:
        if d.restart != 1:
            continue
        if d.baseline:
            deployments.append(d)
        else:
            deployments.append(make_deployment(brief, d.variant, d.params, aliases=list(d.aliases)))
    return Plan(experiment=plan.experiment, deployments=deployments)


def make_strategy(experiment: Experiment, space: SearchSpace, restarts: int, run_dir: Path | None) -> Strategy:
    """The experiment's strategy over ``space`` with ``restarts`` for its candidates."""
    search = experiment.search
    name = search.strategy if search is not None else "grid"
    seed = search.seed if search is not None else 0
    if name == "random":
        return RandomStrategy(space, restarts, seed=seed)
    if name == "successive-halving":
        return SuccessiveHalving(space, restarts, seed=seed, eta=search.eta if search is not None else 3)
    if name == "bayesian":
        from orchestrator.search.bayesian import BayesianStrategy

        return BayesianStrategy(space, restarts, seed=seed, directory=None if run_dir is None else run_dir / SEARCH_DIR)
    return GridStrategy(space)


def lossless_verdicts(
    run_dir: Path | None, plan: Plan, ar_variant: str | None, tie_margin: float | None = None
) -> dict[str, bool | None]:
    """Deployment id -> the lossless check's verdict on its probe answers (True: lossless, also within the
    baseline's own variance; False: lossy beyond it; None: inconclusive or unknown). The verdict is the one the
    report gives (orchestrator/analysis/lossless.py ``check_lossless``: each answer against every answer the
    autoregressive baseline gave to the prompt, alone and batched), not a hash against the baseline's first
    answer, which called a server's own batch rounding lossy; ``tie_margin``: ``checks.lossless_tie_margin``)."""
    if run_dir is None or ar_variant is None:
        return {}
    from orchestrator.analysis.lossless import LOSSLESS_DIR, TIE_MARGIN, check_lossless, read_answers

    if not (run_dir / LOSSLESS_DIR).is_dir():
        return {}
    ar_ids = {d.id for d in plan.deployments if d.variant == ar_variant}
    answers, _labels = read_answers(run_dir)
    baseline = {host: (host, deployment) for host, deployment in answers if deployment in ar_ids}
    margin = TIE_MARGIN if tie_margin is None else tie_margin
    result = check_lossless(answers, {key: key[1] for key in answers}, baseline, margin)
    outcome = {"lossless": True, "lossy": False}
    return {v.config: outcome.get(v.verdict) for host in result.hosts for v in host.configs}
