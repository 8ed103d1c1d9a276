"""Talking to Slurm on the login node: batch scripts, ``sbatch``, ``squeue``, ``scontrol``, ``scancel``, ``sinfo``.

Everything here is a command run on the login host (:class:`~orchestrator.hosts.base.Host`: SSH, or this
machine when specsweep runs on the login node) and a parser of its answer; the parsers are pure, so the
unit tests feed them recorded answers. Slurm's own words are used: job states are ``squeue(1)``'s JOB STATE
CODES (``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``, ``TIMEOUT``, ``CANCELLED``, ``OUT_OF_MEMORY``,
``NODE_FAIL``, ...), reasons are its REASON codes (``Resources``, ``Priority``, ...). Facts checked on Slurm
22.05 (Debian's slurm-wlm): ``sbatch --parsable`` prints ``<id>`` or ``<id>;<cluster>``; ``squeue -j`` lists
a job only while it is pending, running or completing, and ``scontrol -o show job <id>`` keeps a finished job
for ``MinJobAge`` seconds (then ``Invalid job id specified``); ``squeue -o %k`` is the job's comment.

How specsweep finds its own jobs again: each is *named* ``specsweep.<experiment>.<run id>.<deployment id>``
(:func:`job_name`) and *commented* with what it runs (``specsweep;run=...;deployment=...;config=...;
script=<hash>``, :func:`job_comment`), so after a ``kill -9`` the next run lists the user's jobs
(``squeue -u``), keeps those whose name starts with the experiment's prefix, and cancels or reattaches to
them (:mod:`orchestrator.launchers.slurm.launcher`).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError, ServiceError
from orchestrator.quoting import (
    export_lines,
    one_line,
    sanitize_comment,
    sbatch_directive,
    shell_join,
    shell_quote,
    split_command,
)
from orchestrator.services.base import LogChunk

if TYPE_CHECKING:
    from orchestrator.hosts.base import Host
    from orchestrator.plan.deployments import Deployment

__all__ = [
    "ENDED",
    "RUNNING",
    "WAITING",
    "BatchScript",
    "JobInfo",
    "JobLog",
    "NodeInfo",
    "SlurmClient",
    "job_comment",
    "job_name",
    "job_prefix",
    "parse_comment",
    "parse_key_values",
    "parse_sinfo",
    "parse_squeue",
    "render_batch_script",
]

#: States of a job that has not started yet, or is held (squeue(1), JOB STATE CODES).
WAITING = frozenset(
    {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED", "STOPPED"}
)
#: A job whose batch script runs.
RUNNING = frozenset({"RUNNING"})
#: A job that is going away (its processes may still run): not yet gone from squeue.
ENDING = frozenset({"COMPLETING", "SIGNALING", "STAGE_OUT", "RESIZING"})
#: A job that has ended, one way or another.
ENDED = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
        "GONE",  # ours: no longer known to the controller (MinJobAge passed)
    }
)
#: Field separator of our squeue formats (a unit separator: it is in no name, comment or reason).
_SEP = "\x1f"
#: id, name, state, reason, batch host, node list, user, comment (last: the only free text).
_SQUEUE_FORMAT = _SEP.join(["%i", "%j", "%T", "%r", "%B", "%N", "%u", "%k"])
_PREFIX = "specsweep"


def job_prefix(experiment: str, run_id: str | None = None) -> str:
    """The name prefix of an experiment's jobs (of one run, with ``run_id``)."""
    return f"{_PREFIX}.{experiment}." + (f"{run_id}." if run_id else "")


def job_name(experiment: str, run_id: str, deployment_id: str) -> str:
    return f"{job_prefix(experiment, run_id)}{deployment_id}"


def job_comment(run_id: str, deployment: Deployment, script_hash: str) -> str:
    """What the job runs, as its comment says it (no spaces: ``key=value`` pairs joined by ``;``)."""
    return f"{_PREFIX};run={run_id};deployment={deployment.id};config={deployment.config_hash};script={script_hash}"


def parse_comment(comment: str) -> dict[str, str]:
    """The pairs of a :func:`job_comment` (empty for a comment specsweep did not write)."""
    parts = comment.strip().split(";")
    if not parts or parts[0] != _PREFIX:
        return {}
    return dict(p.split("=", 1) for p in parts[1:] if "=" in p)


# -- what Slurm says -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobInfo:
    """One job as squeue or scontrol reports it."""

    job_id: str
    state: str
    name: str = ""
    reason: str = ""
    node: str = ""  # the batch host (where the script, hence the server, runs); "" while pending
    user: str = ""
    comment: str = ""
    exit_code: str = ""
    stdout: str = ""
    gres: str = ""  # what the job was given (scontrol -d: gpu:8(IDX:0-7)), when known

    @property
    def waiting(self) -> bool:
        return self.state in WAITING

    @property
    def running(self) -> bool:
        return self.state in RUNNING

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def active(self) -> bool:
        """Still listed by squeue: waiting, running or ending."""
        return not self.ended

    @property
    def tags(self) -> dict[str, str]:
        return parse_comment(self.comment)

    def describe(self) -> str:
        """``job 12 PENDING (Resources)`` / ``job 12 RUNNING on node3`` / ``job 12 TIMEOUT on node3, exit 0:15``."""
        text = f"job {self.job_id} {self.state}"
        if self.waiting and self.reason and self.reason not in ("None", "(null)"):
            text += f" ({self.reason})"
        if self.node and not self.waiting:
            text += f" on {self.node}"
        if self.ended and self.exit_code and self.exit_code != "0:0":
            text += f", exit {self.exit_code}"
        if self.ended and self.reason and self.reason not in ("None", "(null)"):
            text += f", reason {self.reason}"
        return text


def parse_squeue(text: str) -> list[JobInfo]:
    """Jobs from ``squeue -h -o`` with :data:`_SQUEUE_FORMAT`."""
    jobs = []
    for line in text.splitlines():
        parts = line.split(_SEP)
        if len(parts) < 8 or not parts[0].strip():
            continue
        job_id, name, state, reason, batch, nodes, user = (p.strip() for p in parts[:7])
        comment = _SEP.join(parts[7:]).strip()
        node = batch if batch and batch not in ("(null)", "n/a", "None") else ""
        if not node and state in RUNNING and nodes and "[" not in nodes and "," not in nodes:
            node = nodes
        jobs.append(
            JobInfo(
                job_id=job_id,
                state=_base_state(state),
                name=name,
                reason=reason,
                node=node,
                user=user,
                comment="" if comment == "(null)" else comment,
            )
        )
    return jobs


_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_key_values(line: str) -> dict[str, str]:
    """``scontrol -o show ...``'s one line of ``Key=Value`` pairs. A value may hold spaces (a comment, a
    command): whatever follows a value up to the next `` Key=`` belongs to it."""
    out: dict[str, str] = {}
    matches = list(_KEY.finditer(line))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out.setdefault(match.group(1), line[match.end() : end].strip())
    return out


def _base_state(state: str) -> str:
    """``CANCELLED by 1002`` (scontrol) -> ``CANCELLED``; flags after ``+`` dropped."""
    return state.split()[0].split("+")[0].upper() if state.strip() else "UNKNOWN"


def parse_scontrol_job(text: str) -> JobInfo | None:
    """The job of ``scontrol -o show job [-d] <id>`` (None when it printed none)."""
    for line in text.splitlines():
        if not line.startswith("JobId="):
            continue
        kv = parse_key_values(line)
        node = kv.get("BatchHost", "")
        if node in ("(null)", "None"):
            node = ""
        gres = ""
        detail = re.search(r"\bGRES=(\S+)", line)  # -d: the node's line of the allocation, "gpu:8(IDX:0-7)"
        if detail:
            gres = detail.group(1)
        elif kv.get("TresPerNode"):
            gres = kv["TresPerNode"].removeprefix("gres:")
        return JobInfo(
            job_id=kv.get("JobId", ""),
            state=_base_state(kv.get("JobState", "")),
            name=kv.get("JobName", ""),
            reason=kv.get("Reason", ""),
            node=node,
            user=kv.get("UserId", "").split("(", 1)[0],
            comment="" if kv.get("Comment") in (None, "(null)") else kv.get("Comment", ""),
            exit_code=kv.get("ExitCode", ""),
            stdout=kv.get("StdOut", ""),
            gres=gres,
        )
    return None


@dataclass(frozen=True)
class NodeInfo:
    """A node of a partition: its name, its GRES and features (what makes its *type*)."""

    name: str
    gres: str = ""
    features: str = ""
    partition: str = ""

    @property
    def node_type(self) -> str:
        """What comparisons must share: the GPUs (GRES, socket bindings dropped) and the features."""
        gres = ",".join(sorted(re.sub(r"\(S:[^)]*\)", "", g) for g in self.gres.split(",") if g and g != "(null)"))
        features = ",".join(sorted(f for f in self.features.split(",") if f and f != "(null)"))
        return f"{gres or 'no-gres'}" + (f" [{features}]" if features else "")


def parse_sinfo(text: str) -> list[NodeInfo]:
    """Nodes from ``sinfo -h -N -o '%N|%P|%G|%f'`` (a node in several partitions is listed once per one)."""
    nodes = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 4 or not parts[0]:
            continue
        nodes.append(NodeInfo(name=parts[0], partition=parts[1], gres=parts[2], features=parts[3]))
    return nodes


# -- the batch script -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchScript:
    """A rendered batch script, its hash (what a reattached job must still run) and where its output goes."""

    text: str
    script_hash: str
    name: str
    output: str


@dataclass(frozen=True)
class JobSettings:
    """The launcher's sbatch settings (:class:`~orchestrator.experiment.hosts.SlurmLauncherSpec`'s)."""

    partition: str | None = None
    gres: str | None = None
    time: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    extra_args: Sequence[str] = field(default_factory=tuple)
    workdir: str | None = None


def _command_lines(deployment: Deployment) -> list[str]:
    """``export K='V'`` lines, then ``exec program args`` (:func:`~orchestrator.quoting.export_lines`)."""
    if deployment.command is None:
        raise ServiceError(f"deployment {deployment.id} has no command for a Slurm job")
    argv = split_command(deployment.command, what="the process command")
    if "=" in argv[0]:
        raise ConfigError(f"the program {argv[0]!r} contains '='; give the program's path first")
    return [*export_lines(deployment.environment), "exec " + shell_join(argv)]


def render_batch_script(
    settings: JobSettings,
    deployment: Deployment,
    *,
    experiment: str,
    run_id: str,
    log_dir: str,
    label: str = "",
) -> BatchScript:
    """The batch script of ``deployment``: ``#SBATCH`` lines (one node, one task; the launcher's partition,
    GRES, time, account, QOS, constraint and extra options; its name, comment and output file), then the
    server's command run with ``exec`` so that the job *is* the server: it ends when the server does, and
    ``scancel`` signals the server itself. The output file is ``<log_dir>/<deployment id>.<job id>.log``."""
    name = job_name(experiment, run_id, deployment.id)
    output = f"{log_dir}/{deployment.id}.%j.log"
    options = ["--nodes=1", "--ntasks=1", f"--output={output}", "--open-mode=append"]
    for key in ("partition", "gres", "time", "account", "qos", "constraint"):
        value = getattr(settings, key)
        if value:
            options.append(f"--{key}={value}")
    options += list(settings.extra_args)
    body = [sbatch_directive(o) for o in options]
    # Every value of the comment passes the comment sanitiser: a matrix value with a newline in the label
    # would otherwise end the comment, run as a command and stop sbatch reading the directives below it.
    comment = f"specsweep: experiment {experiment}, run {run_id}, deployment {deployment.id}" + (
        f" ({label})" if label else ""
    )
    lines = ["#!/bin/sh", f"# {sanitize_comment(comment, limit=400)}", *body]
    if settings.workdir:
        lines.append(f"cd -- {shell_quote(one_line(settings.workdir, what='the launcher workdir'))} || exit 1")
    lines.extend(_command_lines(deployment))
    hashed = "\n".join(lines) + "\n"
    script_hash = hashlib.sha256(hashed.encode()).hexdigest()[:16]
    own = [
        sbatch_directive("--job-name=" + name),
        sbatch_directive("--comment=" + job_comment(run_id, deployment, script_hash)),
    ]
    text = "\n".join([lines[0], lines[1], *own, *lines[2:]]) + "\n"
    return BatchScript(text=text, script_hash=script_hash, name=name, output=output)


# -- commands ------------------------------------------------------------------------------------------------


class SlurmClient:
    """Slurm's commands on the login host, at most ``parallel`` at a time (an sshd allows ten sessions per
    connection by default; every slot of the launcher polls through this one client)."""

    def __init__(self, host: Host, *, parallel: int = 4, command_timeout: float = 60.0) -> None:
        self.host = host
        self.command_timeout = command_timeout
        self._gate = threading.BoundedSemaphore(parallel)

    @property
    def name(self) -> str:
        return self.host.name

    def _run(self, cmd: str | list[str], *, input: str | None = None, idempotent: bool = True) -> tuple[int, str, str]:
        with self._gate:
            result = self.host.run(cmd, timeout=self.command_timeout, input=input, idempotent=idempotent)
        return result.exit_code, result.stdout, result.stderr

    def check(self) -> str:
        """The Slurm version the login node's sbatch reports; ServiceError when Slurm is not there."""
        code, out, err = self._run("sbatch --version")
        if code != 0:
            raise ServiceError(
                f"{self.name}: sbatch does not run on the login node ({(err or out).strip() or f'exit {code}'}): "
                "is Slurm installed there, and on the PATH of a non-interactive shell?"
            )
        return out.strip()

    def home(self) -> str:
        code, out, err = self._run('printf %s "$HOME"')
        if code != 0 or not out.startswith("/"):
            raise ServiceError(f"{self.name}: cannot read $HOME on the login node: {err.strip()}")
        return out

    def mkdir(self, path: str) -> None:
        code, _, err = self._run(["mkdir", "-p", "--", path])
        if code != 0:
            raise ServiceError(f"{self.name}: cannot create {path}: {err.strip()}")

    def submit(self, script: BatchScript) -> str:
        """``sbatch --parsable`` the script (on stdin); the job id. Never retried: a job must not be submitted
        twice (a lost answer leaves a job that the run finds by its name and cancels at the end)."""
        code, out, err = self._run(["sbatch", "--parsable"], input=script.text, idempotent=False)
        job_id = out.strip().split(";", 1)[0]
        if code != 0 or not job_id.isdigit():
            detail = (err or out).strip().splitlines()
            raise ServiceError(
                f"{self.name}: sbatch refused the job {script.name}: {detail[-1] if detail else f'exit {code}'}"
            )
        return job_id

    def queue(self, job_ids: Iterable[str] = (), *, user_jobs: bool = False) -> list[JobInfo]:
        """The jobs squeue lists (pending, running, completing): the given ids, or every job of the login user."""
        ids = sorted(set(job_ids), key=lambda j: int(j) if j.isdigit() else 0)
        if not ids and not user_jobs:
            return []
        select = '-u "$(id -un)"' if user_jobs else "-j " + shell_quote(",".join(ids))
        code, out, err = self._run(f"squeue -h {select} -o {shell_quote(_SQUEUE_FORMAT)}")
        if code != 0:
            if "Invalid job id" in err:
                return []  # every one of them is gone
            raise ServiceError(f"{self.name}: squeue failed: {err.strip() or f'exit {code}'}")
        return parse_squeue(out)

    def job(self, job_id: str) -> JobInfo:
        """``scontrol -o show job -d <id>``: its state, node, exit code, output file and GRES; ``GONE`` once the
        controller forgot it."""
        code, out, err = self._run(["scontrol", "-o", "-d", "show", "job", job_id])
        info = parse_scontrol_job(out) if code == 0 else None
        if info is None:
            if code != 0 and "Invalid job id" not in err:
                raise ServiceError(f"{self.name}: scontrol show job {job_id} failed: {err.strip() or f'exit {code}'}")
            return JobInfo(job_id=job_id, state="GONE", reason="no longer known to the Slurm controller")
        return info

    def cancel(self, job_ids: Iterable[str]) -> None:
        ids = sorted(set(job_ids))
        if ids:
            self._run(["scancel", *ids])  # a job that already ended is no error worth raising

    def nodes(self, partition: str | None) -> list[NodeInfo]:
        """The nodes of ``partition`` (the default partition when None)."""
        cmd = "sinfo -h -N -o '%N|%P|%G|%f'" + (f" -p {shell_quote(partition)}" if partition else "")
        code, out, err = self._run(cmd)
        if code != 0:
            raise ServiceError(f"{self.name}: sinfo failed: {err.strip() or f'exit {code}'}")
        nodes = parse_sinfo(out)
        if partition:
            return [n for n in nodes if n.partition.rstrip("*") == partition]
        return [n for n in nodes if n.partition.endswith("*")]


class JobLog:
    """A job's output file read through the login host by byte offsets (the process service's cursors):
    ``journal_cursor()`` is its size now, ``journal_since(c)`` the whole lines written after ``c``."""

    def __init__(self, client: SlurmClient, path: str) -> None:
        self.client = client
        self.path = path

    def journal_cursor(self) -> str:
        log = shell_quote(self.path)
        code, out, _ = self.client._run(f"if [ -e {log} ]; then wc -c < {log}; else echo 0; fi")
        text = out.strip()
        return text if code == 0 and text.isdigit() else "0"

    def journal_since(self, cursor: str) -> LogChunk:
        start = int(cursor) if cursor.strip().isdigit() else 0
        log = shell_quote(self.path)
        with self.client._gate:
            result = self.client.host.run(
                f"s=$(wc -c < {log} 2>/dev/null || echo 0); c={start}; "
                'if [ "$s" -lt "$c" ]; then c=0; fi; echo "$s $c"; '
                f'[ "$s" -gt "$c" ] && tail -c +$((c + 1)) {log} | head -c $((s - c)); true',
                timeout=self.client.command_timeout,
            )
        head, _, body = result.stdout_bytes.partition(b"\n")
        try:
            _size, begin = (int(x) for x in head.split())
        except ValueError as exc:
            raise ServiceError(f"{self.client.name}: cannot read {self.path}: {result.stderr.strip()}") from exc
        end = body.rfind(b"\n") + 1  # whole lines only: a line being written belongs to the next window
        return LogChunk(body[:end].decode("utf-8", "replace"), str(begin + end))

    def logs_tail(self, n: int = 50) -> list[str]:
        code, out, _ = self.client._run(f"tail -n {int(n)} -- {shell_quote(self.path)} 2>/dev/null; true")
        return out.splitlines() if code == 0 else []
