"""Running a playbook: its steps in order on one host, a run directory like a sweep's, the host restored on
every way out, and a verdict per expectation.

Deploy and load steps reuse the sweep's machinery (``SweepState`` and ``SlotWorker`` from
``orchestrator.sweep.runner``, on the experiment's launcher): the same health waiting, warm-up, exact journal
windows and records; and the same way into and out of a run (``orchestrator.sweep.frame.RunFrame``). A deployment
that never becomes healthy, or a server that dies, gives failed records, and every expectation on them fails
with the evidence; the remaining steps still run. The host is reached lazily: a playbook of only ``doctor``
and ``smoke`` steps never locks or changes it.

The run directory (``results/<playbook>/<run-id>/``) holds what a sweep's holds (``run.json``,
``experiment.yaml``, ``plan.json``, ``records.jsonl``, ``events.jsonl``, ``windows/``) plus ``playbook.json``
(the playbook as run), ``expectations.json`` (every outcome with its numbers, and the measurements) and
``shell/`` (the output of shell steps). ``analyse`` and ``specsweep report`` read it as they read a sweep's.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError, ServiceError, SpecsweepError, StoreError
from orchestrator.experiment.hosts import LocalHostSpec, SSHHostSpec
from orchestrator.experiment.schema import Experiment, load_experiment
from orchestrator.files import write_atomic
from orchestrator.launchers import HostSlot, Slot, launcher_for
from orchestrator.plan.deployments import Deployment, LoadPoint
from orchestrator.playbooks.events import OutcomeReady, PlaybookStarted, StepStarted
from orchestrator.playbooks.expectations import Measurement, Outcome, OutcomeStatus, evaluate
from orchestrator.playbooks.resolve import Program, ResolvedStep, apply_vars, resolve, select_host
from orchestrator.playbooks.schema import (
    BaselinesStep,
    DeployStep,
    DoctorStep,
    ExpectStep,
    LoadStep,
    MeasureStep,
    MetricRef,
    Playbook,
    RestoreStep,
    ShellStep,
    SmokeStep,
    load_playbook,
)
from orchestrator.playbooks.smoke import smoke_test
from orchestrator.runs.identity import experiment_file, host_identities, resolved_experiment
from orchestrator.runs.store import Record, RunStore
from orchestrator.sweep.events import HealthProgress, Observer
from orchestrator.sweep.frame import RunEnd, RunFrame, StopSignal
from orchestrator.sweep.runner import SlotWorker, SweepOptions, SweepState

__all__ = [
    "EXPECTATIONS_FILE",
    "EXPECTATIONS_SCHEMA_VERSION",
    "PlaybookOptions",
    "PlaybookResult",
    "prepare",
    "run_playbook",
]

EXPECTATIONS_FILE = "expectations.json"
EXPECTATIONS_SCHEMA_VERSION = 1

HostSpecT = SSHHostSpec | LocalHostSpec


@dataclass
class PlaybookOptions:
    results_root: Path = Path("results")


@dataclass
class PlaybookResult:
    """What a playbook run produced: its outcomes (in step order), measurements and run directory."""

    run_dir: Path
    playbook: str
    experiment: str
    state: str
    outcomes: list[Outcome] = field(default_factory=list)
    measurements: dict[str, Measurement] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    restore_errors: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.failed]

    @property
    def passed(self) -> bool:
        return not self.failures and self.state == "done"

    def to_json_dict(self) -> dict[str, Any]:
        """The content of ``expectations.json``."""
        counts = {s: sum(1 for o in self.outcomes if o.status == s) for s in ("pass", "fail", "warn", "skip")}
        return {
            "schema_version": EXPECTATIONS_SCHEMA_VERSION,
            "playbook": self.playbook,
            "experiment": self.experiment,
            "state": self.state,
            "passed": self.passed,
            "counts": counts,
            "outcomes": [o.to_dict() for o in self.outcomes],
            "measurements": {name: m.summary() for name, m in self.measurements.items()},
            "restore_errors": list(self.restore_errors),
        }


def prepare(
    playbook_file: str | Path,
    *,
    experiment_file: str | Path | None = None,
    variables: dict[str, str] | None = None,
    host: str | None = None,
) -> Program:
    """Load a playbook and its experiment (``experiment_file`` overrides the playbook's own), apply the
    playbook's ``vars`` and then ``variables`` (``--var``), keep one host, and resolve every step."""
    playbook = load_playbook(playbook_file)
    path = Path(experiment_file) if experiment_file is not None else playbook.experiment_path()
    if path is None:
        raise playbook.error(("experiment",), "this playbook names no experiment: pass one with --experiment FILE")
    experiment = load_experiment(path)
    experiment = apply_vars(experiment, dict(playbook.vars), playbook=playbook)
    experiment = apply_vars(experiment, dict(variables or {}))
    experiment = select_host(experiment, host)
    return resolve(playbook, experiment)


class _Session:
    """The slot as the playbook drives it: taken (locked) on first need, restored on demand."""

    def __init__(self, state: SweepState, slot: Slot, spec: HostSpecT) -> None:
        self.state = state
        self.slot = slot
        self.spec = spec
        self.worker: SlotWorker | None = None
        self.deployment: Deployment | None = None
        self.healthy = False
        self.restore_errors: list[str] = []

    def ensure(self) -> SlotWorker:
        if self.worker is None:
            worker = SlotWorker(self.state, self.slot)
            self.worker = worker
            worker.connect()
        return self.worker

    def restore(self) -> None:
        worker, self.worker = self.worker, None
        self.deployment, self.healthy = None, False
        if worker is not None:
            problem = worker.restore()
            if problem:
                self.restore_errors.append(problem)


class _Run:
    """One execution of a program: the steps' handlers and what they collect."""

    def __init__(self, program: Program, store: RunStore, state: SweepState, stop: StopSignal, slot: Slot) -> None:
        self.program = program
        self.experiment = program.experiment
        self.store = store
        self.state = state
        self.stop = stop
        self.session = _Session(state, slot, program.experiment.host_specs()[0])
        self.outcomes: list[Outcome] = []
        self.measurements: dict[str, Measurement] = {}
        self.last_load: tuple[Deployment, LoadPoint] | None = None

    def emit_outcome(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        self.store.event(
            "outcome", step=outcome.step, title=outcome.title, status=outcome.status, detail=outcome.detail
        )
        self.state.emit(OutcomeReady(host=self.session.spec.display_name, outcome=outcome))

    def record_of(self, point: LoadPoint) -> Record | None:
        return next((r for r in reversed(self.state.records) if r.point_id == point.id), None)

    # -- steps ------------------------------------------------------------------------------------

    def run_step(self, step: ResolvedStep) -> None:
        handlers: dict[type, Callable[[ResolvedStep], None]] = {
            DeployStep: self.deploy,
            LoadStep: self.load,
            MeasureStep: self.measure,
            ExpectStep: self.expect,
            RestoreStep: lambda _s: self.session.restore(),
            BaselinesStep: self.baselines,
            DoctorStep: self.doctor,
            SmokeStep: self.smoke,
            ShellStep: self.shell,
        }
        handlers[type(step.step)](step)

    def _group_points(self, index: int) -> list[LoadPoint]:
        """The points of the load steps that use the deployment applied at step ``index``."""
        points: list[LoadPoint] = []
        for later in self.program.steps[index + 1 :]:
            if later.kind in ("deploy", "restore", "baselines"):
                break
            points.extend(later.points)
        return points

    def _apply(self, deployment: Deployment, points: list[LoadPoint]) -> None:
        worker = self.session.ensure()
        self.session.deployment = deployment
        self.session.healthy = worker.deploy(deployment, points, 1)

    def deploy(self, step: ResolvedStep) -> None:
        assert step.deployment is not None
        self._apply(step.deployment, self._group_points(step.index))

    def _measure_points(self, deployment: Deployment, points: tuple[LoadPoint, ...] | list[LoadPoint]) -> None:
        worker = self.session.ensure()
        for point in points:
            if self.stop:
                return
            if not self.session.healthy:
                if self.record_of(point) is None:  # the server died after the deploy recorded its failures
                    worker.fail_point(deployment, point, "server_died", "the server is not running", worker.evidence())
                continue
            if worker.measure_point(deployment, point):
                self.session.healthy = False

    def load(self, step: ResolvedStep) -> None:
        deployment = self.session.deployment
        assert deployment is not None
        self._measure_points(deployment, step.points)
        self.last_load = (deployment, step.points[-1]) if step.points else None

    def measure(self, step: ResolvedStep) -> None:
        assert isinstance(step.step, MeasureStep) and self.last_load is not None
        deployment, point = self.last_load
        record = self.record_of(point)
        if record is None:  # stopped before the point ran
            return
        self.measurements[step.step.measure] = Measurement(step.step.measure, record, deployment, point)
        self.store.event("measure", name=step.step.measure, point=point.id, status=record.status)

    def baselines(self, step: ResolvedStep) -> None:
        for deployment, points in step.groups:
            if self.stop:
                return
            self._apply(deployment, list(points))
            self._measure_points(deployment, points)

    def expect(self, step: ResolvedStep) -> None:
        assert isinstance(step.step, ExpectStep)
        spec = step.step.expect
        names = spec.of_names + ([spec.to.of] if isinstance(spec.to, MetricRef) else [])
        if any(n not in self.measurements for n in names):
            return  # only when stopped: every name was measured by an earlier step
        outcome = evaluate(
            spec,
            step.index,
            self.measurements,
            records=list(self.state.records),
            experiment=self.experiment,
            deployments={d.id: d for d in self.program.plan.deployments},
            run_path=self.store.path,
        )
        self.emit_outcome(outcome)

    def doctor(self, step: ResolvedStep) -> None:
        from orchestrator.launchers.doctor import check_host

        marks: dict[str, OutcomeStatus] = {"ok": "pass", "warn": "warn", "fail": "fail", "skip": "skip"}
        report = check_host(self.experiment, self.session.spec)
        for check in report.checks:
            self.emit_outcome(Outcome(step.index, "doctor", f"doctor: {check.name}", marks[check.status], check.detail))

    def smoke(self, step: ResolvedStep) -> None:
        assert isinstance(step.step, SmokeStep)
        host = self.session.spec.display_name

        def progress(elapsed: float, timeout: float, last_line: str) -> None:
            self.state.emit(HealthProgress(host=host, elapsed=elapsed, timeout=timeout, last_line=last_line))

        status, detail, evidence = smoke_test(
            self.experiment, self.session.spec, step.step.smoke.requests, self.stop, progress
        )
        self.store.event("smoke", status=status, detail=detail)
        self.emit_outcome(Outcome(step.index, "smoke", step.text, status, detail, None, tuple(evidence)))

    def shell(self, step: ResolvedStep) -> None:
        assert isinstance(step.step, ShellStep)
        spec = step.step.shell
        worker = self.session.ensure()
        host = worker.slot.host if isinstance(worker.slot, HostSlot) else None
        if host is None:
            raise ServiceError(f"{worker.name}: shell steps run on a host, and this launcher's slot has none")
        result = host.run(spec.command, timeout=spec.timeout, idempotent=False)
        name = f"shell/step-{step.index:02d}.log"
        text = f"$ {spec.command}\n# exit {result.exit_code}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
        _write_text(self.store.path / name, text)
        self.store.event("shell", step=step.index, exit_code=result.exit_code, output=name)
        lines = (result.stdout + result.stderr).splitlines()
        status: OutcomeStatus = "pass" if result.exit_code == 0 or not spec.check else "fail"
        detail = f"exit {result.exit_code}; output in {name}"
        self.emit_outcome(Outcome(step.index, "shell", step.text, status, detail, None, tuple(lines[-10:])))


def _write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text, fsync=True)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _with_run_dir(error: SpecsweepError, run_dir: Path) -> SpecsweepError:
    """The same error, its one line naming the run directory (what a user needs to look at next)."""
    if isinstance(error, ConfigError):
        return error
    try:
        named = type(error)(f"{error} (run directory: {run_dir}; host restored)")
    except TypeError:  # an error class with a constructor of its own: keep it as it is
        return error
    named.__dict__.update(error.__dict__)  # host, evidence, reason: what callers read besides the message
    return named


def _playbook_json(program: Program) -> dict[str, Any]:
    playbook: Playbook = program.playbook
    return {
        "schema_version": EXPECTATIONS_SCHEMA_VERSION,
        "playbook": playbook.model_dump(mode="json", exclude_none=True),
        "source": str(playbook.source) if playbook.source else None,
        "experiment_source": str(program.experiment.source) if program.experiment.source else None,
        "steps": [s.text for s in program.steps],
    }


def run_playbook(
    program: Program,
    options: PlaybookOptions | None = None,
    *,
    observer: Observer | None = None,
    stop: StopSignal | None = None,
) -> PlaybookResult:
    """Run every step of ``program``; the host is restored on every way out.

    Returns the result whatever the expectations say (``result.passed``); raises ``Interrupted`` when
    stopped, ``ServiceError`` when the host could not be restored, and the host's own error (with the run
    directory named) when it could not be reached at all. ``expectations.json`` is written in every case.
    """
    options = options or PlaybookOptions()
    stop = stop if stop is not None else StopSignal()
    experiment: Experiment = program.experiment
    resolved = resolved_experiment(experiment)
    # run.json says it is a playbook's run, so `latest`, `ls` and `report` tell it from a sweep
    # (orchestrator.runs.identity.run_kind).
    store = RunStore.create(
        options.results_root,
        program.playbook.name,
        resolved,
        program.plan.to_json_dict(),
        experiment_file=experiment_file(experiment),
        hosts=host_identities(resolved),
        kind="playbook",
    )
    _write_text(store.path / "playbook.json", json.dumps(_playbook_json(program), indent=2) + "\n")
    slot = launcher_for(experiment, lock_label=f"{experiment.name} {store.run_id}").slots()[0]
    state = SweepState(
        experiment,
        program.plan,
        store,
        SweepOptions(results_root=options.results_root),
        observer,
        stop,
        targets=[slot.name],
    )
    run = _Run(program, store, state, stop, slot)
    state.emit(
        PlaybookStarted(
            playbook=program.playbook.name,
            experiment=experiment.name,
            run_dir=str(store.path),
            steps=len(program.steps),
        )
    )
    store.event("start", playbook=program.playbook.name, host=run.session.spec.display_name)

    def body() -> str:
        for step in program.steps:
            if stop:
                break
            state.emit(StepStarted(index=step.index, total=len(program.steps), kind=step.kind, text=step.text))
            store.event("step", index=step.index, step=step.kind, text=step.text)
            run.run_step(step)
        return "interrupted" if stop else "done"

    def restore() -> list[str]:
        run.session.restore()
        return run.session.restore_errors

    results: list[PlaybookResult] = []

    def closing(end: RunEnd) -> dict[str, Any]:
        result = PlaybookResult(
            run_dir=store.path,
            playbook=program.playbook.name,
            experiment=experiment.name,
            state=end.state,
            outcomes=run.outcomes,
            measurements=run.measurements,
            records=list(state.records),
            restore_errors=end.restore_errors,
        )
        results.append(result)
        with contextlib.suppress(StoreError):
            _write_text(store.path / EXPECTATIONS_FILE, json.dumps(result.to_json_dict(), indent=2) + "\n")
        return {}

    frame = RunFrame(store, stop)
    end = frame.run(body, restore=restore, closing=closing)
    frame.raise_for(
        end,
        named=lambda error: _with_run_dir(error, store.path),
        interrupted=f"interrupted; host restored; run directory: {store.path}",
    )
    return results[0]
