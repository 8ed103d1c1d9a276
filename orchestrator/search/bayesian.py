"""Bayesian search: Optuna's TPE sampler over the candidates' axes, its study kept in the run directory.

Each axis is one Optuna parameter: an ordered axis an integer index (TPE models its order), a categorical one
a categorical choice. The trials go in three phases: a quarter spread over the space (enqueued, as
successive halving's first rung opens), then TPE's suggestions (multivariate), then, for the last half, a
polish of the incumbent: its most promising untried neighbour (the changed value that did best on average
among the trials), one at a time, as a fixed trial. The last two restarts measure the best two candidates
again, ``search.eta`` times longer (rung 1), since among near-ties the best single window is as often the
luckiest as the best.

A suggestion already measured is told that candidate's value again (no restart) and TPE asked once more; a
suggestion that is not a candidate (pruned by a ``where`` rule) is told as failed, and a trial fixed at the
nearest candidate not yet measured measures it, so the sampler learns where it actually measured. Infeasible
candidates are told through Optuna's constraints (``Trial.set_constraint`` in Optuna 5, ``constraints_func``
before: the constraints' excess), so TPE prefers feasible regions.

The study lives in ``search/optuna.journal`` (Optuna's ``JournalStorage`` with a file backend); with
``--resume`` the study is loaded again: its finished trials stay told, and a trial asked but never told (the
run was killed while it was measured) is proposed again first, so its records, if they exist, answer it
without a restart. Optuna is imported only when a Bayesian search runs.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.search.objective import Score
from orchestrator.search.space import Candidate, SearchSpace
from orchestrator.search.strategies import Proposal, spread

__all__ = ["BayesianStrategy"]

STUDY_NAME = "specsweep"
JOURNAL = "optuna.journal"


def _optuna() -> Any:
    try:
        import optuna
    except ImportError as exc:  # pragma: no cover - optuna is a dependency
        raise ConfigError("the bayesian strategy needs optuna (pip install optuna)", key="search.strategy") from exc
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _constraints(trial: Any) -> list[float]:
    return [float(trial.user_attrs.get("violation", 0.0))]


def _constraint_option() -> dict[str, Any]:
    """Optuna 5 reads constraints from the trial (``Trial.set_constraint``); earlier ones need a function."""
    optuna = _optuna()
    return {} if hasattr(optuna.trial.Trial, "set_constraint") else {"constraints_func": _constraints}


class BayesianStrategy:
    """TPE over the space (module docstring); one proposal at a time."""

    name = "bayesian"

    def __init__(
        self,
        space: SearchSpace,
        restarts: int,
        *,
        seed: int = 0,
        directory: Path | None = None,
        startup: int | None = None,
        polish: int | None = None,
        confirm: int = 2,
    ) -> None:
        optuna = _optuna()
        self.space = space
        self.seed = seed
        # The last ``confirm`` restarts measure the best candidates again, longer (rung 1): among near-ties, the
        # best single window is the luckiest as often as the best (the winner's curse).
        self.confirm = confirm if restarts >= confirm + 6 else 0
        self.restarts = restarts - self.confirm
        self._confirmed = False
        # A quarter of the trials spread over the space before TPE models, and the last half polishes the
        # incumbent (its most promising untried neighbour, one at a time, as fixed trials): the shares that
        # found the grid's best most often on the simulator's 48-configuration space (bench/RESULTS-search.md).
        self.startup = startup if startup is not None else max(3, self.restarts // 4)
        self.polish = polish if polish is not None else self.restarts // 2
        sampler = optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=self.startup,
            multivariate=True,
            n_ei_candidates=max(24, len(space.candidates)),
            **_constraint_option(),
        )
        storage: Any = None
        if directory is not None:
            from optuna.storages import JournalStorage
            from optuna.storages.journal import JournalFileBackend

            directory.mkdir(parents=True, exist_ok=True)
            storage = JournalStorage(JournalFileBackend(str(directory / JOURNAL)))
        self.study = optuna.create_study(
            study_name=STUDY_NAME, storage=storage, direction="maximize", sampler=sampler, load_if_exists=True
        )
        self.by_key = {c.key: c for c in space.candidates}
        self._open: dict[str, Any] = {}  # candidate key -> trial waiting for its value
        self._waiting: list[Proposal] = []
        if not self.study.get_trials(deepcopy=False):
            # The first trials spread over the space (as successive halving's first rung), then TPE.
            for candidate in spread(space, min(self.startup, self.restarts), random.Random(seed)):
                self.study.enqueue_trial(self._params(candidate))

    # -- what the study already holds ----------------------------------------------------------------

    def _trials(self, states: tuple[Any, ...]) -> list[Any]:
        return list(self.study.get_trials(deepcopy=False, states=states))

    def measured(self) -> set[str]:
        """Candidates measured, being measured, or whose measurement failed (each spent one restart)."""
        optuna = _optuna()
        states = optuna.trial.TrialState
        trials = self._trials((states.COMPLETE, states.RUNNING, states.FAIL))
        return {t.user_attrs["candidate"] for t in trials if "candidate" in t.user_attrs}

    def spent(self) -> int:
        return len(self.measured())

    def _distributions(self) -> dict[str, Any]:
        optuna = _optuna()
        out: dict[str, Any] = {}
        for axis in self.space.axes:
            if axis.ordered:
                out[axis.name] = optuna.distributions.IntDistribution(0, len(axis.values) - 1)
            else:
                out[axis.name] = optuna.distributions.CategoricalDistribution(list(range(len(axis.values))))
        return out

    # -- ask / tell -----------------------------------------------------------------------------------

    def ask(self) -> list[Proposal]:
        optuna = _optuna()
        if self._waiting:
            return []
        # A trial asked but never told (a killed run): propose its candidate again.
        for trial in self._trials((optuna.trial.TrialState.RUNNING,)):
            key = trial.user_attrs.get("candidate")
            if key in self.by_key and key not in self._open:
                self._open[key] = trial.number
                self._waiting = [Proposal(self.by_key[key])]
                return list(self._waiting)
            if key is None:
                self.study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        measured = self.measured()
        if self.spent() >= self.restarts or len(measured) >= len(self.space.candidates):
            return self._confirmations()
        if self.spent() >= self.restarts - self.polish:
            neighbour = self._polish(measured)
            if neighbour is not None:
                return self._propose(self.study.ask(self._fixed(neighbour)), neighbour)
        distributions = self._distributions()
        for _attempt in range(64):
            trial = self.study.ask(distributions)
            coords = tuple(int(trial.params[axis.name]) for axis in self.space.axes)
            exact = next((c for c in self.space.candidates if c.coords == coords), None)
            if exact is not None and exact.key in measured:
                # Already measured: tell it its value again (no restart) and ask once more.
                previous = self._value_of(exact.key)
                trial.set_user_attr("repeat_of", exact.key)
                if previous is None:
                    self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    continue
                value, violation = previous
                trial.set_user_attr("violation", violation)
                self.study.tell(trial, value)
                continue
            target = exact if exact is not None and exact.key not in measured else None
            if target is None:
                target = self.space.nearest(coords, exclude=measured | set(self._open))
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                if target is None:
                    return []
                trial = self.study.ask(self._fixed(target))
            return self._propose(trial, target)
        return []

    def _propose(self, trial: Any, target: Candidate) -> list[Proposal]:
        trial.set_user_attr("candidate", target.key)
        trial.set_user_attr("label", target.label)
        self._open[target.key] = trial.number
        self._waiting = [Proposal(target)]
        return list(self._waiting)

    def _polish(self, measured: set[str]) -> Candidate | None:
        """The most promising untried neighbour of the best feasible candidate so far (None when it has none):
        the one whose changed value did best on average among the trials (a main-effect estimate)."""
        optuna = _optuna()
        values: dict[str, float] = {}
        for trial in self._trials((optuna.trial.TrialState.COMPLETE,)):
            key = trial.user_attrs.get("candidate")
            if key in self.by_key and trial.value is not None and not trial.user_attrs.get("violation"):
                values[key] = float(trial.value)
        if not values:
            return None
        best = self.by_key[max(values, key=lambda k: (values[k], -self.by_key[k].index))]
        fresh = [n for n in self.space.neighbours(best) if n.key not in measured]
        if not fresh:
            return None
        overall = sum(values.values()) / len(values)

        def promise(candidate: Candidate) -> tuple[float, int]:
            axis = next(i for i, (a, b) in enumerate(zip(best.coords, candidate.coords, strict=True)) if a != b)
            same = [v for k, v in values.items() if self.by_key[k].coords[axis] == candidate.coords[axis]]
            return (sum(same) / len(same) if same else overall, -candidate.index)

        return max(fresh, key=promise)

    def _confirmations(self) -> list[Proposal]:
        """The best ``confirm`` feasible candidates, measured again ``eta`` times longer (once; [] after)."""
        if self._confirmed or not self.confirm:
            return []
        self._confirmed = True
        optuna = _optuna()
        values: dict[str, float] = {}
        for trial in self._trials((optuna.trial.TrialState.COMPLETE,)):
            key = trial.user_attrs.get("candidate")
            if key in self.by_key and trial.value is not None and not trial.user_attrs.get("violation"):
                values[key] = float(trial.value)
        best = sorted(values, key=lambda k: (-values[k], self.by_key[k].index))[: self.confirm]
        if len(best) < 2:
            return []
        self._waiting = [Proposal(self.by_key[k], 1) for k in best]
        return list(self._waiting)

    def _params(self, candidate: Candidate) -> dict[str, int]:
        return {axis.name: int(c) for axis, c in zip(self.space.axes, candidate.coords, strict=True) if c is not None}

    def _fixed(self, candidate: Candidate) -> dict[str, Any]:
        """Distributions for the next trial, pinned to ``candidate``'s coordinates (it measures exactly it)."""
        self.study.enqueue_trial(self._params(candidate), skip_if_exists=False)
        return self._distributions()

    def _value_of(self, key: str) -> tuple[float, float] | None:
        optuna = _optuna()
        for trial in self._trials((optuna.trial.TrialState.COMPLETE,)):
            if trial.user_attrs.get("candidate") == key and trial.value is not None:
                return float(trial.value), float(trial.user_attrs.get("violation", 0.0))
        return None

    def tell(self, proposal: Proposal, score: Score) -> None:
        optuna = _optuna()
        key = proposal.candidate.key
        self._waiting = [p for p in self._waiting if p != proposal]
        if proposal.rung > 0:
            return  # a confirmation: its windows pool into the candidate's score; the study keeps the first
        number = self._open.pop(key, None)
        if number is None:
            return
        frozen = next(t for t in self.study.get_trials(deepcopy=False) if t.number == number)
        trial = optuna.trial.Trial(self.study, frozen._trial_id)
        violation = score.violation if not score.feasible else 0.0
        trial.set_user_attr("violation", violation)
        if hasattr(trial, "set_constraint"):  # Optuna 5: constraints on the trial (constraints_func before)
            trial.set_constraint("violation", violation)
        if score.value is None:
            # A failed measurement still spent its restart: the candidate stays counted (``measured``).
            self.study.tell(number, state=optuna.trial.TrialState.FAIL)
            return
        self.study.tell(number, score.gain())
