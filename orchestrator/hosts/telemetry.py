"""GPU facts and GPU telemetry from ``nvidia-smi`` on the host that serves the model.

Two queries, both nvidia-smi's CSV output (``--query-gpu=FIELDS --format=csv``), whose field names are those
``nvidia-smi --help-query-gpu`` lists: ``name`` (the product name), ``count`` (the number of NVIDIA GPUs in the
system), ``driver_version``, ``memory.total`` ("Total installed GPU memory"), ``timestamp`` ("YYYY/MM/DD
HH:MM:SS.msec"), ``index``, ``utilization.gpu`` ("Percent of time over the past sample period during which one
or more kernels was executing on the GPU"), ``memory.used`` ("Total memory allocated by active contexts", MiB)
and ``power.draw`` (the board's last measured power draw, W). A value the GPU does not support reads
``[N/A]`` (or ``[Not Supported]``); it is no figure.

- :func:`gpu_facts` (provenance): ``nvidia-smi --query-gpu=name,count,driver_version,memory.total
  --format=csv``, one line per GPU after the header (``memory.total [MiB]``), read once per host.
- :class:`GpuTelemetry` (each point's window): one long-running ``nvidia-smi --query-gpu=timestamp,index,
  utilization.gpu,memory.used,power.draw --format=csv,noheader,nounits -lms 500`` started before the load and
  stopped after it: one command (one SSH channel, read line by line as nvidia-smi writes them), never a process
  per sample. Its summary: the mean utilisation, the most memory used, the mean power of all GPUs together and
  the energy of the window (that power times the window's length), from which the record's tokens per joule.

A host without ``nvidia-smi`` is a note (``gpu: null`` with why), never an error; so is one whose nvidia-smi
fails (no driver loaded). nvidia-smi takes a few hundred milliseconds to write its first sample, so the window
opens once it has (waiting at most ``FIRST_SAMPLE_TIMEOUT_S``): a window shorter than the sampling interval
still holds that sample. One that holds none all the same (nvidia-smi never wrote) says ``nvidia-smi wrote no
sample during the window``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import SpecsweepError

__all__ = [
    "FACT_FIELDS",
    "TELEMETRY_FIELDS",
    "GpuTelemetry",
    "LineStream",
    "gpu_facts",
    "has_nvidia_smi",
    "open_line_stream",
    "parse_facts",
    "parse_samples",
    "summarize_samples",
]

FACT_FIELDS = ("name", "count", "driver_version", "memory.total")
TELEMETRY_FIELDS = ("timestamp", "index", "utilization.gpu", "memory.used", "power.draw")
FIRST_SAMPLE_TIMEOUT_S = 5.0  # how long a window waits for nvidia-smi's first sample before it opens anyway
_NOT_A_VALUE = {"[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Unknown Error]", ""}


def _rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in row] for row in csv.reader(io.StringIO(text), skipinitialspace=True) if row]


def _number(cell: str) -> float | None:
    if cell in _NOT_A_VALUE:
        return None
    text = cell.split()[0] if cell else cell  # "81559 MiB" (units when nounits was not asked for)
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_facts(text: str) -> dict[str, Any] | None:
    """``--query-gpu=name,count,driver_version,memory.total --format=csv`` output -> ``{model, count, driver,
    memory_total_mib, gpus: [...]}``; None when it holds no GPU line."""
    rows = _rows(text)
    if rows and rows[0] and rows[0][0].lower().startswith("name"):
        rows = rows[1:]
    gpus: list[dict[str, Any]] = []
    for row in rows:
        if len(row) < 4:
            continue
        name, count, driver, memory = row[:4]
        gpus.append(
            {"name": name, "count": _number(count), "driver_version": driver, "memory_total_mib": _number(memory)}
        )
    if not gpus:
        return None
    names = sorted({str(g["name"]) for g in gpus})
    count = gpus[0]["count"]
    return {
        "model": names[0] if len(names) == 1 else ", ".join(names),
        "count": int(count) if count is not None else len(gpus),
        "driver_version": gpus[0]["driver_version"],
        "memory_total_mib": gpus[0]["memory_total_mib"],
        "gpus": gpus,
    }


def has_nvidia_smi(host: Any) -> bool:
    try:
        return bool(host.run("command -v nvidia-smi >/dev/null 2>&1", timeout=15).ok)
    except SpecsweepError:
        return False


def gpu_facts(host: Any) -> dict[str, Any]:
    """``{"gpu": {...} | None, "note": str | None}`` for ``host`` (see :func:`parse_facts`)."""
    if not has_nvidia_smi(host):
        return {"gpu": None, "note": f"no nvidia-smi on {host.name}: no GPU details or telemetry"}
    command = f"nvidia-smi --query-gpu={','.join(FACT_FIELDS)} --format=csv"
    try:
        result = host.run(command, timeout=30)
    except SpecsweepError as exc:
        return {"gpu": None, "note": f"nvidia-smi on {host.name} did not answer: {exc}"}
    if not result.ok:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
        return {"gpu": None, "note": f"nvidia-smi on {host.name} failed (exit {result.exit_code}): {last[0]}"}
    facts = parse_facts(result.stdout)
    if facts is None:
        return {"gpu": None, "note": f"nvidia-smi on {host.name} listed no GPU"}
    return {"gpu": facts, "note": None}


@dataclass
class Sample:
    time: float | None
    index: int
    utilization: float | None
    memory_used: float | None
    power: float | None


def _timestamp(cell: str) -> float | None:
    try:
        return time.mktime(time.strptime(cell.split(".")[0], "%Y/%m/%d %H:%M:%S")) + (
            float("0." + cell.split(".")[1]) if "." in cell else 0.0
        )
    except (ValueError, IndexError):
        return None


def parse_samples(lines: Sequence[str]) -> list[Sample]:
    """Lines of ``--query-gpu=timestamp,index,utilization.gpu,memory.used,power.draw --format=csv,noheader,
    nounits`` -> samples (lines that are not such a line are skipped)."""
    out = []
    for row in _rows("\n".join(lines)):
        if len(row) < 5:
            continue
        index = _number(row[1])
        if index is None:
            continue
        out.append(Sample(_timestamp(row[0]), int(index), _number(row[2]), _number(row[3]), _number(row[4])))
    return out


def summarize_samples(samples: Sequence[Sample], window_s: float) -> dict[str, Any]:
    """One window's telemetry: GPUs seen, samples, mean utilisation (%), most memory used on one GPU and in
    all (MiB), mean total power (W, all GPUs) and the window's energy (J)."""
    gpus = sorted({s.index for s in samples})
    util = [s.utilization for s in samples if s.utilization is not None]
    by_gpu_power: dict[int, list[float]] = {}
    by_gpu_memory: dict[int, list[float]] = {}
    for s in samples:
        if s.power is not None:
            by_gpu_power.setdefault(s.index, []).append(s.power)
        if s.memory_used is not None:
            by_gpu_memory.setdefault(s.index, []).append(s.memory_used)
    power = sum(sum(v) / len(v) for v in by_gpu_power.values()) if by_gpu_power else None
    return {
        "gpus": len(gpus),
        "samples": len(samples),
        "utilization_pct_mean": round(sum(util) / len(util), 2) if util else None,
        "memory_used_mib_max": max((max(v) for v in by_gpu_memory.values()), default=None),
        "memory_used_mib_total": round(sum(max(v) for v in by_gpu_memory.values()), 1) if by_gpu_memory else None,
        "power_w_mean": round(power, 2) if power is not None else None,
        "energy_j": round(power * window_s, 2) if power is not None and window_s > 0 else None,
        "window_s": round(window_s, 3),
    }


class LineStream:
    """The lines one long-running command writes, read by a thread as they come; ``stop()`` ends it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._done = threading.Event()
        self._first = threading.Event()  # set once the command has written its first line (or ended)
        self._last_line = 0.0  # time.monotonic() of the last line read
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def _start(self, reader: Any) -> None:
        def read() -> None:
            try:
                reader()
            finally:
                self._first.set()

        self._thread = threading.Thread(target=read, name="telemetry-reader", daemon=True)
        self._thread.start()

    def _add(self, line: str) -> None:
        self.lines.append(line)
        self._last_line = time.monotonic()
        self._first.set()

    def wait_first(self, timeout: float, settle: float = 0.05) -> bool:
        """Wait until the command has written its first lines (True), or ``timeout`` seconds (False): the first
        line, then until no line has come for ``settle`` seconds (nvidia-smi writes one line per GPU; a sample
        of some GPUs only would undercount the power)."""
        deadline = time.monotonic() + timeout
        if not self._first.wait(timeout):
            return False
        while time.monotonic() - self._last_line < settle and time.monotonic() < deadline:
            time.sleep(settle / 5)
        return True

    def _close(self) -> None:  # pragma: no cover - the subclasses
        raise NotImplementedError

    def stop(self) -> list[str]:
        self._done.set()
        with contextlib.suppress(Exception):
            self._close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        return list(self.lines)


class _LocalStream(LineStream):
    def __init__(self, command: str) -> None:
        super().__init__()
        self._proc = subprocess.Popen(
            ["/bin/sh", "-c", "exec " + command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._start(self._read)

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            self._add(raw.decode("utf-8", "replace").rstrip("\r\n"))

    def _close(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGTERM)
        try:
            self._proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout=3)


class _ChannelStream(LineStream):
    """One SSH channel running the command; closing the channel ends it (nvidia-smi's next write fails)."""

    def __init__(self, transport: Any, command: str) -> None:
        super().__init__()
        self._chan = transport.open_session(timeout=10)
        self._chan.exec_command("exec " + command)
        self._start(self._read)

    def _read(self) -> None:
        pending = b""
        chan = self._chan
        while not self._done.is_set():
            if chan.recv_ready():
                data = chan.recv(65536)
                if not data:
                    break
                pending += data
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    self._add(line.decode("utf-8", "replace").rstrip("\r"))
                continue
            if chan.exit_status_ready() and not chan.recv_ready():
                break
            select.select([chan], [], [], 0.2)
        if pending:
            self.lines.append(pending.decode("utf-8", "replace"))

    def _close(self) -> None:
        self._chan.close()


def open_line_stream(host: Any, command: str) -> LineStream | None:
    """Run ``command`` on ``host`` as one long-running process whose lines arrive as it writes them: a local
    subprocess, or one SSH channel on an SSH host's connection. None for a host of another kind."""
    from orchestrator.hosts.local import LocalHost
    from orchestrator.hosts.ssh import SSHHost

    target = getattr(host, "_host", host)  # SSHHost.as_login_user() shares its host's connection
    if isinstance(target, LocalHost):
        return _LocalStream(command)
    if isinstance(target, SSHHost):
        client = target._ensure()  # the host's own connection: one more channel, not one more login
        transport = client.get_transport()
        if transport is None:
            return None
        return _ChannelStream(transport, command)
    return None


@dataclass
class GpuTelemetry:
    """One window's telemetry sampler (see the module docstring): ``finish()`` stops it and summarises."""

    host: Any
    interval_ms: int = 500
    stream: LineStream | None = None
    started: float = field(default_factory=time.monotonic)
    note: str | None = None
    #: Only these GPUs (``-i``: a GPU slot's), else every GPU of the host.
    gpus: tuple[int, ...] | None = None

    @property
    def command(self) -> str:
        only = f" -i {','.join(str(int(g)) for g in self.gpus)}" if self.gpus else ""
        fields = ",".join(TELEMETRY_FIELDS)
        return f"nvidia-smi --query-gpu={fields} --format=csv,noheader,nounits -lms {int(self.interval_ms)}{only}"

    @classmethod
    def start(cls, host: Any, interval_ms: int = 500, gpus: Sequence[int] | None = None) -> GpuTelemetry:
        sampler = cls(host, interval_ms, gpus=tuple(gpus) if gpus else None)
        command = sampler.command
        try:
            sampler.stream = open_line_stream(host, command)
        except Exception as exc:  # a host that cannot run it: a note, not a failed point
            sampler.note = f"telemetry could not start on {getattr(host, 'name', host)}: {exc}"
        if sampler.stream is None and sampler.note is None:
            sampler.note = f"telemetry is not available on {getattr(host, 'name', host)}'s kind of host"
        if sampler.stream is not None:
            # nvidia-smi takes a moment to start (driver initialisation); the window opens once it has written
            # its first sample, so that a window shorter than its start-up still holds one.
            sampler.stream.wait_first(FIRST_SAMPLE_TIMEOUT_S)
        sampler.started = time.monotonic()
        return sampler

    def finish(self) -> dict[str, Any]:
        window = time.monotonic() - self.started
        lines = self.stream.stop() if self.stream is not None else []
        summary = summarize_samples(parse_samples(lines), window)
        summary["command"] = self.command
        if self.note:
            summary["note"] = self.note
        elif not summary["samples"]:
            summary["note"] = "nvidia-smi wrote no sample during the window"
        return summary
