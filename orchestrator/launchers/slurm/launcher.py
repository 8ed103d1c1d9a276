"""The Slurm launcher: each deployment is one batch job, ``max_jobs`` of them at once.

    launcher: {kind: slurm, login: user@login-node, partition: gpu, gres: "gpu:8", time: "2:00:00",
               max_jobs: 4, shared_dir: ~/specsweep-jobs}
    server:   {url: "http://{node}:30000", via: ssh}

The slots (``max_jobs`` of them) share one target name (``slurm-<partition>``): the baselines are measured
once for all of them and every other deployment by whichever slot is free. The first slot to open does, for
all of them, through one connection to the login node (:class:`~orchestrator.launchers.slurm.jobs.SlurmClient`):
checks that ``sbatch`` runs, takes the experiment's lock (``<shared_dir>/<experiment>.lock``, as a host's
service lock), reads the partition's nodes (a partition of several node types is refused unless
``constraint`` pins one: baselines and what they are compared with run on the same type), and lists the
jobs of this experiment that are still queued or running (by their name, ``squeue -u``): those of this run
that still run exactly what this run would submit (its deployment, configuration hash and batch script hash,
in the job's comment) are kept for ``--resume`` to reattach to; every other one was left by a run that died
(the lock is ours) and is cancelled.

``launch(deployment)``:

    reattach to this run's own job for it, or sbatch --parsable a new batch script    (jobs.render_batch_script)
    PENDING (its reason) ... -> RUNNING on a node                                       pending_timeout: a clear failure
    server.url with {node} -> through an SSH tunnel when server.via is ssh             (hosts/tunnel.py)
    wait_until_healthy on the job's state and the health paths                        the job's output file is the log
    FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, CANCELLED, ... -> StartFailed("job_<state>") with the log's tail

``release()`` cancels the job (the deployment is done); ``close()`` of the last slot cancels every job the
run started (and any other job of the run found by its name, such as one whose ``sbatch`` answer was lost),
waits until squeue no longer lists them, and releases the lock. Nothing is written on the nodes: the job's
output file (``<shared_dir>/<experiment>/<run id>/<deployment>.<job>.log``) is on the shared file system
and stays for post-mortems, as a process service's log does.

Job states are polled for all of the run's jobs at once (one ``squeue`` per ``poll_interval``, ``scontrol``
only for a job that left squeue), so a cluster's controller sees a few commands a second, not one per slot.
Every record of a job carries ``placement``: the job, its node, the node's type and the GPUs it was given.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from orchestrator.errors import HostLockedError, ServiceError, SpecsweepError, StartFailed
from orchestrator.experiment.launcherspecs.slurm import SlurmLauncherSpec
from orchestrator.hosts import connect_host
from orchestrator.hosts.tunnel import Tunnel
from orchestrator.launchers.base import HealthCallback
from orchestrator.launchers.health import wait_for_experiment
from orchestrator.launchers.scheduler import SchedulerLauncher, SchedulerServer
from orchestrator.launchers.slurm.jobs import (
    ENDING,
    BatchScript,
    JobInfo,
    JobLog,
    JobSettings,
    NodeInfo,
    SlurmClient,
    job_prefix,
    render_batch_script,
)
from orchestrator.services.base import Leftover, LogChunk, ServiceState
from orchestrator.services.hoststate import HostLock, lock_is_stale

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.hosts.base import Host
    from orchestrator.plan.deployments import Deployment

__all__ = ["JobWatch", "SlurmJobServer", "SlurmLauncher", "job_settings", "restore_jobs"]

#: How long the last slot's close waits for cancelled jobs to leave squeue (Slurm's KillWait is 30 s by
#: default, then the epilog runs).
CANCEL_WAIT_SECONDS = 120.0
#: How long a job that is being ended may take to say how it ended (Slurm's KillWait is 30 s by default).
ENDING_WAIT_SECONDS = 45.0


def job_settings(experiment: Experiment) -> JobSettings:
    """The sbatch settings of the experiment's Slurm launcher (and the service's working directory)."""
    spec = experiment.launcher
    if not isinstance(spec, SlurmLauncherSpec):
        raise ServiceError("the experiment has no Slurm launcher")
    return JobSettings(
        partition=spec.partition,
        gres=spec.gres,
        time=spec.time,
        account=spec.account,
        qos=spec.qos,
        constraint=spec.constraint,
        extra_args=tuple(spec.extra_args),
        workdir=getattr(experiment.service, "workdir", None),
    )


class JobWatch:
    """The state of the run's jobs, refreshed for all of them at once at most every ``interval`` seconds:
    one ``squeue -j`` of the jobs not known to have ended, then ``scontrol`` for each job that left squeue or
    ended (its exit code, reason, output file)."""

    def __init__(self, client: SlurmClient, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()
        self._jobs: dict[str, JobInfo] = {}
        self._stamp = float("-inf")

    def track(self, info: JobInfo) -> None:
        with self._lock:
            self._jobs[info.job_id] = info

    def tracked(self) -> list[str]:
        with self._lock:
            return list(self._jobs)

    def get(self, job_id: str, *, fresh: bool = False) -> JobInfo:
        """The job's state, at most ``interval`` old (``fresh``: asked now)."""
        with self._lock:
            if fresh or job_id not in self._jobs or self.clock() - self._stamp >= self.interval:
                self._refresh(job_id)
            return self._jobs[job_id]

    def _refresh(self, wanted: str) -> None:
        live = [j for j, info in self._jobs.items() if not info.ended] or [wanted]
        if wanted not in live and wanted not in self._jobs:
            live.append(wanted)
        listed = {info.job_id: info for info in self.client.queue(live)}
        self._stamp = self.clock()
        for job_id in live:
            info = listed.get(job_id)
            if info is None or info.ended:
                detail = self.client.job(job_id)  # left squeue, or just ended: how it ended
                info = detail if info is None or detail.state != "GONE" else info
            elif job_id in self._jobs:
                known = self._jobs[job_id]  # squeue says less than scontrol did: keep what it does not say
                info = replace(info, gres=info.gres or known.gres, stdout=info.stdout or known.stdout)
            self._jobs[job_id] = info


class _Shared:
    """What the slots of one launcher share once the first of them opened (see the module docstring)."""

    def __init__(self, host: Host, client: SlurmClient, lock: HostLock, log_dir: str) -> None:
        self.host = host
        self.client = client
        self.lock = lock
        self.log_dir = log_dir
        self.nodes: dict[str, NodeInfo] = {}
        self.node_type: str | None = None
        self.adoptable: dict[str, JobInfo] = {}
        self.submitted: set[str] = set()


class SlurmLauncher(SchedulerLauncher):
    """``max_jobs`` slots on one Slurm partition (see the module docstring)."""

    kind = "slurm"
    scheduler = "Slurm"
    spec: SlurmLauncherSpec
    spec_class = SlurmLauncherSpec

    def __init__(
        self,
        experiment: Experiment,
        *,
        run_id: str,
        lock_label: str,
        break_lock: bool = False,
        connect: Callable[[Any], Host] | None = None,
        client: Callable[[Host], SlurmClient] | None = None,
    ) -> None:
        self._connect = connect if connect is not None else connect_host
        self._client = client if client is not None else SlurmClient
        self._shared: _Shared | None = None
        self._expected: dict[str, Deployment] | None = None
        self.watch: JobWatch | None = None
        super().__init__(experiment, run_id=run_id, lock_label=lock_label, break_lock=break_lock)

    def expect(self, deployments: Sequence[Deployment]) -> None:
        """The deployments this run will still launch: only their jobs are kept to reattach to."""
        self._expected = {d.id: d for d in deployments}

    # -- shared by the slots ---------------------------------------------------------------------------------

    @property
    def shared(self) -> _Shared:
        if self._shared is None:
            raise ServiceError(f"{self.target}: the launcher is not open")
        return self._shared

    def _open_first(self, recovered: Callable[[str], None]) -> None:
        self._shared = self._open(recovered)

    def _open(self, recovered: Callable[[str], None]) -> _Shared:
        spec, exp = self.spec, self.experiment
        host = self._connect(spec.login)
        as_login = getattr(host, "as_login_user", None)
        commands: Host = as_login() if callable(as_login) else host  # jobs are the login user's, never root's
        try:
            client = self._client(commands)
            client.check()
            shared_dir = spec.shared_dir
            if shared_dir == "~" or shared_dir.startswith("~/"):
                shared_dir = client.home() + shared_dir[1:]
            lock = HostLock(commands, f"{shared_dir}/{exp.name}.lock", service=f"the Slurm jobs of {exp.name}")
            lock.acquire(self.lock_label, break_lock=self.break_lock)
        except BaseException:
            with contextlib.suppress(Exception):
                host.close()
            raise
        shared = _Shared(host, client, lock, f"{shared_dir}/{exp.name}/{self.run_id}")
        try:
            self._read_nodes(shared)
            self._leftovers(shared, recovered)
            client.mkdir(shared.log_dir)
        except BaseException:
            self._teardown(shared)
            raise
        self.watch = JobWatch(client, spec.poll_interval)
        for info in shared.adoptable.values():
            self.watch.track(info)
        return shared

    def _read_nodes(self, shared: _Shared) -> None:
        spec = self.spec
        nodes = shared.client.nodes(spec.partition)
        where = f"partition {spec.partition}" if spec.partition else "the default partition"
        if not nodes:
            raise ServiceError(f"{shared.client.name}: {where} has no nodes (sinfo lists none)")
        shared.nodes = {n.name: n for n in nodes}
        types: dict[str, list[str]] = {}
        for node in nodes:
            types.setdefault(node.node_type, []).append(node.name)
        if len(types) == 1:
            shared.node_type = next(iter(types))
        elif not spec.constraint:
            listed = "; ".join(
                f"{t}: {', '.join(sorted(n)[:4])}{'...' if len(n) > 4 else ''}" for t, n in types.items()
            )
            raise ServiceError(
                f"{shared.client.name}: {where} mixes node types ({listed}); baselines are compared on the type "
                "they were measured on: pin one with launcher.constraint (a node feature) or another partition"
            )

    def _leftovers(self, shared: _Shared, recovered: Callable[[str], None]) -> None:
        """Keep this run's own jobs that still run what it would submit (``--resume`` reattaches to them);
        cancel every other job of the experiment: the lock is ours, so their run is dead."""
        exp = self.experiment
        prefix, own = job_prefix(exp.name), job_prefix(exp.name, self.run_id)
        jobs = [j for j in shared.client.queue(user_jobs=True) if j.name.startswith(prefix) and j.active]
        cancel: list[JobInfo] = []
        for job in jobs:
            tags = job.tags
            deployment_id = tags.get("deployment", "")
            expected = self._expected.get(deployment_id) if self._expected is not None else None
            keep = (
                job.name.startswith(own)
                and tags.get("run") == self.run_id
                and (job.waiting or job.running)
                and deployment_id not in shared.adoptable
                and (self._expected is None or (expected is not None and self._runs(job, expected, shared)))
            )
            if keep:
                shared.adoptable[deployment_id] = job
            else:
                cancel.append(job)
        if cancel:
            shared.client.cancel(j.job_id for j in cancel)
            shared.submitted.update(j.job_id for j in cancel)  # waited for at close, like ours
            what = ", ".join(f"{j.job_id} ({j.name}, {j.state})" for j in cancel)
            recovered(f"{shared.client.name}: cancelled {len(cancel)} Slurm job(s) an earlier run left: {what}")

    def _runs(self, job: JobInfo, deployment: Deployment, shared: _Shared) -> bool:
        """Whether ``job`` runs exactly what this run would submit for ``deployment`` now."""
        script = self.script_for(deployment, shared)
        return job.tags.get("config") == deployment.config_hash and job.tags.get("script") == script.script_hash

    def _close_last(self) -> None:
        with self._guard:
            shared, self._shared = self._shared, None
        if shared is not None:
            self._teardown(shared)

    def _teardown(self, shared: _Shared) -> None:
        """Cancel every job of the run (tracked, left to reattach to, or found by its name), wait until squeue
        lists none of them, release the lock and the connection. Raises ServiceError when some job would not go."""
        client = shared.client
        try:
            ids = set(shared.submitted) | {j.job_id for j in shared.adoptable.values()}
            if self.watch is not None:
                ids.update(self.watch.tracked())
            own = job_prefix(self.experiment.name, self.run_id)
            with contextlib.suppress(SpecsweepError):
                ids.update(j.job_id for j in client.queue(user_jobs=True) if j.name.startswith(own))
            left = [j for j in client.queue(ids) if j.active] if ids else []
            if left:
                client.cancel(j.job_id for j in left)
            deadline = time.monotonic() + CANCEL_WAIT_SECONDS
            while left:
                left = [j for j in client.queue(j.job_id for j in left) if j.active]
                if not left:
                    break
                if time.monotonic() > deadline:
                    raise ServiceError(
                        f"{client.name}: Slurm job(s) still listed {CANCEL_WAIT_SECONDS:g} s after scancel: "
                        + ", ".join(j.describe() for j in left)
                    )
                time.sleep(0.5)
        finally:
            with contextlib.suppress(SpecsweepError):
                shared.lock.release()
            with contextlib.suppress(Exception):
                shared.host.close()

    # -- jobs ------------------------------------------------------------------------------------------------

    def job_settings(self) -> JobSettings:
        return job_settings(self.experiment)

    def script_for(self, deployment: Deployment, shared: _Shared) -> BatchScript:
        """The batch script this run submits for ``deployment``."""
        return render_batch_script(
            self.job_settings(),
            deployment,
            experiment=self.experiment.name,
            run_id=self.run_id,
            log_dir=shared.log_dir,
            label=deployment.label,
        )

    def start_job(self, deployment: Deployment) -> tuple[JobInfo, bool]:
        """This run's own job for ``deployment`` when it still runs exactly what would be submitted now
        (reattached: True), else a new job."""
        shared = self.shared
        script = self.script_for(deployment, shared)
        with self._guard:
            kept = shared.adoptable.pop(deployment.id, None)
        watch = self._watch()
        if kept is not None:
            tags = kept.tags
            if tags.get("config") == deployment.config_hash and tags.get("script") == script.script_hash:
                # Nothing changed since it was submitted: the same server, still running or about to.
                detail = shared.client.job(kept.job_id)
                if detail.waiting or detail.running:
                    shared.submitted.add(kept.job_id)
                    watch.track(detail)
                    return detail, True
            shared.client.cancel([kept.job_id])
            shared.submitted.add(kept.job_id)
        job_id = shared.client.submit(script)
        shared.submitted.add(job_id)
        info = JobInfo(
            job_id=job_id,
            state="PENDING",
            name=script.name,
            stdout=script.output.replace("%j", job_id),
        )
        watch.track(info)
        return info, False

    def new_server(self, deployment: Deployment) -> SlurmJobServer:
        job, reattached = self.start_job(deployment)
        return SlurmJobServer(self, job, deployment, reattached=reattached)

    def _watch(self) -> JobWatch:
        if self.watch is None:
            raise ServiceError(f"{self.target}: the launcher is not open")
        return self.watch

    def node_type(self, node: str) -> str | None:
        """The type of ``node``; the first job's node sets the run's type when the partition had several."""
        shared = self.shared
        info = shared.nodes.get(node)
        if info is None:
            with contextlib.suppress(SpecsweepError):
                shared.nodes.update({n.name: n for n in shared.client.nodes(self.spec.partition)})
            info = shared.nodes.get(node)
        return info.node_type if info is not None else None


class _JobAsService:
    """A job as :func:`~orchestrator.launchers.health.wait_until_healthy` watches a Service: its state in systemd's
    words (pending: activating; running: active; ended: failed, or inactive once COMPLETED), its output file
    as the log, the login host as its host (no pid there: the host's sockets are never probed)."""

    def __init__(self, server: SlurmJobServer) -> None:
        self.server = server
        self.host = server.launcher.shared.host
        self.name = server.name
        self.start_cursor: str | None = "0"

    def state(self) -> ServiceState:
        return self.server.state()

    def journal_cursor(self) -> str:
        return self.server.journal_cursor()

    def journal_since(self, cursor: str) -> LogChunk:
        return self.server.journal_since(cursor)

    def logs_tail(self, n: int = 50) -> list[str]:
        return self.server.logs_tail(n)


class SlurmJobServer(SchedulerServer):
    """One deployment's job: the server on its node, seen through the login node (its log window source is
    the job's output file)."""

    scheduler = "Slurm"
    reason_prefix = "job"
    pending_text = "after {elapsed:.0f} s: still not running (launcher.pending_timeout is {limit:g} s)"
    ended_text = "before it ran its server"  # after the job's own line, which says its state
    launcher: SlurmLauncher

    def __init__(
        self, launcher: SlurmLauncher, job: JobInfo, deployment: Deployment, *, reattached: bool = False
    ) -> None:
        super().__init__(launcher, f"job {job.job_id}", deployment)
        self.job_id = job.job_id
        self.submitted = job
        self.reattached = reattached
        self.node = ""
        self._log = JobLog(launcher.shared.client, job.stdout)
        self._tunnel: Tunnel | None = None

    @property
    def log_name(self) -> str:
        return f"the job's output file {self._log.path}"

    # -- what wait_until_healthy and the measurer read ---------------------------------------------------

    def job(self, *, fresh: bool = False) -> JobInfo:
        return self.launcher._watch().get(self.job_id, fresh=fresh)

    def status(self, *, fresh: bool = False) -> JobInfo:
        return self.job(fresh=fresh)

    def state(self) -> ServiceState:
        info = self.job()
        invocation = f"slurm-{self.job_id}"
        if info.waiting:
            return ServiceState("activating", "start", invocation_id=invocation)
        if info.running:
            return ServiceState("active", "running", "success", invocation_id=invocation)
        if info.state == "COMPLETED":
            return ServiceState("inactive", "dead", "success", 0, invocation_id=invocation)
        return ServiceState("failed", "failed", info.state.lower(), invocation_id=invocation)

    def journal_cursor(self) -> str:
        return self._log.journal_cursor()

    def journal_since(self, cursor: str) -> LogChunk:
        return self._log.journal_since(cursor)

    def logs_tail(self, n: int = 50) -> list[str]:
        return self._log.logs_tail(n)

    def _disconnect(self) -> None:
        if self._tunnel is not None:
            self._tunnel.close()

    def _cancel(self) -> None:
        """The job is cancelled (the last slot's close waits until it is gone)."""
        self.launcher.shared.client.cancel([self.job_id])

    # -- getting there ---------------------------------------------------------------------------------------

    def _failed(self, what: str, reason: str, status: Any = None) -> StartFailed:
        info: JobInfo = status or self.job(fresh=True)
        tail = self._tail_evidence()
        message = f"{self.launcher.target}: {info.describe()} {what}"
        return StartFailed(message, evidence=[info.describe(), *tail], reason=reason)

    def ended_reason(self, status: Any) -> str:
        return str(status.state).lower()

    def _submit(self, progress: HealthCallback | None) -> None:
        """Submitted when the server was made (``SlurmLauncher.start_job``); a job reattached to is said."""
        if self.reattached and progress is not None:
            progress(0.0, self.launcher.spec.pending_timeout, f"reattached to {self.submitted.describe()}")

    def connect(self, status: Any) -> None:
        """The server's URL on its node (``{node}``), through a tunnel over the login node's connection when
        ``server.via`` is ssh; the placement the records carry."""
        self.node = status.node
        exp = self.launcher.experiment
        url = exp.server.url.replace("{node}", self.node)
        if exp.server.via == "ssh":
            self._tunnel = Tunnel(self.launcher.shared.host, url)  # type: ignore[arg-type]
            url = self._tunnel.start()
        self.url = url
        node_type = self.launcher.node_type(self.node)
        shared = self.launcher.shared
        if shared.node_type is None and node_type is not None:
            shared.node_type = node_type  # a constraint pinned the type: the first job's node tells which
        if node_type is not None and shared.node_type is not None and node_type != shared.node_type:
            raise self._failed(
                f"landed on a node of another type ({node_type}) than the run's ({shared.node_type}); "
                "narrow launcher.constraint",
                "job_node_type",
            )
        info = self.launcher.shared.client.job(self.job_id)  # scontrol -d: the GPUs it was given
        self.placement = {
            "launcher": "slurm",
            "job_id": self.job_id,
            "node": self.node,
            "partition": self.launcher.spec.partition,
            "node_type": node_type,
            "gres": info.gres or self.launcher.spec.gres,
        }

    def wait_healthy(self, progress: HealthCallback | None, stop: threading.Event) -> None:
        try:
            wait_for_experiment(
                _JobAsService(self),  # type: ignore[arg-type]
                self.url,
                self.launcher.experiment,
                progress=progress,
                stop=stop,
            )
        except StartFailed as exc:
            info = self.job(fresh=True)
            # A job being ended (COMPLETING, SIGNALING, ...) says how it ended only once it has: Slurm kills its
            # processes first (up to KillWait, 30 s by default; slurm.conf). Wait for the state it ends in, so a
            # job past its time limit is a TIMEOUT, not a COMPLETING.
            deadline = time.monotonic() + ENDING_WAIT_SECONDS
            while info.state in ENDING and time.monotonic() < deadline:
                time.sleep(1.0)
                info = self.job(fresh=True)
            if info.ended or exc.reason in ("failed", "exited"):
                raise self._failed("before its server was healthy", f"job_{info.state.lower()}", info) from exc
            raise StartFailed(
                f"{self.launcher.target}: {info.describe()}: {exc}",
                evidence=[info.describe(), *exc.evidence],
                reason=exc.reason,
            ) from exc


def restore_jobs(
    experiment: Experiment, *, break_lock: bool = False, dry_run: bool = False
) -> tuple[str, Leftover | None, bool]:
    """``specsweep restore FILE`` for a Slurm launcher: the experiment's jobs still queued or running (found
    by name, ``squeue -u``) and its lock, cancelled and removed unless ``dry_run``. A lock of a live (or
    unknown) run is left, and its jobs too, unless ``break_lock``. Returns (login host name, what was
    found or None, whether anything was undone)."""
    spec = experiment.launcher
    if not isinstance(spec, SlurmLauncherSpec):
        raise ServiceError("the experiment has no Slurm launcher")
    host = connect_host(spec.login)
    as_login = getattr(host, "as_login_user", None)
    commands: Host = as_login() if callable(as_login) else host
    try:
        client = SlurmClient(commands)
        shared_dir = spec.shared_dir
        if shared_dir == "~" or shared_dir.startswith("~/"):
            shared_dir = client.home() + shared_dir[1:]
        lock = HostLock(
            commands, f"{shared_dir}/{experiment.name}.lock", service=f"the Slurm jobs of {experiment.name}"
        )
        holder = lock.read()
        stale, why = lock_is_stale(holder) if holder and not holder.get("corrupt") else (True, "")
        jobs = [j for j in client.queue(user_jobs=True) if j.name.startswith(job_prefix(experiment.name)) and j.active]
        if holder is None and not jobs:
            return host.name, None, False
        detail = (f"{len(jobs)} Slurm job(s): " + ", ".join(f"{j.job_id} {j.state}" for j in jobs)) if jobs else ""
        leftover = Leftover(
            host=host.name,
            service=f"the Slurm jobs of {experiment.name}",
            marker={**{k: v for k, v in (holder or {}).items() if k != "token"}, "jobs": [j.job_id for j in jobs]}
            if jobs
            else None,
            lock=holder,
            lock_stale=stale,
            detail="; ".join(x for x in (detail, why) if x),
        )
        if dry_run:
            return host.name, leftover, False
        if holder is not None and not stale and not break_lock:
            raise HostLockedError(
                f"the Slurm jobs of {experiment.name} are driven by a live or unknown run "
                f"({holder.get('label', '?')}, pid {holder.get('pid', '?')} on {holder.get('controller', '?')}): "
                f"{why}; pass --break-lock if that run is dead",
                host=host.name,
            )
        lock.acquire("specsweep restore", break_lock=True)
        try:
            client.cancel(j.job_id for j in jobs)
        finally:
            lock.release()
        return host.name, leftover, True
    finally:
        with contextlib.suppress(Exception):
            host.close()
