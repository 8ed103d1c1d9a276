"""The sweep loop: for each deployment, a running server from the launcher, then every pending load point
measured in its exact window and stored, then the next; every slot restored on the way out.

    opened = open_run(experiment, plan, options)             a new or resumed run directory, read once
    launcher = launcher_for(experiment, ...)                  where deployments run, and how many at once
    one worker per slot (a thread each when there are several):
        slot.open()
        for deployment in schedule.deployments_for(slot):     baselines of its target first, then shared ones
            server = slot.launch(deployment)                  apply -> wait until healthy
            warm up -> for each pending load point:
                PointMeasurer.measure(server, point)          window -> load -> window -> parse -> Record
                append (fsync) -> next
            server.release()
        slot.close()                                          restore, on every way out

Failures are data: a deployment that never becomes healthy gives a failed record for each of its points with
the log lines that explain it; a server that dies mid-point fails that point and is launched again once; the
sweep goes on, unless going on only wastes the hosts (the experiment's ``failure_policy``,
:mod:`orchestrator.sweep.policy`): a baseline that cannot start, or ``max_consecutive_failed_deployments``
deployments in a row on one target that never became healthy, stop the sweep at the next deployment or point
boundary; every slot is restored and the run is ``stopped`` with its reason. A stop request (Ctrl-C,
SIGTERM) ends the load promptly, restores every slot and marks the run ``interrupted``. A run that reached
the end of its plan is ``done``, or ``failed`` when none of its points succeeded.

The parts, each its own module: opening a run (:mod:`orchestrator.sweep.opening`), the order of deployments and
what remains (:mod:`orchestrator.sweep.schedule`), the failure policy (:mod:`orchestrator.sweep.policy`), measuring one
point (:mod:`orchestrator.sweep.measure`), where a deployment runs (:mod:`orchestrator.launchers`), and the way
into and out of a run shared with playbooks (:mod:`orchestrator.sweep.frame`). This module holds the loop: the
workers, and the state they share.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import (
    HostError,
    HostLockedError,
    Interrupted,
    ServiceError,
    SpecsweepError,
    StartFailed,
    StoreError,
)
from orchestrator.experiment.schema import Experiment
from orchestrator.launchers import Launcher, RunningServer, Slot, launcher_for
from orchestrator.plan.deployments import (
    Deployment,
    LoadPoint,
    Plan,
    build_plan,
    probe_seconds,
    request_alone_seconds,
)
from orchestrator.runs.identity import host_identities, resolved_experiment
from orchestrator.runs.store import Record, discard_run, utc_now_iso
from orchestrator.search.driver import search_plan, uses_search
from orchestrator.sweep import machineload
from orchestrator.sweep import slots as gpu_slots
from orchestrator.sweep.events import (
    DeploymentFailed,
    DeploymentReady,
    DeploymentStarted,
    HealthProgress,
    HostRestored,
    LoadProgress,
    Notice,
    Observer,
    PhaseProgress,
    PointStarted,
    SweepEvent,
    SweepStarted,
)
from orchestrator.sweep.frame import RunEnd, RunFrame, StopSignal
from orchestrator.sweep.measure import Measured, PointMeasurer, window_restart
from orchestrator.sweep.opening import OpenedRun, open_run
from orchestrator.sweep.overlap import OverlapWatch, merged
from orchestrator.sweep.remeasure import REMEASURED, configuration, configuration_changed, first_of_two
from orchestrator.sweep.state import SweepOptions, SweepState

__all__ = [
    "REMEASURED",
    "SlotWorker",
    "StopSignal",
    "SweepOptions",
    "SweepResult",
    "SweepState",
    "resolved_experiment",
    "run_sweep",
]


@dataclass
class SweepResult:
    run_dir: Path
    state: str
    records: list[Record] = field(default_factory=list)
    restore_errors: list[str] = field(default_factory=list)
    #: Why the failure policy stopped the sweep (state ``stopped``).
    stop_reason: str | None = None
    #: The run's planned points by the status of their last record: ``planned``, ``ok``, ``failed``.
    points: dict[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        """Points whose last record of this run failed (a point measured again counts by its last record)."""
        last = {r.key: r for r in self.records}
        return sum(1 for r in last.values() if r.status == "failed")


class SlotWorker:
    """Drives one slot: the deployments the schedule gives it, one at a time.

    Playbooks reuse it step by step: ``connect()``, ``deploy(deployment, points, attempt)``,
    ``measure_point(deployment, point)`` (appends a Record and returns whether the server died),
    ``fail_point(...)``, ``restore()``.
    """

    def __init__(self, sweep: SweepState, slot: Slot) -> None:
        self.sweep = sweep
        self.slot = slot
        self.name = slot.name
        self.server: RunningServer | None = None
        self.last_start_failure = ""
        self.engine_info: dict[str, Any] | None = None  # what the server said about itself (engine_info.py)

    # -- plumbing ---------------------------------------------------------------------------------

    def emit(self, event: SweepEvent) -> None:
        self.sweep.emit(event)

    def connect(self) -> None:
        def recovered(what: str) -> None:
            self.emit(Notice(host=self.name, message=f"restored what an earlier run left: {what}"))
            self.sweep.store.event("recovered", host=self.name, detail=what)

        self.slot.open(recovered)

    def restore(self) -> str | None:
        self.server = None
        try:
            restored = self.slot.close()
        except SpecsweepError as exc:
            with contextlib.suppress(StoreError):
                self.sweep.store.event("restore_failed", host=self.name, error=str(exc))
            return f"{self.name}: restore failed: {exc}"
        if restored:
            # The host is restored whether or not the run directory can still say so (a full disk).
            with contextlib.suppress(StoreError):
                self.sweep.store.event("restore", host=self.name)
            self.emit(HostRestored(host=self.name))
        return None

    def release(self) -> None:
        """End the current deployment's server (its own restore; nothing for a host's)."""
        server, self.server = self.server, None
        if server is not None:
            server.release()

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> None:
        for deployment in self.sweep.deployments_for(self):
            if self.sweep.stop or self.sweep.halted:
                break
            self.run_deployment(deployment)

    def run_deployment(self, deployment: Deployment) -> None:
        pending = self.sweep.pending_points(self.name, deployment)
        # A resumed run whose deployment measured all its points but was stopped in its probe asks it again.
        if not pending and not self.sweep.probe_missing(self.name, deployment):
            self.sweep.eta.load_skipped()
            return
        attempt = 1
        while not self.sweep.stop:
            if not self.deploy(deployment, pending, attempt):
                if not self.sweep.stop:
                    self.sweep.start_failed(self.name, deployment, self.last_start_failure)
                return
            self.sweep.start_succeeded(self.name)
            pending = self.measure(deployment, pending)
            if pending and attempt <= self.sweep.options.redeploy_limit and not self.sweep.stop:
                attempt += 1
                self.emit(Notice(host=self.name, message=f"{deployment.label}: server died; re-applying once"))
                continue
            break
        for point in pending:  # the server died again: what is left fails with the evidence
            self.fail_point(deployment, point, "server_died", "the server is not running", self.evidence())
        if not pending and self.server is not None and not self.sweep.halted:
            # The probe comes after the deployment's points, on the server that served them (issue 59): the first
            # point is measured a whole probe sooner (on a slow engine, minutes: the AR baseline's answers alone
            # twice and batched), and the probe's answers to the workload's first prompts never reach the
            # points' drafter corpus (orchestrator/sweep/corpus.py). Its requests, and so its verdict, are the same.
            self.lossless_probe(deployment, self.server)
        self.release()

    def deploy(self, deployment: Deployment, pending: list[LoadPoint], attempt: int) -> bool:
        """Launch ``deployment`` on the slot and warm it up; False (its pending points failed with the
        evidence, unless stopped) when it could not be applied or never became healthy."""
        sweep = self.sweep
        index, total = sweep.schedule.position(deployment)
        self.emit(
            DeploymentStarted(
                host=self.name,
                deployment_id=deployment.id,
                label=deployment.label,
                index=index,
                total=total,
                attempt=attempt,
            )
        )
        sweep.store.event("deploy", host=self.name, deployment=deployment.id, attempt=attempt)
        self.release()

        def progress(elapsed: float, timeout: float, last_line: str) -> None:
            self.emit(
                HealthProgress(
                    host=self.name, deployment_id=deployment.id, elapsed=elapsed, timeout=timeout, last_line=last_line
                )
            )

        started = time.monotonic()
        try:
            server = self.slot.launch(deployment, progress=progress, stop=sweep.stop.requested)
        except StartFailed as exc:
            sweep.eta.load_observed(time.monotonic() - started)
            sweep.store.event("start_failed", host=self.name, deployment=deployment.id, reason=exc.reason)
            if not sweep.stop:
                self.deployment_failed(deployment, pending, f"start_{exc.reason}", str(exc), list(exc.evidence))
            return False
        except (ServiceError, HostError) as exc:
            sweep.store.event("deploy_failed", host=self.name, deployment=deployment.id, error=str(exc))
            if not sweep.stop:
                self.deployment_failed(deployment, pending, "deploy_failed", str(exc), self.evidence())
            return False
        self.server = server
        load_seconds = time.monotonic() - started
        sweep.eta.load_observed(load_seconds)
        sweep.store.event("healthy", host=self.name, deployment=deployment.id, seconds=round(load_seconds, 3))
        self.engine_info = sweep.measurer.engine_info(server.url)
        self.note_provenance(deployment, server)
        self.emit(
            DeploymentReady(
                host=self.name, deployment_id=deployment.id, label=deployment.label, load_seconds=load_seconds
            )
        )
        self.warm_up(deployment, server)
        return True

    def note_provenance(self, deployment: Deployment, server: RunningServer) -> None:
        """What runs on the host, read back, and (once per target) its GPUs, into ``provenance.json``."""
        from orchestrator.hosts.telemetry import gpu_facts
        from orchestrator.runs.provenance import running_command

        log = self.sweep.provenance
        host = server.host
        if host is not None and not log.knows_host(self.name):
            log.host(self.name, gpu_facts(host))
        service = server.service
        running = running_command(service) if service is not None else {"note": "no service to read back"}
        info = self.engine_info or {}
        log.deployment(
            deployment.id,
            {
                "label": deployment.label,
                "host": self.name,
                "restart": deployment.restart,
                "engine": self.sweep.experiment.engine,
                "engine_version": info.get("version"),
                "engine_info": info or None,
                "command_planned": deployment.command,
                "running": running,
            },
        )

    def lossless_probe(self, deployment: Deployment, server: RunningServer) -> None:
        """The lossless check's answers of this deployment (``orchestrator/sweep/lossless.py``), kept in
        ``lossless/<deployment id>.jsonl``; the autoregressive baseline answers twice alone, then batched, with
        each token's likeliest alternatives."""
        sweep = self.sweep
        role = sweep.lossless_role(deployment)
        if role is None or sweep.stop:
            return
        from orchestrator.analysis.lossless import LOSSLESS_DIR
        from orchestrator.sweep.lossless import TOP_LOGPROBS

        # the baseline's answers carry each token's likeliest alternatives: the check tells near ties by them
        runs, batched, logprobs = (2, sweep.plan, TOP_LOGPROBS) if role == "ar" else (1, None, 0)
        exp = sweep.experiment
        # The answers alone time the engine against the plan's pace (the ETA's speed, orchestrator/plan/eta.py).
        alone = runs * exp.lossless.prompts
        each = request_alone_seconds(exp, deployment, exp.lossless.max_tokens or exp.load.max_tokens)
        sweep.eta.phase_started(probe_seconds(exp, deployment))
        timed = [0]

        def progress(done: int, total: int) -> None:
            if timed[0] < min(done, alone):
                sweep.eta.requests_done(min(done, alone) - timed[0], each)
                timed[0] = min(done, alone)
            self.phase(deployment, "lossless probe", done, total)

        try:
            answers = sweep.measurer.lossless_probe(
                server.url,
                runs=runs,
                batched=batched,
                stop=sweep.stop.requested,
                logprobs=logprobs,
                progress=progress,
            )
        finally:
            sweep.eta.phase_ended()
        if not answers or sweep.stop:  # cut short: the next deployment of it (a resume) asks it all again
            return
        name = sweep.store.write_lines(
            LOSSLESS_DIR,
            deployment.id,
            [
                a.to_dict() | {"deployment_id": deployment.id, "label": deployment.label, "host": self.name}
                for a in answers
            ],
            host=self.name if sweep.pooled else None,
        )
        errors = sum(1 for a in answers if a.error)
        sweep.store.event(
            "lossless_probe", host=self.name, deployment=deployment.id, file=name, answers=len(answers), errors=errors
        )

    def deployment_failed(
        self, deployment: Deployment, pending: list[LoadPoint], kind: str, reason: str, evidence: list[str]
    ) -> None:
        """A deployment that never served: each of its pending points becomes a failed record with the evidence."""
        self.last_start_failure = reason
        self.emit(
            DeploymentFailed(
                host=self.name,
                deployment_id=deployment.id,
                label=deployment.label,
                reason=reason,
                evidence=tuple(evidence[-20:]),
            )
        )
        for point in pending:
            self.fail_point(deployment, point, kind, reason, evidence)

    def phase(self, deployment: Deployment | None, phase: str, done: int, total: int | None) -> None:
        """Say how far a phase that is not a point is (:class:`PhaseProgress`), with the sweep's ETA."""
        self.emit(
            PhaseProgress(
                host=self.name,
                deployment_id=deployment.id if deployment is not None else "",
                phase=phase,
                done=done,
                total=total,
                eta_seconds=self.sweep.eta.remaining(self.sweep.parallel),
            )
        )

    def warm_up(self, deployment: Deployment, server: RunningServer) -> None:
        exp, eta = self.sweep.experiment, self.sweep.eta
        warmup = exp.load.warmup
        if warmup > 0 and not self.sweep.stop:
            self.phase(None, "warm-up", 0, warmup)
        # Its requests, one at a time, time the engine against the plan's pace (orchestrator/plan/eta.py); its
        # own planned time is in the first point's estimate, so the phase adds none.
        each, timed = request_alone_seconds(exp, deployment, exp.load.max_tokens), [0]
        eta.phase_started(0.0)

        def progress(report: Any) -> None:
            if report.phase in ("load", "done") and report.done:
                if report.done > timed[0] and not report.errors:
                    eta.requests_done(report.done - timed[0], each)
                timed[0] = max(timed[0], report.done)
                self.phase(None, "warm-up", report.done, warmup)

        try:
            client = self.sweep.measurer.warm_up(server.url, self.sweep.stop.requested, progress)
        finally:
            eta.phase_ended()
        if client is not None:
            warmup = self.sweep.experiment.load.warmup
            self.sweep.store.event("warmup", host=self.name, requests=warmup, errors=client.get("errors"))

    def evidence(self, lines: int = 40) -> list[str]:
        """The server log's last lines (the running server's, else the slot's)."""
        if self.server is not None:
            return self.server.evidence(lines)
        return self.slot.evidence(lines)

    def measure(self, deployment: Deployment, pending: list[LoadPoint]) -> list[LoadPoint]:
        """Measure pending points in order; return the points left when the server died."""
        for position, point in enumerate(pending):
            if self.sweep.stop or self.sweep.halted:
                return []
            died = self.measure_point(deployment, point)
            if died:
                return pending[position + 1 :]
        return []

    def measure_point(self, deployment: Deployment, point: LoadPoint) -> bool:
        """Measure ``point`` on the running server and store its record; whether the server died.

        A window the server restarted in (systemd restarted it mid-point: :func:`window_restart`) is measured
        again, once: its record is stored first, ``failed`` with error kind ``window_restart`` saying why (its
        figures only those of the part after the restart, labelled), then, once the server serves again (and
        after re-applying the deployment when the restarted server reports another version or settings),
        warmed up, the point is measured anew; a Notice and the ``remeasure`` event say so.
        """
        measured, t0 = self._measure(deployment, point)
        record = measured.record
        why = None if measured.server_died or record.status == "skipped" else window_restart(record.server)
        if why is None:
            return self._keep(measured, point, t0)
        died = self._restarted_in_window(deployment, point, record, why)
        if died is not None:
            return died
        measured, t0 = self._measure(deployment, point)
        return self._keep(measured, point, t0)

    def _measure(self, deployment: Deployment, point: LoadPoint) -> tuple[Measured, float]:
        sweep, store = self.sweep, self.sweep.store
        server = self.server
        if server is None:  # pragma: no cover - callers measure only after a successful deploy
            raise ServiceError(f"{self.name}: no server is running for {deployment.label}")
        attempt = sweep.next_attempt(self.name, point.id)
        self.emit(
            PointStarted(
                host=self.name,
                deployment_id=deployment.id,
                point_id=point.id,
                label=point.label,
                requests=point.requests,
            )
        )
        t0 = time.monotonic()
        wall_t0 = time.time()
        beside = sweep.overlap.look() if sweep.overlap is not None else []
        machine_at_start = machineload.sample()

        def progress(report: Any) -> None:
            if report.phase == "load":
                self.emit(
                    LoadProgress(
                        host=self.name,
                        point_id=point.id,
                        done=report.done,
                        total=report.total,
                        live_tok_s=report.live_tok_s,
                    )
                )

        def write_window(text: str) -> str | None:
            return store.write_window(point.id, text, host=self.name if sweep.pooled else None, attempt=attempt)

        def write_requests(rows: list[dict[str, Any]]) -> str | None:
            host = self.name if sweep.pooled else None
            return store.write_lines("requests", point.id, rows, host=host, attempt=attempt)

        measured = sweep.measurer.measure(
            server,
            deployment,
            point,
            run_id=store.run_id,
            host=self.name,
            attempt=attempt,
            stop=sweep.stop.requested,
            write_window=write_window,
            engine_info=self.engine_info,
            progress=progress,
            write_requests=write_requests,
        )
        machine = machineload.machine_load(machine_at_start, machineload.sample())
        measured.record = measured.record.model_copy(update={"machine": machine})
        busy = machineload.high_load(machine, sweep.experiment.checks.machine_load)
        if busy is not None and not sweep.said_busy:  # once a run: the finding names every such point
            sweep.said_busy = True
            self.emit(Notice(host=self.name, message=busy, level="warning"))
        placement = server.placement
        if placement:  # where a scheduler ran it: job, node, node type, GPUs (compare within a type)
            measured.record = measured.record.model_copy(update={"placement": dict(placement)})
        if sweep.overlap is not None:  # another sweep on this machine at any time in the point's window
            overlapped = merged(beside, sweep.overlap.between(wall_t0, time.time()))
            if overlapped:
                measured.record = measured.record.model_copy(update={"overlapped": overlapped})
        return measured, t0

    def _keep(self, measured: Measured, point: LoadPoint, t0: float) -> bool:
        record = measured.record
        if record.status != "skipped":
            self.sweep.store_record(record)
            self.sweep.eta.point_observed(point.estimated_seconds, time.monotonic() - t0)
        self.sweep.finished(record, point)
        return measured.server_died

    def _restarted_in_window(self, deployment: Deployment, point: LoadPoint, record: Record, why: str) -> bool | None:
        """Keep ``record`` as the point's first, re-measured one and make the server ready to measure it again:
        None when it is, else what :meth:`measure_point` returns (the server is gone, or the sweep stops)."""
        sweep = self.sweep
        first = first_of_two(record, why)
        sweep.store_record(first)
        sweep.kept(first)
        sweep.store.event(
            "remeasure", host=self.name, deployment=deployment.id, point=point.id, attempt=record.attempt, reason=why
        )
        self.emit(
            Notice(
                host=self.name,
                message=f"{deployment.label} {point.label}: the server restarted inside the point's window; its "
                "record is kept as failed (window_restart) and the point is measured again once",
                level="warning",
            )
        )
        server = self.server
        if server is None or sweep.stop:  # stopping: the first record stays the point's (failed)
            return False
        timeout = float(sweep.experiment.server.ready_timeout)
        if not sweep.measurer.wait_serving(server.url, sweep.stop.requested, timeout=timeout):
            if sweep.stop:
                return False  # the first record stays the point's (failed: --resume --retry-failed measures it)
            self.fail_point(
                deployment,
                point,
                "server_died",
                f"the server restarted inside the point's window and did not serve again within {timeout:.0f} s",
                self.evidence(),
            )
            return True
        info = sweep.measurer.engine_info(server.url)
        if configuration_changed(self.engine_info, info):
            self.emit(
                Notice(
                    host=self.name,
                    message=f"{deployment.label}: the restarted server reports another configuration "
                    f"({configuration(info)}); re-applying the deployment before measuring {point.label} again",
                    level="warning",
                )
            )
            if not self.deploy(deployment, [point], 2):
                return True
        else:
            self.warm_up(deployment, server)
        return None

    def fail_point(
        self, deployment: Deployment, point: LoadPoint, kind: str, message: str, evidence: list[str]
    ) -> None:
        attempt = self.sweep.next_attempt(self.name, point.id)
        record = self.sweep.make_record(
            self.name,
            deployment,
            point,
            "failed",
            utc_now_iso(),
            error={"kind": kind, "message": message, "evidence": evidence[-60:]},
            attempt=attempt,
        )
        record = gpu_slots.with_failure_placement(record, self.slot)  # a GPU slot's records name it, failed ones too
        self.sweep.store_record(record)
        self.sweep.eta.point_observed(point.estimated_seconds, 0.0)
        self.sweep.finished(record, point)


def _named(error: SpecsweepError, run_dir: Path) -> SpecsweepError:
    """Errors about a host, a service or the store name the run directory; the others say enough."""
    if type(error) in (HostError, ServiceError, StoreError):
        return type(error)(f"{error} (run directory: {run_dir}; hosts restored)")
    return error


def run_sweep(
    experiment: Experiment,
    options: SweepOptions | None = None,
    *,
    observer: Observer | None = None,
    stop: StopSignal | None = None,
    launcher: Launcher | None = None,
    measurer: PointMeasurer | None = None,
) -> SweepResult:
    """Run (or resume) one experiment end to end; every slot is restored on every way out.

    ``launcher`` defaults to the experiment's own (:func:`orchestrator.launchers.launcher_for`);
    ``measurer`` to a :class:`~orchestrator.sweep.measure.PointMeasurer` with the real load generator.
    """
    options = options or SweepOptions()
    # Not `stop or ...`: a StopSignal is falsy until requested, and the caller's own must be the one watched.
    stop = stop if stop is not None else StopSignal()
    plan = build_plan(experiment)
    if uses_search(experiment):
        plan = search_plan(experiment, plan)
    if stop:  # a Ctrl-C while the plan was made: no run is made (issue 58, S13); one after this is interrupted
        raise Interrupted("interrupted before the run began: no run directory was made")
    opened = open_run(experiment, plan, options.open_options())
    store = opened.store
    try:
        return _drive(experiment, plan, opened, options, observer, stop, launcher, measurer)
    finally:
        store.release()  # the frame gives the run lock back; this covers a failure before the frame began


def _drive(
    experiment: Experiment,
    plan: Plan,
    opened: OpenedRun,
    options: SweepOptions,
    observer: Observer | None,
    stop: StopSignal,
    launcher: Launcher | None,
    measurer: PointMeasurer | None,
) -> SweepResult:
    """The sweep's body on an open run (:func:`run_sweep`)."""
    store = opened.store
    if launcher is None:  # the experiment's own, by its kind (orchestrator/launchers/registry.py)
        launcher = launcher_for(
            experiment,
            lock_label=f"{experiment.name} {store.run_id}",
            break_lock=options.break_lock,
            run_id=store.run_id,
            plan=plan,
        )
    slots = list(launcher.slots())
    sweep = SweepState(
        experiment,
        plan,
        store,
        options,
        observer,
        stop,
        targets=[slot.name for slot in slots],
        parallel=len(slots),
        resume=opened.state,
        measurer=measurer,
        schedule=gpu_slots.slot_schedule(experiment, launcher, plan, opened.state),
    )
    gpu_slots.slot_policy(sweep, launcher)  # GPU slots: a slot whose GPUs are held retires, the others go on
    sweep.overlap = OverlapWatch(experiment.name, host_identities(opened.resolved), store, sweep.emit)
    sweep.emit(
        SweepStarted(
            run_dir=str(store.path),
            total_points=sweep.points.total,
            pending_points=max(sweep.points.total - sweep.points.done, 0),
            deployments=sweep.schedule.planned_deployments,
            pending_deployments=sweep.schedule.remaining_loads(),
            eta_seconds=sweep.eta.remaining(sweep.parallel),
            resumed=opened.resumed,
        )
    )
    store.event("start", resumed=opened.resumed, hosts=sweep.hosts)
    for message in experiment.warnings:
        sweep.emit(Notice(message=message, level="warning"))
    for message in opened.notices:
        sweep.emit(Notice(message=message))
    sweep.overlap.at_start()
    # A scheduler's launcher keeps only the jobs this run will still use (resume); the others ignore it.
    launcher.expect([d for d in plan.deployments if any(sweep.pending_points(t, d) for t in sweep.hosts)])
    workers = [SlotWorker(sweep, slot) for slot in slots]
    errors: list[BaseException] = []
    restore_errors: list[str] = []

    def work(worker: SlotWorker) -> None:
        try:
            worker.connect()
            if sweep.overlap is not None:  # the host's lock is ours: the other controllers may see this one
                sweep.overlap.register()
            worker.run()
        except BaseException as exc:
            errors.append(exc)
            stop.request()
        finally:
            problem = worker.restore()
            if problem:
                restore_errors.append(problem)

    def body() -> str:
        if len(workers) == 1:
            work(workers[0])
        else:
            threads = [threading.Thread(target=work, args=(w,), name=f"host-{w.name}") for w in workers]
            for thread in threads:
                thread.start()
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
        gpu_slots.note_equivalence(sweep, errors)  # GPU slots: do the slots' baselines agree within noise?
        own_errors = [e for e in errors if not isinstance(e, KeyboardInterrupt)]
        if own_errors:
            raise own_errors[0]
        if stop or errors:
            return "interrupted"
        if sweep.halted:
            return "stopped"
        counts = sweep.plan_points()
        return "failed" if counts["failed"] and not counts["ok"] else "done"

    def closing(end: RunEnd) -> dict[str, Any]:
        return {
            "points": sweep.plan_points(),
            "stop_reason": sweep.halted if end.state == "stopped" else None,
        }

    frame = RunFrame(store, stop)
    try:
        end = frame.run(body, restore=lambda: restore_errors, closing=closing)
    finally:
        sweep.overlap.release()
    if isinstance(end.error, HostLockedError) and not opened.resumed and not sweep.records and not restore_errors:
        # Refused before it measured anything: the new run directory holds nothing to keep, and left behind
        # it would be what `--resume latest` picks next.
        discard_run(store.path)
        raise end.error
    frame.raise_for(
        end,
        named=lambda error: _named(error, store.path),
        interrupted=f"interrupted; hosts restored; resume with {store.resume_command}",
    )
    return SweepResult(
        run_dir=store.path,
        state=end.state,
        records=sweep.records,
        restore_errors=restore_errors,
        stop_reason=sweep.halted if end.state == "stopped" else None,
        points=sweep.plan_points(),
    )
