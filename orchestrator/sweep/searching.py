"""The seam between a search and the sweep loop: a :class:`~orchestrator.sweep.schedule.Schedule` whose
deployments come from a strategy, one batch at a time, and whose finished records go back to it.

    SweepState.schedule = schedule_for(experiment, plan, targets, resume, run_dir)
        no search, or strategy grid        -> Schedule (the plan's fixed order, exactly as before)
        random / successive-halving / ...  -> SearchSchedule
    SearchSchedule.deployments_for(slot):  the target's baselines (once), then
        loop: strategy.ask() -> proposals -> a Deployment each (rung 0: the plan's; rung r: a new restart
              measuring the objective's load eta**r times longer) -> yield it -> its records -> strategy.tell()

A proposal whose points already have final records (a resumed run) is answered from them without a restart.
Several slots share one queue: a slot that finds it empty while others still measure waits for their records,
since the next batch depends on them.

What to deploy is the search's (:mod:`orchestrator.search.driver`: :func:`~orchestrator.search.driver.search_plan`
is the plan a search starts from, the baselines as the experiment loads them and every candidate at the
objective's load only); where and when is the sweep's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.search.cost import budget_restarts
from orchestrator.search.driver import at_loads, lossless_verdicts, make_strategy, objective_loads, uses_search
from orchestrator.search.history import SearchHistory
from orchestrator.search.objective import Score, score_records
from orchestrator.search.space import SearchSpace
from orchestrator.search.strategies import Proposal, Strategy
from orchestrator.sweep.schedule import Schedule

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Deployment, Plan
    from orchestrator.runs.store import Record, ResumeState

__all__ = ["SearchSchedule", "schedule_for"]


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
        longer = at_loads(self.experiment, self.eta**proposal.rung)
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
        return baseline + max(self._new_candidates() - self._measured_candidates(), 0) * per

    def _measured_candidates(self) -> int:
        """The candidates measured before a resume (each once, however many rungs measured it)."""
        hashes = {c.key for c in self.space.candidates}
        return len({r.config_hash for r in self.resume.latest.values() if r.config_hash in hashes})

    @property
    def total_points(self) -> int:
        per = max((len(d.load_points) for d in self.plan.deployments if not d.baseline), default=0)
        base = sum(len(d.load_points) for d in self.plan.deployments if d.baseline)
        return base + self._new_candidates() * per

    def _new_candidates(self) -> int:
        """The candidates the budget can deploy for the first time: the restarts past the baselines, no more
        than the space holds, and for successive halving no more than its first rung (its later rungs measure
        those again, more windows of the same points, not new ones: the count said 22 points for 20)."""
        room = min(max(self.budget - len(self.space.baselines), 0), len(self.space.candidates))
        first_rung = getattr(self.strategy, "first_rung", None)
        return min(room, first_rung) if isinstance(first_rung, int) else room

    def remaining_loads(self) -> int:
        done = len({r.deployment_id for r in self.resume.latest.values()})
        return max(self.budget - done, 0)

    def remaining_point_seconds(self) -> float:
        candidates = [d for d in self.plan.deployments if not d.baseline]
        each = sum(d.estimated_seconds() - d.expected_load_seconds for d in candidates) / max(len(candidates), 1)
        return self.remaining_loads() * each


def schedule_for(
    experiment: Experiment, plan: Plan, targets: Sequence[str], resume: ResumeState, run_dir: Path | None
) -> Schedule:
    """The schedule of a sweep: the plan's fixed order, or a search's (see the module docstring)."""
    if uses_search(experiment):
        return SearchSchedule(experiment, plan, targets, resume, run_dir)
    if experiment.load.decide is not None:  # rounds until each load is decided (orchestrator/sweep/deciding.py)
        from orchestrator.sweep.deciding import DecidingSchedule

        return DecidingSchedule(experiment, plan, targets, resume, run_dir)
    return Schedule(plan, targets, resume.final)
