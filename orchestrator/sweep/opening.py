"""Opening a run: a new run directory (reusing an earlier run's baselines where nothing that matters changed),
or the one ``--resume`` names, and what it already holds, read once.

    opened = open_run(experiment, plan, options)
    opened.store     the run directory, state ``running``
    opened.state     a ResumeState: the last record of every point, attempts, the points not to run again
    opened.resumed   whether it continues an earlier run
    opened.notices   what to tell the user (baselines reused, and why each other baseline is deployed)
    opened.resolved  the experiment resolved, once: stored in a new run, compared by a resume and by a reuse
                     of baselines, the hosts' identities the loop names

The run is locked (orchestrator/runs/runlock.py) before anything in it is written: a new one as it is made, a
resumed one before its records are read, so a second controller is refused with the run as it was. The caller
gives the lock back (``store.release()``) when the run ends.

A new run reads nothing of its own directory (it is empty; reused baselines are added to its state as they
are copied in); a resumed run reads ``records.jsonl`` and ``superseded.jsonl`` once
(:func:`orchestrator.sweep.resume.resume_run`), checks them against the experiment, and the loop continues from
that state. Which run ``--resume latest`` means, and when an edited experiment is refused, is
:mod:`orchestrator.sweep.resume`'s; which baselines are reused, :mod:`orchestrator.sweep.baselines`'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.runs.identity import experiment_file, host_identities, resolved_experiment
from orchestrator.runs.store import ResumeState, RunStore
from orchestrator.sweep.baselines import adopt_reused, baselines_source, reuse_baselines
from orchestrator.sweep.resume import resume_run

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Plan

__all__ = ["OpenOptions", "OpenedRun", "open_run"]


@dataclass(frozen=True)
class OpenOptions:
    """How to open a run (the sweep's options that concern it)."""

    results_root: Path = Path("results")
    #: A run directory, or ``latest``, to continue; None for a new run.
    resume: str | None = None
    retry_failed: bool = False
    #: With ``resume``: accept an edited experiment, measuring its changed and new points in the run.
    redo_changed: bool = False
    #: Where a new run takes its baselines from (``--baselines-from``; else the experiment's ``baselines_from``).
    baselines_from: str | None = None


@dataclass
class OpenedRun:
    """An open run directory and what it holds (see the module docstring)."""

    store: RunStore
    state: ResumeState
    resumed: bool
    notices: list[str] = field(default_factory=list)
    #: The experiment resolved (``runs.identity.resolved_experiment``), once for the whole sweep: what the run
    #: stores, what a resume and a reuse of baselines compare, the hosts' identities the loop names.
    resolved: dict[str, Any] = field(default_factory=dict)


def open_run(experiment: Experiment, plan: Plan, options: OpenOptions) -> OpenedRun:
    """A new run directory, or the one ``options.resume`` names: ``latest`` is the newest run of this
    experiment file on these hosts; an edited experiment is refused with what changed unless
    ``options.redo_changed`` (:mod:`orchestrator.sweep.resume`). A new run copies in the baselines it can reuse."""
    resolved = resolved_experiment(experiment)
    if options.resume is not None:
        store, _check, state = resume_run(
            experiment,
            plan,
            options.resume,
            options.results_root,
            redo_changed=options.redo_changed,
            retry_failed=options.retry_failed,
            resolved=resolved,
        )
        try:
            store.set_state("running")
        except BaseException:
            store.release()
            raise
        return OpenedRun(store, state, resumed=True, resolved=resolved)
    store = RunStore.create(
        options.results_root,
        experiment.name,
        resolved,
        plan.to_json_dict(),
        experiment_file=experiment_file(experiment),
        hosts=host_identities(resolved),
        kind="search" if experiment.search is not None else "sweep",
    )
    state = ResumeState.empty(retry_failed=options.retry_failed)
    try:
        notices = _reuse_baselines(experiment, plan, store, state, options, resolved)
    except BaseException:
        store.release()
        raise
    return OpenedRun(store, state, resumed=False, notices=notices, resolved=resolved)


def _reuse_baselines(
    experiment: Experiment,
    plan: Plan,
    store: RunStore,
    state: ResumeState,
    options: OpenOptions,
    resolved: dict[str, Any],
) -> list[str]:
    """Copy baseline records from an earlier run into this one where nothing that matters changed.

    The adopted records are final points, so their deployments are skipped like resumed ones (a restart saved
    per baseline); every baseline that is not reused says why.
    """
    source = baselines_source(experiment, options.baselines_from, options.results_root)
    if source is None:
        return []
    reuse = reuse_baselines(experiment, plan, source, resolved=resolved)
    adopted = adopt_reused(store, reuse.records, pooled=len(experiment.host_specs()) > 1)
    for record in adopted:
        state.add(record)
    store.event("baselines_reused", source=str(source), points=len(adopted), reasons=reuse.reasons)
    notices = [f"reused {len(adopted)} baseline point(s) from {source}"] if adopted else []
    return notices + list(reuse.reasons)
