"""What holds a host's GPUs: per-GPU memory in use and the compute processes on each, from ``nvidia-smi``.

Two queries, each one command over the host's own channel (as :mod:`orchestrator.hosts.telemetry`'s):
``nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits`` (a line per GPU)
and ``nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,noheader,nounits``
(a line per process with a compute context on a GPU: nvidia-smi names the GPU by its UUID, which the first
query maps to an index). Each process's whole command line is read from the host's ``ps``, so a failure can
name what holds a GPU (PID, command, memory), not only the executable's name nvidia-smi gives.

:func:`gpu_snapshot` returns a :class:`GpuSnapshot`; :func:`gpu_count` the number of GPUs (``gpus: auto``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import HostError, SpecsweepError

__all__ = ["GpuProcess", "GpuSnapshot", "gpu_count", "gpu_snapshot", "parse_apps", "parse_gpus"]

GPU_QUERY = "nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits"
APP_QUERY = "nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,noheader,nounits"


@dataclass(frozen=True)
class GpuProcess:
    """One process with a compute context on one GPU."""

    pid: int
    gpu: int
    memory_mib: float | None
    name: str
    command: str = ""

    def describe(self) -> str:
        memory = f"{self.memory_mib:.0f} MiB" if self.memory_mib is not None else "memory unknown"
        return f"PID {self.pid} on GPU {self.gpu} ({memory}): {self.command or self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "gpu": self.gpu,
            "memory_mib": self.memory_mib,
            "name": self.name,
            "command": self.command,
        }


@dataclass(frozen=True)
class GpuSnapshot:
    """Each GPU's memory in use (MiB, by index) and the compute processes on them."""

    memory_mib: dict[int, float]
    total_mib: dict[int, float] = field(default_factory=dict)
    processes: list[GpuProcess] = field(default_factory=list)

    def on(self, gpus: Sequence[int]) -> list[GpuProcess]:
        """The processes on any of ``gpus``."""
        wanted = set(gpus)
        return [p for p in self.processes if p.gpu in wanted]

    def to_dict(self, gpus: Sequence[int] | None = None) -> dict[str, Any]:
        keep = set(gpus) if gpus is not None else set(self.memory_mib)
        return {
            "memory_mib": {str(i): m for i, m in sorted(self.memory_mib.items()) if i in keep},
            "processes": [p.to_dict() for p in self.processes if p.gpu in keep],
        }


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in row] for row in csv.reader(io.StringIO(text), skipinitialspace=True) if row]


def _float(cell: str) -> float | None:
    try:
        return float(cell.split()[0])
    except (ValueError, IndexError):
        return None


def parse_gpus(text: str) -> tuple[dict[str, int], dict[int, float], dict[int, float]]:
    """``index,uuid,memory.used,memory.total`` lines -> (uuid -> index, index -> used MiB, index -> total)."""
    uuids: dict[str, int] = {}
    used: dict[int, float] = {}
    total: dict[int, float] = {}
    for row in _rows(text):
        if len(row) < 4 or not row[0].isdigit():
            continue
        index = int(row[0])
        uuids[row[1]] = index
        memory = _float(row[2])
        if memory is not None:
            used[index] = memory
        size = _float(row[3])
        if size is not None:
            total[index] = size
    return uuids, used, total


def parse_apps(text: str, uuids: dict[str, int]) -> list[GpuProcess]:
    """``pid,process_name,used_memory,gpu_uuid`` lines -> processes (a GPU UUID not in ``uuids`` is skipped)."""
    out = []
    for row in _rows(text):
        if len(row) < 4 or not row[0].isdigit() or row[3] not in uuids:
            continue
        out.append(GpuProcess(pid=int(row[0]), gpu=uuids[row[3]], memory_mib=_float(row[2]), name=row[1]))
    return out


def _run(host: Any, command: str) -> str:
    try:
        result = host.run(command, timeout=30)
    except SpecsweepError as exc:
        raise HostError(f"{host.name}: nvidia-smi did not answer: {exc}") from None
    if not result.ok:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [f"exit {result.exit_code}"]
        raise HostError(f"{host.name}: {command.split()[0]} failed: {last[0]}")
    return str(result.stdout)


def _commands(host: Any, pids: list[int]) -> dict[int, str]:
    if not pids:
        return {}
    listing = ",".join(str(p) for p in pids)
    try:
        result = host.run(f"ps -o pid=,args= -p {listing}", timeout=30)
    except SpecsweepError:
        return {}
    out: dict[int, str] = {}
    for line in str(result.stdout).splitlines():
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit():
            out[int(pid)] = args.strip()
    return out


def gpu_snapshot(host: Any) -> GpuSnapshot:
    """The GPUs' memory and compute processes on ``host`` now; HostError when nvidia-smi cannot tell."""
    uuids, used, total = parse_gpus(_run(host, GPU_QUERY))
    if not used:
        raise HostError(f"{host.name}: nvidia-smi listed no GPU")
    processes = parse_apps(_run(host, APP_QUERY), uuids)
    commands = _commands(host, sorted({p.pid for p in processes}))
    processes = [GpuProcess(p.pid, p.gpu, p.memory_mib, p.name, commands.get(p.pid, "")) for p in processes]
    return GpuSnapshot(memory_mib=used, total_mib=total, processes=processes)


def gpu_count(host: Any) -> int:
    """How many GPUs nvidia-smi lists on ``host`` (``gpus: auto``); HostError when it cannot tell."""
    from orchestrator.hosts.telemetry import gpu_facts

    facts = gpu_facts(host)
    gpu = facts.get("gpu")
    if not gpu:
        raise HostError(f"{host.name}: gpus: auto, but {facts.get('note') or 'nvidia-smi listed no GPU'}")
    return int(gpu["count"])
