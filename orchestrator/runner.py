"""The sweep loop: deploy, wait, warm up, measure every load point in its exact window, store, restore.

For each deployment of the plan (baselines first; on a pool of hosts every host measures the baselines itself
and then takes the other deployments from a shared queue, one at a time):

    apply -> wait until healthy -> warm up -> for each pending load point:
        window start -> load -> window end -> parse -> Record -> append (fsync) -> next
    -> after the last deployment, or on any way out: restore the host

Failures are data: a deployment that never becomes healthy gives a failed record for each of its points with
the journal lines that explain it; a server that dies mid-point fails that point and is re-applied once; the
sweep goes on, unless going on only wastes the hosts (the experiment's ``failure_policy``): a baseline that
cannot start, or ``max_consecutive_failed_deployments`` deployments in a row on one host that never became
healthy, stop the sweep at the next deployment or point boundary; every host is restored and the run is
``stopped`` with its reason. A stop request (Ctrl-C, SIGTERM) ends the load promptly, restores every host and
marks the run ``interrupted``. A run that reached the end of its plan is ``done``, or ``failed`` when none of
its points succeeded.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from orchestrator.engine_info import read_engine_info
from orchestrator.errors import HostError, Interrupted, ServiceError, SpecsweepError, StartFailed, StoreError
from orchestrator.eta import EtaModel
from orchestrator.events import (
    DeploymentFailed,
    DeploymentReady,
    DeploymentStarted,
    HealthProgress,
    HostRestored,
    LoadProgress,
    Notice,
    Observer,
    PointFinished,
    PointStarted,
    SweepEvent,
    SweepStarted,
)
from orchestrator.experiment import Experiment, LocalHostSpec, SSHHostSpec
from orchestrator.health import wait_until_healthy
from orchestrator.hosts import connect_host
from orchestrator.identity import experiment_file, host_identities, resolved_experiment
from orchestrator.load import LoadSettings, run_load
from orchestrator.load.settings import engine_request_extras
from orchestrator.metrics import compare_sources, parse_window, scrape_delta
from orchestrator.plan import Deployment, LoadPoint, Plan, build_plan
from orchestrator.services import make_service
from orchestrator.store import Record, RunStore, utc_now_iso

__all__ = ["HostWorker", "StopSignal", "SweepOptions", "SweepResult", "SweepState", "open_store", "run_sweep"]

HostSpecT = SSHHostSpec | LocalHostSpec
HEALTH_POLL_SECONDS = 0.5


class StopSignal:
    """Set once to stop at the next safe point; set twice to also skip waiting (the host is still restored)."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.hurry = threading.Event()

    def request(self) -> None:
        if self.requested.is_set():
            self.hurry.set()
        self.requested.set()

    def __bool__(self) -> bool:
        return self.requested.is_set()


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
        return sum(1 for r in self.records if r.status == "failed")


def _point_settings(experiment: Experiment, url: str, point: LoadPoint | None, **overrides: Any) -> LoadSettings:
    load = experiment.load
    settings: dict[str, Any] = {
        "url": url,
        "model": experiment.server.model or "default",
        "api": experiment.server.api,
        "concurrency": point.concurrency if point else 1,
        "rate": point.rate if point else None,
        "max_in_flight": point.max_in_flight if point else None,
        "requests": point.requests if point else None,
        "duration_s": point.duration_s if point else None,
        "warmup": 0,
        "max_tokens": load.max_tokens,
        "temperature": load.temperature,
        "prompts": load.prompts,
        "ignore_eos": load.ignore_eos,
        "seed": load.seed,
        "connect_timeout": load.timeouts.connect,
        "first_token_timeout": load.timeouts.first_token,
        "total_timeout": load.timeouts.total,
        "api_key": experiment.server.api_key_value,
        "stream": load.stream,
        # Ask the engine for its per-response speculative figures where its API offers them (load/settings.py).
        "extra_body": engine_request_extras(experiment.engine, experiment.server.api),
    }
    if experiment.load.prompts and not experiment.load.prompts.startswith(("builtin:", "synthetic:")):
        source = experiment.source
        path = Path(experiment.load.prompts).expanduser()
        if not path.is_absolute() and source is not None:
            settings["prompts"] = str((source.parent / path).resolve())
    settings.update(overrides)
    return LoadSettings(**settings)


def _run_async_load(settings: LoadSettings, stop: StopSignal, progress: Any) -> Any:
    """Run one load in this thread's own event loop, cancelling promptly when a stop is requested."""

    async def main() -> Any:
        stop_event = asyncio.Event()

        async def watch() -> None:
            while not stop.requested.is_set():
                await asyncio.sleep(0.1)
            stop_event.set()

        watcher = asyncio.create_task(watch())
        try:
            return await run_load(settings, progress=progress, stop=stop_event)
        finally:
            watcher.cancel()

    return asyncio.run(main())


_scrape_client: httpx.Client | None = None
_scrape_client_lock = threading.Lock()


def _scrape(url: str, path: str | None, api_key: str | None) -> str | None:
    if not path:
        return None
    status, text = _get(url, path, api_key)
    return text if status == 200 else None


def _get(url: str, path: str, api_key: str | None) -> tuple[int | None, str | None]:
    """``(status, body)`` of one GET on the control plane; ``(None, None)`` when the server did not answer."""
    global _scrape_client
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with _scrape_client_lock:
        # One client for every scrape (httpx's clients are thread-safe): building one costs tens of
        # milliseconds (its TLS context), which httpx.get paid twice per point, and once a second while sampling.
        if _scrape_client is None:
            _scrape_client = httpx.Client(timeout=5.0, trust_env=False)
        client = _scrape_client
    try:
        response = client.get(url + path, headers=headers)
    except httpx.HTTPError:
        return None, None
    return response.status_code, response.text


class _GaugeSampler:
    """Scrapes ``/metrics`` about once a second while a point runs, so gauges are sampled through the window."""

    def __init__(self, url: str, path: str | None, api_key: str | None, interval: float = 1.0) -> None:
        self._args = (url, path, api_key)
        self._interval = interval
        self._done = threading.Event()
        self._texts: list[str] = []
        self._thread = threading.Thread(target=self._run, name="metrics-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self._interval):
            text = _scrape(*self._args)
            if text is not None:
                self._texts.append(text)

    def finish(self) -> list[str]:
        self._done.set()
        self._thread.join(timeout=6.0)
        return list(self._texts)


class HostWorker:
    """Drives one host: its baselines, then deployments from the shared queue.

    Playbooks reuse it step by step: ``connect()``, ``deploy(deployment, points, attempt)``,
    ``measure_point(deployment, point)`` (appends a Record and returns whether the server died),
    ``restore()``.
    """

    def __init__(self, sweep: SweepState, spec: HostSpecT) -> None:
        self.sweep = sweep
        self.spec = spec
        self.name = spec.display_name
        self.url = sweep.experiment.server_url(spec)
        self.host: Any = None
        self.service: Any = None
        self.applied = False
        self.last_start_failure = ""
        self.engine_info: dict[str, Any] | None = None  # what the server said about itself (engine_info.py)

    # -- plumbing ---------------------------------------------------------------------------------

    def emit(self, event: SweepEvent) -> None:
        self.sweep.emit(event)

    def connect(self) -> None:
        exp = self.sweep.experiment
        self.host = connect_host(self.spec)
        service = make_service(exp, self.host)
        service.lock(
            f"{self.sweep.experiment.name} {self.sweep.store.run_id}", break_lock=self.sweep.options.break_lock
        )
        # Only once the lock is ours may restore() touch the service: a run refused by the lock must never
        # undo (stop, reconfigure) what the run holding it applied.
        self.service = service
        leftovers = self.service.recover()
        if leftovers:
            self.emit(Notice(host=self.name, message=f"restored what an earlier run left: {leftovers}"))
            self.sweep.store.event("recovered", host=self.name, detail=str(leftovers))
        self.check_port_free()

    def check_port_free(self) -> None:
        """Refuse to start when something that is not our server already answers at the server URL.

        Otherwise a stray server on the port would pass every health check while ours fails to bind, and
        its numbers would be recorded as ours.
        """
        if self.service.state().running:
            return
        exp = self.sweep.experiment
        api_key = exp.server.api_key_value
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        path = exp.health_paths[0]
        try:
            response = httpx.get(self.url + path, timeout=2.0, headers=headers)
        except httpx.HTTPError:
            return
        raise ServiceError(
            f"{self.name}: {self.url}{path} already answers (HTTP {response.status_code}) although the service is "
            "not running: another process serves that port; stop it or change the port in the experiment"
        )

    def restore(self) -> str | None:
        if self.service is None:
            if self.host is not None:
                with contextlib.suppress(Exception):
                    self.host.close()
            return None
        error: str | None = None
        try:
            self.service.restore()
        except SpecsweepError as exc:
            error = f"{self.name}: restore failed: {exc}"
            with contextlib.suppress(StoreError):
                self.sweep.store.event("restore_failed", host=self.name, error=str(exc))
        else:
            # The host is restored whether or not the run directory can still say so (a full disk).
            with contextlib.suppress(StoreError):
                self.sweep.store.event("restore", host=self.name)
            self.emit(HostRestored(host=self.name))
        finally:
            with contextlib.suppress(SpecsweepError):
                self.service.unlock()
            with contextlib.suppress(Exception):
                self.host.close()
        return error

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> None:
        for deployment in self.sweep.deployments_for(self):
            if self.sweep.stop or self.sweep.halted:
                break
            self.run_deployment(deployment)

    def run_deployment(self, deployment: Deployment) -> None:
        pending = self.sweep.pending_points(self.name, deployment)
        if not pending:
            self.sweep.eta.load_skipped()
            return
        attempt = 1
        while pending and not self.sweep.stop:
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

    def deploy(self, deployment: Deployment, pending: list[LoadPoint], attempt: int) -> bool:
        exp = self.sweep.experiment
        index = self.sweep.plan.deployments.index(deployment) + 1
        self.emit(
            DeploymentStarted(
                host=self.name,
                deployment_id=deployment.id,
                label=deployment.label,
                index=index,
                total=len(self.sweep.plan.deployments),
                attempt=attempt,
            )
        )
        self.sweep.store.event("deploy", host=self.name, deployment=deployment.id, attempt=attempt)
        started = time.monotonic()
        try:
            self.service.apply(deployment)
            self.applied = True

            def progress(elapsed: float, timeout: float, last_line: str) -> None:
                self.emit(
                    HealthProgress(
                        host=self.name,
                        deployment_id=deployment.id,
                        elapsed=elapsed,
                        timeout=timeout,
                        last_line=last_line,
                    )
                )

            wait_until_healthy(
                self.service,
                self.url,
                exp.health_paths,
                exp.server.ready_timeout,
                api_key=exp.server.api_key_value,
                progress=progress,
                stop=self.sweep.stop.requested,
                # Noticing a ready server is the largest orchestration cost of a sweep (every restart pays
                # it): at most half a second between polls keeps ready -> noticed under 1 s, one
                # `systemctl show` and a GET or two per poll.
                poll_interval=HEALTH_POLL_SECONDS,
            )
        except StartFailed as exc:
            self.sweep.eta.load_observed(time.monotonic() - started)
            self.sweep.store.event("start_failed", host=self.name, deployment=deployment.id, reason=exc.reason)
            if not self.sweep.stop:
                self.deployment_failed(deployment, pending, f"start_{exc.reason}", str(exc), list(exc.evidence))
            return False
        except (ServiceError, HostError) as exc:
            self.sweep.store.event("deploy_failed", host=self.name, deployment=deployment.id, error=str(exc))
            if not self.sweep.stop:
                self.deployment_failed(deployment, pending, "deploy_failed", str(exc), self.evidence())
            return False
        load_seconds = time.monotonic() - started
        self.sweep.eta.load_observed(load_seconds)
        self.sweep.store.event("healthy", host=self.name, deployment=deployment.id, seconds=round(load_seconds, 3))
        api_key = exp.server.api_key_value
        self.engine_info = read_engine_info(exp.engine, lambda path: _get(self.url, path, api_key))
        self.emit(
            DeploymentReady(
                host=self.name, deployment_id=deployment.id, label=deployment.label, load_seconds=load_seconds
            )
        )
        self.warm_up()
        return True

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

    def warm_up(self) -> None:
        warmup = self.sweep.experiment.load.warmup
        if warmup <= 0 or self.sweep.stop:
            return
        settings = _point_settings(self.sweep.experiment, self.url, None, concurrency=1, requests=warmup)
        result = _run_async_load(settings, self.sweep.stop, None)
        self.sweep.store.event("warmup", host=self.name, requests=warmup, errors=result.to_dict().get("errors"))

    def evidence(self, lines: int = 40) -> list[str]:
        try:
            return list(self.service.logs_tail(lines))
        except SpecsweepError as exc:
            return [f"(could not read the server log: {exc})"]

    def alive(self) -> bool:
        try:
            return bool(self.service.state().running)
        except SpecsweepError:
            return False

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
        exp = self.sweep.experiment
        store = self.sweep.store
        attempt = self.sweep.next_attempt(self.name, point.id)
        self.emit(
            PointStarted(
                host=self.name,
                deployment_id=deployment.id,
                point_id=point.id,
                label=point.label,
                requests=point.requests,
            )
        )
        started_at = utc_now_iso()
        t0 = time.monotonic()
        api_key = exp.server.api_key_value
        cursor = self.service.journal_cursor()
        before = _scrape(self.url, exp.server.metrics_path, api_key)
        scraped_at = time.monotonic()
        sampler = _GaugeSampler(self.url, exp.server.metrics_path, api_key) if before is not None else None

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

        settings = _point_settings(exp, self.url, point)
        try:
            result = _run_async_load(settings, self.sweep.stop, progress)
        finally:
            during = sampler.finish() if sampler is not None else []
        client = result.to_dict()
        after = _scrape(self.url, exp.server.metrics_path, api_key)
        elapsed = time.monotonic() - scraped_at
        text = self.service.journal_since(cursor)
        window_file = store.write_window(point.id, text, host=self.name if self.sweep.pooled else None, attempt=attempt)
        version = (self.engine_info or {}).get("version")
        window = parse_window(exp.engine, text, [(p.name, p.regex) for p in exp.parsers], cut=True, version=version)
        server = window.to_dict()
        sources: dict[str, Any] = {"journal": window}
        if before is not None and after is not None:
            prom = scrape_delta(before, after, exp.engine, during=during, elapsed_s=elapsed, version=version)
            server["prometheus"] = prom.to_dict()
            sources["prometheus"] = prom
        spec = client.get("spec") or {}
        if any(v is not None for v in spec.values()):
            sources["responses"] = spec
        if client.get("output_tok_s"):
            sources["client"] = {"gen_throughput": client["output_tok_s"]}
        server["sources"] = compare_sources(sources)
        alive = self.alive()
        interrupted = bool(self.sweep.stop) and client.get("partial", False)
        status = "ok"
        error: dict[str, Any] | None = None
        requests = int(client.get("requests") or 0)
        errors = int(client.get("errors") or 0)
        if interrupted:
            status, error = "skipped", {"kind": "interrupted", "message": "stopped by the user mid-point"}
        elif not alive:
            status = "failed"
            error = {
                "kind": "server_died",
                "message": "the server stopped during the point",
                "evidence": self.evidence(),
            }
        elif requests and errors >= requests:
            status = "failed"
            error = {
                "kind": "all_requests_failed",
                "message": f"all {requests} requests failed",
                "evidence": [f"{k}: {v}" for k, v in (client.get("errors_by_kind") or {}).items()],
            }
        record = self.sweep.make_record(
            self.name,
            deployment,
            point,
            status,
            started_at,
            client=client,
            server=server,
            error=error,
            window_file=window_file,
            attempt=attempt,
            engine_info=self.engine_info,
        )
        if status != "skipped":
            store.append(record)
            self.sweep.eta.point_observed(point.estimated_seconds, time.monotonic() - t0)
        self.sweep.finished(record, point)
        return not alive and not interrupted

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
        self.sweep.store.append(record)
        self.sweep.eta.point_observed(point.estimated_seconds, 0.0)
        self.sweep.finished(record, point)


class SweepState:
    """The state shared by the host workers of one sweep (or one playbook run, with its own small plan)."""

    def __init__(
        self,
        experiment: Experiment,
        plan: Plan,
        store: RunStore,
        options: SweepOptions,
        observer: Observer | None,
        stop: StopSignal,
    ) -> None:
        self.experiment = experiment
        self.plan = plan
        self.store = store
        self.options = options
        self.observer = observer
        self.stop = stop
        self.hosts = experiment.host_specs()
        self.pooled = len(self.hosts) > 1
        self._lock = threading.Lock()
        self._final = store.final_point_keys(retry_failed=options.retry_failed)
        self._attempts: dict[tuple[str, str], int] = {}
        #: Why the failure policy stopped the sweep; set once (workers stop at their next boundary).
        self.halted: str | None = None
        self._start_failures: dict[str, int] = {}
        # Superseded records count too: a point measured again never reuses an earlier attempt's window file.
        for record in store.records() + store.superseded_records():
            key = (record.host, record.point_id)
            self._attempts[key] = max(self._attempts.get(key, 0), record.attempt)
        self.records: list[Record] = []
        self.points_done = 0
        self._shared: queue.SimpleQueue[Deployment] = queue.SimpleQueue()
        for deployment in plan.deployments:
            if not deployment.baseline:
                self._shared.put(deployment)
        pending = self.pending_count()
        loads = sum(
            1
            for spec in self.hosts
            for d in plan.deployments
            if (d.baseline or not self.pooled) and self.pending_points(spec.display_name, d)
        )
        if self.pooled:
            loads += sum(
                1
                for d in plan.deployments
                if not d.baseline and any(self.pending_points(s.display_name, d) for s in self.hosts)
            )
        self.eta = EtaModel(
            expected_load_seconds=experiment.server.expected_load_time,
            remaining_loads=loads,
            remaining_point_estimates=sum(
                p.estimated_seconds
                for spec in self.hosts
                for d in plan.deployments
                for p in self.pending_points(spec.display_name, d)
                if d.baseline or not self.pooled
            )
            + (
                sum(
                    p.estimated_seconds
                    for d in plan.deployments
                    if not d.baseline
                    for p in d.load_points
                    if (self.hosts[0].display_name, p.id) not in self._final
                )
                if self.pooled
                else 0.0
            ),
        )
        self.total_points = pending

    def emit(self, event: SweepEvent) -> None:
        if self.observer is not None:
            self.observer(event)

    def pending_points(self, host: str, deployment: Deployment) -> list[LoadPoint]:
        return [p for p in deployment.load_points if (host, p.id) not in self._final]

    def pending_count(self) -> int:
        if not self.pooled:
            return sum(len(self.pending_points(self.hosts[0].display_name, d)) for d in self.plan.deployments)
        baseline = sum(
            len(self.pending_points(s.display_name, d)) for s in self.hosts for d in self.plan.deployments if d.baseline
        )
        # a shared deployment is pending when no host has finished its points
        shared = sum(
            1
            for d in self.plan.deployments
            if not d.baseline
            for p in d.load_points
            if not any((s.display_name, p.id) in self._final for s in self.hosts)
        )
        return baseline + shared

    def deployments_for(self, worker: HostWorker) -> Iterator[Deployment]:
        if not self.pooled:
            yield from self.plan.deployments
            return
        for deployment in self.plan.deployments:
            if deployment.baseline:
                yield deployment
        while not self.stop and not self.halted:
            try:
                deployment = self._shared.get_nowait()
            except queue.Empty:
                return
            # In a pool a shared point counts as done once any host finished it.
            if all(any((s.display_name, p.id) in self._final for s in self.hosts) for p in deployment.load_points):
                self.eta.load_skipped()
                continue
            yield deployment

    def start_succeeded(self, host: str) -> None:
        with self._lock:
            self._start_failures[host] = 0

    def start_failed(self, host: str, deployment: Deployment, reason: str) -> None:
        """The failure policy: a baseline that cannot start, or N deployments in a row on one host that never
        became healthy, stop the sweep (see the module docstring)."""
        policy = self.experiment.failure_policy
        with self._lock:
            count = self._start_failures.get(host, 0) + 1
            self._start_failures[host] = count
            why = None
            if deployment.baseline and policy.stop_on_baseline_failure:
                why = f"the baseline {deployment.label} cannot start on {host}"
            elif 0 < policy.max_consecutive_failed_deployments <= count:
                why = f"{count} deployments in a row could not start on {host}, the last {deployment.label}"
            if why is None or self.halted is not None:
                return
            reason = reason.removeprefix(f"{host}: ")
            self.halted = f"{why}: {reason}" if reason else why
        self.store.event("policy_stop", host=host, deployment=deployment.id, reason=self.halted)
        self.emit(Notice(host=host, message=f"stopping the sweep: {self.halted}", level="error"))

    def plan_points(self) -> dict[str, int]:
        """The run's planned points by the status of their last record (``planned``, ``ok``, ``failed``)."""
        hosts = [h.display_name for h in self.hosts]
        latest = self.store.latest_records()
        planned = ok = failed = 0
        for deployment in self.plan.deployments:
            for point in deployment.load_points:
                records = [latest[(h, point.id)] for h in hosts if (h, point.id) in latest]
                if self.pooled and not deployment.baseline:
                    planned += 1  # a shared point is measured by one host of the pool
                    statuses = {r.status for r in records}
                    ok += "ok" in statuses
                    failed += "ok" not in statuses and "failed" in statuses
                    continue
                planned += len(hosts)
                ok += sum(1 for r in records if r.status == "ok")
                failed += sum(1 for r in records if r.status == "failed")
        return {"planned": planned, "ok": ok, "failed": failed}

    def next_attempt(self, host: str, point_id: str) -> int:
        with self._lock:
            key = (host, point_id)
            self._attempts[key] = self._attempts.get(key, 0) + 1
            return self._attempts[key]

    def make_record(
        self, host: str, deployment: Deployment, point: LoadPoint, status: str, started_at: str, **fields: Any
    ) -> Record:
        return Record(
            run_id=self.store.run_id,
            experiment=self.experiment.name,
            deployment_id=deployment.id,
            point_id=point.id,
            config_hash=deployment.config_hash,
            host=host,
            variant=deployment.variant,
            params=dict(deployment.params),
            aliases=[a.model_dump() for a in deployment.aliases],
            baseline=deployment.baseline,
            mode=point.mode,
            concurrency=point.concurrency,
            rate=point.rate,
            status=status,
            started_at=started_at,
            finished_at=utc_now_iso(),
            **fields,
        )

    def finished(self, record: Record, point: LoadPoint) -> None:
        with self._lock:
            self.records.append(record)
            if record.status != "skipped":
                self._final.add((record.host, record.point_id))
                self.points_done += 1
            done = self.points_done
        self.emit(
            PointFinished(
                host=record.host,
                deployment_id=record.deployment_id,
                point_id=record.point_id,
                label=point.label,
                status=record.status,
                summary=_summary(record),
                eta_seconds=self.eta.remaining(len(self.hosts)),
                points_done=done,
            )
        )


def _summary(record: Record) -> dict[str, Any]:
    client = record.client or {}
    server = record.server or {}
    return {
        "output_tok_s": client.get("output_tok_s"),
        "accept_len": server.get("accept_len"),
        "errors": client.get("errors"),
        "error": (record.error or {}).get("message"),
    }


def open_store(experiment: Experiment, plan: Plan, options: SweepOptions) -> tuple[RunStore, bool]:
    """A new run directory, or the one ``--resume`` names: ``latest`` is the newest run of this experiment file
    on these hosts; an edited experiment is refused with what changed unless ``redo_changed``
    (:mod:`orchestrator.resume`)."""
    from orchestrator.resume import open_for_resume

    resolved = resolved_experiment(experiment)
    if options.resume is None:
        return RunStore.create(
            options.results_root,
            experiment.name,
            resolved,
            plan.to_json_dict(),
            experiment_file=experiment_file(experiment),
            hosts=host_identities(resolved),
        ), False
    store, _check = open_for_resume(
        experiment, plan, options.resume, options.results_root, redo_changed=options.redo_changed
    )
    store.set_state("running")
    return store, True


def _reuse_baselines(experiment: Experiment, plan: Plan, store: RunStore, options: SweepOptions) -> list[str]:
    """Copy baseline records from an earlier run into this one where nothing that matters changed.

    The adopted records are final points, so their deployments are skipped like resumed ones (a restart saved
    per baseline); every baseline that is not reused says why.
    """
    from orchestrator.baselines import adopt_reused, baselines_source, reuse_baselines

    source = baselines_source(experiment, options.baselines_from, options.results_root)
    if source is None:
        return []
    reuse = reuse_baselines(experiment, plan, source)
    adopted = adopt_reused(store, reuse.records, pooled=len(experiment.host_specs()) > 1)
    store.event("baselines_reused", source=str(source), points=len(adopted), reasons=reuse.reasons)
    notices = [f"reused {len(adopted)} baseline point(s) from {source}"] if adopted else []
    return notices + list(reuse.reasons)


def run_sweep(
    experiment: Experiment,
    options: SweepOptions | None = None,
    *,
    observer: Observer | None = None,
    stop: StopSignal | None = None,
) -> SweepResult:
    """Run (or resume) one experiment end to end; the hosts are restored on every way out."""
    options = options or SweepOptions()
    # Not `stop or ...`: a StopSignal is falsy until requested, and the caller's own must be the one watched.
    stop = stop if stop is not None else StopSignal()
    plan = build_plan(experiment)
    store, resumed = open_store(experiment, plan, options)
    reuse_notices = [] if resumed else _reuse_baselines(experiment, plan, store, options)
    sweep = SweepState(experiment, plan, store, options, observer, stop)
    sweep.emit(
        SweepStarted(
            run_dir=str(store.path),
            total_points=plan.load_point_count * (len(sweep.hosts) if sweep.pooled else 1),
            pending_points=sweep.total_points,
            deployments=len(plan.deployments),
            eta_seconds=sweep.eta.remaining(len(sweep.hosts)),
            resumed=resumed,
        )
    )
    store.event("start", resumed=resumed, hosts=[h.display_name for h in sweep.hosts])
    for message in reuse_notices:
        sweep.emit(Notice(message=message))
    workers = [HostWorker(sweep, spec) for spec in sweep.hosts]
    errors: list[BaseException] = []
    restore_errors: list[str] = []

    def work(worker: HostWorker) -> None:
        try:
            worker.connect()
            worker.run()
        except BaseException as exc:
            errors.append(exc)
            stop.request()
        finally:
            problem = worker.restore()
            if problem:
                restore_errors.append(problem)

    state = "failed"
    try:
        if len(workers) == 1:
            work(workers[0])
        else:
            threads = [threading.Thread(target=work, args=(w,), name=f"host-{w.name}") for w in workers]
            for thread in threads:
                thread.start()
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
        own_errors = [e for e in errors if not isinstance(e, KeyboardInterrupt)]
        if own_errors:
            state = "failed"
        elif stop or errors:
            state = "interrupted"
        elif sweep.halted:
            state = "stopped"
        else:
            counts = sweep.plan_points()
            state = "failed" if counts["failed"] and not counts["ok"] else "done"
    except KeyboardInterrupt:
        stop.request()
        state = "interrupted"
        raise
    finally:
        # A full or failing disk must not replace the error that ended the run (often that very disk).
        points: dict[str, int] = {}
        with contextlib.suppress(StoreError):
            points = sweep.plan_points()
        stop_reason = sweep.halted if state == "stopped" else None
        with contextlib.suppress(StoreError):
            store.event("end", state=state, restore_errors=restore_errors, points=points, stop_reason=stop_reason)
        with contextlib.suppress(StoreError):
            store.set_state(state, stop_reason=stop_reason, points=points or None)  # type: ignore[arg-type]
    result = SweepResult(
        run_dir=store.path,
        state=state,
        records=sweep.records,
        restore_errors=restore_errors,
        stop_reason=stop_reason,
        points=points,
    )
    if restore_errors:
        raise ServiceError("; ".join(restore_errors) + f" (run directory: {store.path})")
    first = next((e for e in errors if not isinstance(e, KeyboardInterrupt)), None)
    if first is not None:
        if isinstance(first, SpecsweepError):
            raise (
                type(first)(f"{first} (run directory: {store.path}; hosts restored)")
                if type(first) in (HostError, ServiceError, StoreError)
                else first
            )
        raise first
    if state == "interrupted":
        raise Interrupted(f"interrupted; hosts restored; resume with --resume {store.path}")
    return result
