"""How busy the controller's machine was while a point was measured: its ``machine`` field in the record.

    start = sample()                    at the point's start
    ...                                 the load runs
    record.machine = machine_load(start, sample())

The load generator's timings (time to first token, gaps between tokens, the wall clock of every request) are
taken on the controller's machine; a machine whose CPUs are wanted by more than it has (another benchmark, a
test suite, a build) delays them, and a local server's steps too. Nothing in the figures shows it, so each point
keeps what the kernel says of the window:

- ``loadavg_1m``: the 1-minute load average (``/proc/loadavg``: runnable and uninterruptible tasks, decayed), the
  higher of the window's start and end, with ``cpus`` (the CPUs this process may run on): ``load_per_cpu`` is
  their ratio, which the analysis's ``machine_load`` check compares with ``checks.machine_load``;
- ``busy_share``: the share of all CPUs' time the machine spent busy in the window (``/proc/stat``'s first line:
  every state but idle and iowait), and ``own_cpu_share``: this controller's own share (its threads' user and
  system time, ``os.times``), so ``busy_share - own_cpu_share`` is what every other process (a local server
  included) took.

Where ``/proc`` is not there (not Linux), a figure is None; nothing here fails a point.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["MachineSample", "machine_load", "sample"]


@dataclass(frozen=True)
class MachineSample:
    """What the kernel says at one instant (see the module docstring)."""

    wall: float
    loadavg_1m: float | None
    busy: int | None  # jiffies, every CPU
    total: int | None
    own_cpu: float  # seconds of this process's threads


def _loadavg() -> float | None:
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            return float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        try:
            return float(os.getloadavg()[0])
        except OSError:
            return None


def _cpu_jiffies() -> tuple[int | None, int | None]:
    """(busy, total) jiffies of every CPU since boot, from ``/proc/stat``'s ``cpu`` line."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            first = handle.readline().split()
    except OSError:
        return None, None
    if not first or first[0] != "cpu":
        return None, None
    try:
        values = [int(v) for v in first[1:9]]  # user nice system idle iowait irq softirq steal (guest is in user)
    except ValueError:
        return None, None
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values)
    return total - idle, total


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def sample() -> MachineSample:
    busy, total = _cpu_jiffies()
    times = os.times()
    return MachineSample(
        wall=time.monotonic(),
        loadavg_1m=_loadavg(),
        busy=busy,
        total=total,
        own_cpu=times.user + times.system,
    )


def machine_load(start: MachineSample, end: MachineSample, *, cpu_count: int | None = None) -> dict[str, Any]:
    """The record's ``machine`` field for the window from ``start`` to ``end`` (module docstring)."""
    n = cpu_count or cpus()
    loads = [v for v in (start.loadavg_1m, end.loadavg_1m) if v is not None]
    load = max(loads) if loads else None
    wall = end.wall - start.wall
    busy_share = None
    if start.busy is not None and end.busy is not None and start.total is not None and end.total is not None:
        ticks = end.total - start.total
        busy_share = round((end.busy - start.busy) / ticks, 4) if ticks > 0 else None
    own = round(max(0.0, end.own_cpu - start.own_cpu) / (wall * n), 4) if wall > 0 else None
    return {
        "loadavg_1m": load,
        "cpus": n,
        "load_per_cpu": round(load / n, 3) if load is not None else None,
        "busy_share": busy_share,
        "own_cpu_share": own,
    }


def high_load(machine: dict[str, Any] | None, threshold: float) -> str | None:
    """The warning for a point measured on a machine busier than ``threshold`` runnable tasks a CPU (0: never),
    None when it was not."""
    if not machine or threshold <= 0:
        return None
    per_cpu = machine.get("load_per_cpu")
    if not isinstance(per_cpu, int | float) or per_cpu <= threshold:
        return None
    return (
        f"this machine is busy: load average {machine.get('loadavg_1m'):.1f} on {machine.get('cpus')} CPU(s) "
        f"({per_cpu:.1f} a CPU, above checks.machine_load {threshold:g}) while a point was measured; the client's "
        "timings (and a local server's) are delayed by whatever else runs here, and every such point is marked "
        "(finding machine_load). For clean figures measure on a quiet machine"
    )
