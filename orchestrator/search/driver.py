"""The seam between a search and the sweep loop: a :class:`~orchestrator.sweep.schedule.Schedule` whose deployments
come from a strategy, one batch at a time, and whose finished records go back to it.

    SweepState.schedule = schedule_for(experiment, plan, targets, resume, run_dir)
        no search, or strategy grid        -> Schedule (the plan's fixed order, exactly as before)
        random / successive-halving / ...  -> SearchSchedule
    SearchSchedule.deployments_for(slot):  the target's baselines (once), then
        loop: strategy.ask() -> proposals -> a Deployment each (rung 0: the plan's; rung r: a new restart
              measuring the objective's load eta**r times longer) -> yield it -> its records -> strategy.tell()

A proposal whose points already have final records (a resumed run) is answered from them without a restart.
Several slots share one queue: a slot that finds it empty while others still measure waits for their records,
since the next batch depends on them.

:func:`search_plan` is the plan a search starts from: the baselines as the experiment loads them, and every
candidate at the objective's load only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.search.cost import budget_restarts
from orchestrator.search.history import SEARCH_DIR, SearchHistory
from orchestrator.search.objective import Score, score_records
from orchestrator.search.space import SearchSpace
from orchestrator.search.strategies import (
    GridStrategy,
    Proposal,
    RandomStrategy,
    Strategy,
    SuccessiveHalving,
)
from orchestrator.sweep.schedule import Schedule

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Deployment, Plan
    from orchestrator.runs.store import Record, ResumeState

__all__ = ["SearchSchedule", "make_strategy", "objective_loads", "schedule_for", "search_plan", "uses_search"]


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


def _at_loads(experiment: Experiment, factor: int = 1) -> Experiment:
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

    brief = _at_loads(experiment)
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


def lossless_verdicts(run_dir: Path | None, plan: Plan, ar_variant: str | None) -> dict[str, bool | None]:
    """Deployment id -> whether its probe answers match the autoregressive baseline's (None: unknown)."""
    if run_dir is None or ar_variant is None:
        return {}
    from orchestrator.sweep.lossless import LOSSLESS_DIR

    def answers(deployment_id: str) -> dict[int, str]:
        out: dict[int, str] = {}
        for path in (run_dir / LOSSLESS_DIR).rglob(f"{deployment_id}*.jsonl"):
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    import json

                    row = json.loads(line)
                except ValueError:
                    continue
                if row.get("run", 1) == 1 and not row.get("error"):
                    out[int(row["prompt_index"])] = str(row.get("sha256"))
        return out

    if not (run_dir / LOSSLESS_DIR).is_dir():
        return {}
    ar = next((d for d in plan.deployments if d.variant == ar_variant), None)
    if ar is None:
        return {}
    reference = answers(ar.id)
    verdicts: dict[str, bool | None] = {}
    for path in (run_dir / LOSSLESS_DIR).rglob("*.jsonl"):
        deployment_id = path.name.split(".")[0]
        mine = answers(deployment_id)
        shared = set(mine) & set(reference)
        verdicts[deployment_id] = None if not shared else all(mine[i] == reference[i] for i in shared)
    return verdicts


class SearchSchedule(Schedule):
    """Deployments proposed by a strategy (see the module docstring)."""

    def __init__(
        self,
        experiment: Experiment,
        plan: Plan,
        targets: Sequence[str],
        resume: ResumeState,
        run_dir: Path | None,
        *,
        strategy: Strategy | None = None,
    ) -> None:
        super().__init__(plan, targets, resume.final)
        self.experiment = experiment
        self.resume = resume
        self.run_dir = run_dir
        self.space = SearchSpace.from_plan(plan)
        self.budget = budget_restarts(experiment, plan)
        baselines = len(self.space.baselines)
        self.strategy = strategy or make_strategy(experiment, self.space, max(self.budget - baselines, 0), run_dir)
        self.history = SearchHistory(run_dir)
        self.loads = objective_loads(experiment)
        self.eta = experiment.search.eta if experiment.search is not None else 3
        self._cond = threading.Condition()
        self._queue: list[tuple[Proposal, Deployment]] = []
        self._inflight: dict[str, Proposal] = {}
        self._done = False
        self.spent: list[str] = []  # deployment ids measured (or answered from records), in order
        self.scores: dict[str, Score] = {}  # candidate key -> its latest score
        self._ar = None
        if experiment.objective is not None and experiment.objective.constraints.get("lossless") is True:
            from orchestrator.analysis.roles import baseline_roles

            self._ar = baseline_roles(list(experiment.baselines)).ar

    # -- deployments of proposals ---------------------------------------------------------------------

    def deployment_of(self, proposal: Proposal) -> Deployment:
        if proposal.rung == 0:
            return proposal.candidate.deployment
        from orchestrator.plan.deployments import make_deployment

        d = proposal.candidate.deployment
        longer = _at_loads(self.experiment, self.eta**proposal.rung)
        return make_deployment(longer, d.variant, d.params, aliases=list(d.aliases), restart=proposal.rung + 1)

    def _records_of(self, deployment: Deployment) -> list[Record]:
        ids = {p.id for p in deployment.load_points}
        return [r for (t, pid), r in self.resume.latest.items() if pid in ids]

    def _finished_everywhere(self, deployment: Deployment) -> bool:
        return all(any((t, p.id) in self.final for t in self.targets) for p in deployment.load_points)

    def score_of(self, config_hash: str) -> Score:
        """The candidate's score from every record of its configuration (all rungs, pooled)."""
        assert self.experiment.objective is not None
        records = [r for r in self.resume.latest.values() if r.config_hash == config_hash]
        lossless = lossless_verdicts(self.run_dir, self.plan, self._ar) if self._ar else None
        return score_records(
            records,
            self.experiment.objective,
            self.loads,
            run_dir=self.run_dir,
            level=self.experiment.checks.confidence,
            lossless=lossless,
            workload=self.experiment.objective.at.workload if self.experiment.objective.at else None,
        )

    def _note(self, deployment: Deployment, proposal: Proposal | None) -> None:
        """A deployment finished: count its restart, tell the strategy, write the history line."""
        if deployment.id not in self.spent:
            self.spent.append(deployment.id)
        score = self.score_of(deployment.config_hash) if self.experiment.objective is not None else None
        if proposal is not None and score is not None:
            self.scores[proposal.candidate.key] = score
            self.strategy.tell(proposal, score)
        best = self.best()
        self.history.append(
            {
                "restarts": len(self.spent),
                "deployment_id": deployment.id,
                "config_hash": deployment.config_hash,
                "label": deployment.config_label,
                "variant": deployment.variant,
                "params": deployment.params,
                "rung": proposal.rung if proposal is not None else 0,
                "requests": deployment.load_points[0].requests if deployment.load_points else None,
                "baseline": deployment.baseline,
                "strategy": self.strategy.name,
                "score": score.to_dict() if score is not None else None,
                "best": None if best is None else {"label": best[0], "value": best[1].value},
            }
        )

    def best(self) -> tuple[str, Score] | None:
        by_key = {c.key: c for c in self.space.candidates}
        ranked = sorted(
            ((by_key[k].label, s) for k, s in self.scores.items() if k in by_key and s.value is not None),
            key=lambda item: item[1].rank_key(),
        )
        feasible = [item for item in ranked if item[1].feasible]
        return feasible[0] if feasible else None

    def _next(self, going: Callable[[], bool]) -> Deployment | None:
        """The next deployment to measure, asking the strategy when the queue is empty (call with the lock)."""
        while going():
            if self._queue:
                proposal, deployment = self._queue.pop(0)
                self._inflight[deployment.id] = proposal
                return deployment
            if self._inflight:
                self._cond.wait(0.2)  # the next batch depends on what the other slots are measuring
                continue
            if self._done:
                return None
            batch = self.strategy.ask()
            if not batch:
                self._done = True
                self._cond.notify_all()
                return None
            for proposal in batch:
                deployment = self.deployment_of(proposal)
                if self._finished_everywhere(deployment):
                    self._note(deployment, proposal)  # measured before a resume: no restart
                else:
                    self._queue.append((proposal, deployment))
        return None

    # -- the Schedule interface -------------------------------------------------------------------------

    def deployments_for(
        self, target: str, *, going: Callable[[], bool], skipped: Callable[[], None]
    ) -> Iterator[Deployment]:
        own = self._baselines[(target, self.rounds[0])]
        while True:
            try:
                deployment = own.get_nowait()
            except Exception:  # queue.Empty
                break
            if self.pending_points(target, deployment):
                yield deployment
            else:
                skipped()
            with self._cond:
                self._note(deployment, None)
        while going():
            with self._cond:
                proposed = self._next(going)
            if proposed is None:
                return
            yield proposed
            with self._cond:
                proposal = self._inflight.pop(proposed.id, None)
                self._note(proposed, proposal)
                self._cond.notify_all()

    @property
    def planned_deployments(self) -> int:
        return self.budget

    def position(self, deployment: Deployment) -> tuple[int, int]:
        return min(len(self.spent) + 1, self.budget), self.budget

    def pending_count(self) -> int:
        per = max((len(d.load_points) for d in self.plan.deployments if not d.baseline), default=0)
        baseline = sum(
            len(self.pending_points(t, d)) for t in self.targets for d in self.plan.deployments if d.baseline
        )
        return baseline + max(self.budget - len(self.space.baselines) - self._measured_candidates(), 0) * per

    def _measured_candidates(self) -> int:
        hashes = {c.key for c in self.space.candidates}
        return len({r.deployment_id for r in self.resume.latest.values() if r.config_hash in hashes})

    @property
    def total_points(self) -> int:
        per = max((len(d.load_points) for d in self.plan.deployments if not d.baseline), default=0)
        base = sum(len(d.load_points) for d in self.plan.deployments if d.baseline)
        return base + max(self.budget - len(self.space.baselines), 0) * per

    def remaining_loads(self) -> int:
        done = len({r.deployment_id for r in self.resume.latest.values()})
        return max(self.budget - done, 0)

    def remaining_point_seconds(self) -> float:
        candidates = [d for d in self.plan.deployments if not d.baseline]
        each = sum(d.estimated_seconds() - d.expected_load_seconds for d in candidates) / max(len(candidates), 1)
        return self.remaining_loads() * each

    def plan_points(self, latest: Mapping[tuple[str, str], Record]) -> dict[str, int]:
        statuses = [r.status for r in latest.values()]
        ok = sum(1 for s in statuses if s == "ok")
        failed = sum(1 for s in statuses if s == "failed")
        return {"planned": len(statuses), "ok": ok, "failed": failed}


def schedule_for(
    experiment: Experiment, plan: Plan, targets: Sequence[str], resume: ResumeState, run_dir: Path | None
) -> Schedule:
    """The schedule of a sweep: the plan's fixed order, or a search's (see the module docstring)."""
    if uses_search(experiment):
        return SearchSchedule(experiment, plan, targets, resume, run_dir)
    return Schedule(plan, targets, resume.final)
