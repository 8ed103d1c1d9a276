"""A Slurm of the unit tests: an in-memory scheduler behind :class:`~orchestrator.launchers.slurm.jobs.SlurmClient`.

:class:`FakeScheduler` keeps jobs as Slurm would report them (state, reason, batch host, comment, output
file) and starts a pending job on a free node the next time it is asked about its jobs, one job per node,
unless ``start(job)`` says otherwise (a state to go to: ``PENDING`` keeps it waiting, ``FAILED`` ends it
with ``log`` lines in its output file). Its nodes are called ``127.0.0.1`` (and ``127.0.0.2``...), so a
server URL ``http://{node}:PORT`` reaches :class:`HealthServer`, a local HTTP server that answers 200.
:class:`FakeClient` is a SlurmClient whose Slurm commands go to the scheduler; its file commands (mkdir, the
lock, the output file's bytes) run on a real :class:`~orchestrator.hosts.LocalHost` in a temporary directory.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.hosts import LocalHost
from orchestrator.hosts.base import Host
from orchestrator.launchers.slurm.jobs import ENDED, BatchScript, JobInfo, NodeInfo, SlurmClient

SLURM_EXPERIMENT = """\
name: fake
launcher:
  kind: slurm
  login: local
  partition: gpu
  gres: "gpu:8"
  time: "10"
  max_jobs: {max_jobs}
  shared_dir: {shared}
  poll_interval: 0.05s
  pending_timeout: {pending_timeout}
{launcher_extra}
service:
  kind: process
  command: "/opt/server --port {port} {{spec_args}}"
server: {{url: "http://{{node}}:{port}", expected_load_time: 10s, ready_timeout: 10s}}
engine: sim
variants:
  autoregressive: {{spec_args: "--algorithm ar"}}
  linear: {{spec_args: "--algorithm linear"}}
  ddtree:
    spec_args: "--algorithm ddtree --budget {{budget}}"
    matrix: {{budget: [7, 16]}}
baselines: [autoregressive, linear]
load: {{concurrency: [1, 4], requests: 8, max_tokens: 32, warmup: 0}}
{extra}
"""


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


class HealthServer:
    """Local HTTP servers answering 200 to every GET (the jobs' "servers", for the health wait), on one port
    of 127.0.0.1 and 127.0.0.2: the fake nodes' names."""

    def __init__(self) -> None:
        for _ in range(20):
            first = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
            self.port = int(first.server_address[1])
            try:
                second = http.server.ThreadingHTTPServer(("127.0.0.2", self.port), _Answer)
            except OSError:
                first.server_close()
                continue
            break
        else:  # pragma: no cover - twenty ports taken on 127.0.0.2
            raise RuntimeError("no port free on both 127.0.0.1 and 127.0.0.2")
        self.servers = [first, second]
        for httpd in self.servers:
            threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        for httpd in self.servers:
            httpd.shutdown()
            httpd.server_close()


@dataclass
class FakeJob:
    job_id: str
    name: str
    comment: str
    stdout: str
    script: str = ""
    state: str = "PENDING"
    reason: str = "None"
    node: str = ""
    user: str = "me"
    exit_code: str = "0:0"

    def info(self) -> JobInfo:
        return JobInfo(
            job_id=self.job_id,
            state=self.state,
            name=self.name,
            reason=self.reason,
            node=self.node,
            user=self.user,
            comment=self.comment,
            exit_code=self.exit_code,
            stdout=self.stdout,
            gres="gpu:8(IDX:0-7)" if self.node else "",
        )


@dataclass
class FakeScheduler:
    nodes: list[NodeInfo] = field(default_factory=lambda: [NodeInfo("127.0.0.1", "gpu:8", "", "gpu*")])
    #: ``start(job)``: the state a pending job goes to when a node is free (None: RUNNING).
    start: Callable[[FakeJob], str | None] = lambda job: None
    #: ``log(job)``: the lines its output file gets when it starts or ends that way.
    log: Callable[[FakeJob], list[str]] = lambda job: [f"job {job.job_id} starting", "ready to roll"]
    jobs: dict[str, FakeJob] = field(default_factory=dict)
    submitted: list[BatchScript] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    max_running: int = 0
    next_id: int = 100
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str, comment: str = "", state: str = "RUNNING", node: str = "127.0.0.1", **kw: Any) -> FakeJob:
        with self.lock:
            self.next_id += 1
            job = FakeJob(str(self.next_id), name, comment, kw.pop("stdout", "/dev/null"), state=state, node=node, **kw)
            self.jobs[job.job_id] = job
            return job

    def set(self, job_id: str, state: str, reason: str = "None") -> None:
        with self.lock:
            job = self.jobs[job_id]
            job.state, job.reason = state, reason
            self._write(job)

    def _write(self, job: FakeJob) -> None:
        if job.stdout and job.stdout != "/dev/null":
            path = Path(job.stdout)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as fh:
                fh.writelines(line + "\n" for line in self.log(job))

    def running(self) -> list[FakeJob]:
        return [j for j in self.jobs.values() if j.state == "RUNNING"]

    def submit(self, script: BatchScript) -> str:
        with self.lock:
            self.next_id += 1
            job_id = str(self.next_id)
            comment = next(
                (line.split("--comment=", 1)[1] for line in script.text.splitlines() if "--comment=" in line), ""
            )
            self.jobs[job_id] = FakeJob(
                job_id, script.name, comment.strip("'"), script.output.replace("%j", job_id), script=script.text
            )
            self.submitted.append(script)
            return job_id

    def _schedule(self) -> None:
        busy = {j.node for j in self.running()}
        for job in sorted(self.jobs.values(), key=lambda j: int(j.job_id)):
            if job.state != "PENDING":
                continue
            wanted = self.start(job)
            if wanted == "PENDING":
                job.reason = "Resources"
                continue
            free = [n.name for n in self.nodes if n.name not in busy]
            if not free:
                job.reason = "Resources"
                continue
            job.node = free[0]
            busy.add(job.node)
            job.state = wanted or "RUNNING"
            self._write(job)
        self.max_running = max(self.max_running, len(self.running()))

    def queue(self, ids: Iterable[str], user_jobs: bool) -> list[JobInfo]:
        with self.lock:
            self._schedule()
            wanted = set(ids)
            return [
                j.info()
                for j in self.jobs.values()
                if j.state not in ENDED and ((user_jobs and j.user == "me") or j.job_id in wanted)
            ]

    def job(self, job_id: str) -> JobInfo:
        with self.lock:
            self._schedule()
            job = self.jobs.get(job_id)
            return job.info() if job else JobInfo(job_id=job_id, state="GONE")

    def cancel(self, ids: Iterable[str]) -> None:
        with self.lock:
            for job_id in ids:
                job = self.jobs.get(job_id)
                if job is not None and job.state not in ENDED:
                    job.state = "CANCELLED"
                    self.cancelled.append(job_id)


class FakeClient(SlurmClient):
    """A SlurmClient whose Slurm commands the scheduler answers (its file commands run on the host)."""

    def __init__(self, host: Host, scheduler: FakeScheduler) -> None:
        super().__init__(host)
        self.scheduler = scheduler

    def check(self) -> str:
        return "slurm 22.05.8"

    def submit(self, script: BatchScript) -> str:
        return self.scheduler.submit(script)

    def queue(self, job_ids: Iterable[str] = (), *, user_jobs: bool = False) -> list[JobInfo]:
        return self.scheduler.queue(job_ids, user_jobs)

    def job(self, job_id: str) -> JobInfo:
        return self.scheduler.job(job_id)

    def cancel(self, job_ids: Iterable[str]) -> None:
        self.scheduler.cancel(job_ids)

    def nodes(self, partition: str | None) -> list[NodeInfo]:
        return [n for n in self.scheduler.nodes if n.partition.rstrip("*") == (partition or n.partition.rstrip("*"))]


def use_scheduler(monkeypatch: Any, scheduler: FakeScheduler) -> None:
    """Make every SlurmLauncher built from now on log in to this machine and talk to ``scheduler``."""
    from orchestrator.launchers.slurm import launcher as slurm

    monkeypatch.setattr(slurm, "connect_host", lambda spec: LocalHost(name="login"))
    monkeypatch.setattr(slurm, "SlurmClient", lambda host: FakeClient(host, scheduler))
