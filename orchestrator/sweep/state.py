"""The state the workers of a sweep share (:class:`SweepState`): the plan and its schedule, the failure policy,
the records so far, the points as the answer counts them, the ETA and the provenance log. Split out of
:mod:`orchestrator.sweep.runner`, whose loop drives it."""

from __future__ import annotations

import statistics
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.experiment.schema import Experiment
from orchestrator.plan.deployments import Deployment, LoadPoint, Plan, probe_seconds
from orchestrator.plan.eta import EtaModel, eta_history, planned_start_seconds
from orchestrator.runs.provenance import ProvenanceLog
from orchestrator.runs.store import Record, ResumeState, RunStore
from orchestrator.sweep import slots as gpu_slots
from orchestrator.sweep.events import (
    Notice,
    Observer,
    PhaseProgress,
    PointFinished,
    SweepEvent,
    point_summary,
)
from orchestrator.sweep.frame import StopSignal
from orchestrator.sweep.measure import PointMeasurer, new_record
from orchestrator.sweep.opening import OpenOptions
from orchestrator.sweep.overlap import OverlapWatch
from orchestrator.sweep.pointcount import PointCount, record_planned
from orchestrator.sweep.policy import FailureTracker
from orchestrator.sweep.schedule import Schedule
from orchestrator.sweep.searching import schedule_for

__all__ = ["SweepOptions", "SweepState"]


@dataclass
class SweepOptions:
    results_root: Path = Path("results")
    resume: str | None = None
    retry_failed: bool = False
    redeploy_limit: int = 1
    break_lock: bool = False
    baselines_from: str | None = None
    # With ``resume``: accept an edited experiment, measuring its changed and new points in the run.
    redo_changed: bool = False

    def open_options(self) -> OpenOptions:
        return OpenOptions(
            results_root=self.results_root,
            resume=self.resume,
            retry_failed=self.retry_failed,
            redo_changed=self.redo_changed,
            baselines_from=self.baselines_from,
        )


class SweepState:
    """The state shared by the workers of one sweep (or one playbook run, with its own small plan)."""

    def __init__(
        self,
        experiment: Experiment,
        plan: Plan,
        store: RunStore,
        options: SweepOptions,
        observer: Observer | None,
        stop: StopSignal,
        *,
        targets: Sequence[str],
        parallel: int | None = None,
        resume: ResumeState | None = None,
        measurer: PointMeasurer | None = None,
        schedule: Schedule | None = None,
    ) -> None:
        self.experiment = experiment
        self.plan = plan
        self.store = store
        self.options = options
        self.observer = observer
        self.stop = stop
        self.resume = resume if resume is not None else ResumeState.empty(retry_failed=options.retry_failed)
        # The plan's fixed order, or a search's strategy proposing each next deployment (orchestrator/search).
        self.schedule: Schedule = schedule or schedule_for(experiment, plan, targets, self.resume, store.path)
        #: The target names (the hosts records name), in order.
        self.hosts = list(self.schedule.targets)
        self.pooled = self.schedule.pooled
        #: How many deployments run at once (the launcher's slots).
        self.parallel = parallel if parallel is not None else len(self.hosts)
        self.policy = FailureTracker(experiment.failure_policy)
        self.measurer = measurer or PointMeasurer(experiment)
        self._lock = threading.Lock()
        self.records: list[Record] = []
        self.points_done = 0
        self.eta = EtaModel(
            expected_load_seconds=planned_start_seconds(plan, experiment.server.expected_load_time),
            remaining_loads=self.schedule.remaining_loads(),
            remaining_point_estimates=self.schedule.remaining_point_seconds(),
            # What earlier runs of this experiment taught (eta.py): the first ETA is not the plan's guess.
            history=eta_history(options.results_root, experiment.name, exclude=store.path),
            # The part of a start the engine's speed stretches (the probe), to scale before a deployment ends.
            expected_probe_seconds=statistics.fmean([probe_seconds(experiment, d) for d in plan.deployments] or [0.0]),
        )
        self.total_points = self.schedule.pending_count()
        #: Points as the answer counts them (a configuration at a load, its repeats combined): what the live
        #: progress line counts.
        self.points = PointCount(plan, self.schedule.total_points, pooled=self.pooled)
        self.points.total = record_planned(store.path, self.schedule) or self.points.total  # layout.json
        self.points.add_all(r for key, r in self.resume.latest.items() if key in self.resume.final)
        #: provenance.json: how the run was made, kept up to date as deployments start.
        self.provenance = ProvenanceLog(store, experiment.source)
        self._lossless_ar: str | bool | None = False  # False: not yet known
        #: The other sweeps on this machine (orchestrator/sweep/overlap.py); None in a run that does not watch.
        self.overlap: OverlapWatch | None = None
        if hasattr(self.schedule, "round_started"):  # load.decide: a round's work joins the ETA when it starts
            self.schedule.round_started = self._round_started
        #: Whether the run has said its machine is busy (orchestrator/sweep/machineload.py): once a run.
        self.said_busy = False

    def _round_started(self, number: int, most: int, deployments: list[Deployment]) -> None:
        """A decide round starts: its deployments' starts and points join the ETA, and the console says so."""
        seconds = sum(p.estimated_seconds for d in deployments for p in d.load_points)
        self.eta.add_planned(len(deployments), seconds)
        self.emit(
            PhaseProgress(phase="decide round", done=number, total=most, eta_seconds=self.eta.remaining(self.parallel))
        )

    def lossless_role(self, deployment: Deployment) -> str | None:
        """``ar`` for the autoregressive baseline (it answers the probe twice), ``other`` for a configuration to
        check against it, None when the probe is off or there is no baseline to check against."""
        if not self.experiment.lossless.enabled or self.schedule.extra_round(deployment):
            return None
        if self._lossless_ar is False:
            from orchestrator.analysis.roles import baseline_roles

            self._lossless_ar = baseline_roles(list(self.experiment.baselines)).ar
        if self._lossless_ar is None or self._lossless_ar is True:
            return None
        return "ar" if deployment.variant == self._lossless_ar else "other"

    def probe_missing(self, host: str, deployment: Deployment) -> bool:
        """Whether ``deployment``, whose points this run measured (not reused from another run), still lacks its
        lossless answers: a resumed run stopped in the probe that follows the points (runner.run_deployment)."""
        if self.lossless_role(deployment) is None:
            return False
        from orchestrator.analysis.lossless import LOSSLESS_DIR

        folder = self.store.path / LOSSLESS_DIR
        if any(folder.glob(f"**/{deployment.id}.jsonl")):
            return False
        return any(
            r.deployment_id == deployment.id and r.host == host and not r.baseline_source and r.status != "skipped"
            for r in self.resume.latest.values()
        )

    @property
    def halted(self) -> str | None:
        """Why the failure policy stopped the sweep; set once (workers stop at their next boundary)."""
        return self.policy.halted

    def emit(self, event: SweepEvent) -> None:
        if self.observer is not None:
            self.observer(event)

    def pending_points(self, host: str, deployment: Deployment) -> list[LoadPoint]:
        return self.schedule.pending_points(host, deployment)

    def pending_count(self) -> int:
        return self.schedule.pending_count()

    def deployments_for(self, worker: Any) -> Iterator[Deployment]:
        going, skipped = (lambda: not self.stop and not self.halted), self.eta.load_skipped
        if isinstance(self.schedule, gpu_slots.SlotSchedule):  # GPU slots: asked per slot (its size, its GPUs)
            return self.eta.planned(self.schedule.deployments_for_slot(worker.slot, going=going, skipped=skipped))
        return self.eta.planned(self.schedule.deployments_for(worker.name, going=going, skipped=skipped))

    def start_succeeded(self, host: str) -> None:
        self.policy.succeeded(host)

    def start_failed(self, host: str, deployment: Deployment, reason: str) -> None:
        """The failure policy (:mod:`orchestrator.sweep.policy`): stop the sweep when this failure says so."""
        halted = self.policy.failed(host, deployment, reason)
        if halted is None:
            return
        self.store.event("policy_stop", host=host, deployment=deployment.id, reason=halted)
        self.emit(Notice(host=host, message=f"stopping the sweep: {halted}", level="error"))

    def plan_points(self) -> dict[str, int]:
        """The run's points as the answer counts them (a configuration at a load, its repeats combined):
        ``planned``, and ``ok`` or ``failed`` by their windows' last records (run.json keeps them)."""
        return self.points.by_status(self.resume.latest.values())

    def next_attempt(self, host: str, point_id: str) -> int:
        return self.resume.next_attempt(host, point_id)

    def make_record(
        self, host: str, deployment: Deployment, point: LoadPoint, status: str, started_at: str, **fields: Any
    ) -> Record:
        return new_record(
            self.store.run_id,
            self.experiment.name,
            host,
            deployment,
            point,
            status,  # type: ignore[arg-type]
            started_at,
            **fields,
        )

    def store_record(self, record: Record) -> None:
        """Append ``record`` to the run directory (fsynced) and to the run's state."""
        self.store.append(record)
        self.resume.add(record)

    def kept(self, record: Record) -> None:
        """A record stored for a point that is measured again (not its last: no PointFinished)."""
        with self._lock:
            self.records.append(record)

    def finished(self, record: Record, point: LoadPoint) -> None:
        with self._lock:
            self.records.append(record)
            if record.status != "skipped":
                self.points_done += 1
            done = self.points_done
            self.points.add(record)
            complete = self.points.done
        self.emit(
            PointFinished(
                host=record.host,
                deployment_id=record.deployment_id,
                point_id=record.point_id,
                label=point.label,
                status=record.status,
                summary=point_summary(record, self.experiment.checks.degraded_requests),
                eta_seconds=self.eta.remaining(self.parallel),
                points_done=done,
                points_complete=complete,
            )
        )
