"""Shared helpers of the load-generator benches: start the simulator or the firehose on loopback, pin processes
to cores.

Everything here talks to 127.0.0.1 only. A server started here is stopped by its PID when the block ends,
whatever happens inside it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(command: list[str], core: int | None) -> list[str]:
    """``command`` pinned to one core with taskset (when there is more than one core and taskset exists)."""
    if core is None or (os.cpu_count() or 1) < 2 or shutil.which("taskset") is None:
        return command
    return ["taskset", "-c", str(core), *command]


@dataclass(frozen=True)
class Sim:
    url: str
    pid: int


@contextlib.contextmanager
def simulator(*args: str, core: int | None = 0) -> Iterator[Sim]:
    """Run ``python -m orchestrator.sim --port P ARGS``; yield its URL and PID once /health answers."""
    port = free_port()
    command = pinned(
        [sys.executable, "-m", "orchestrator.sim", "--port", str(port), "--load-seconds", "0", *args], core
    )
    log = open(os.devnull, "wb")  # noqa: SIM115 - closed in finally
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the simulator exited with {process.returncode}: {' '.join(command)}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the simulator did not become healthy within 30 s")
            time.sleep(0.1)
        yield Sim(url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_ns(pid: int) -> int:
    """CPU time (user + system, nanoseconds) of process ``pid``, its threads and every descendant now running
    (Linux ``/proc/PID/task/TID/schedstat``, the scheduler's own count: nanoseconds, not clock ticks). A
    process or thread that has already exited is not in it."""
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            base = f"/proc/{current}/task/{task}"
            try:
                total += int(Path(base + "/schedstat").read_text().split()[0])
                pending += [int(child) for child in Path(base + "/children").read_text().split()]
            except (OSError, ValueError, IndexError):
                continue
    return total


def crossing(points: list[tuple[float, float]], level: float) -> float | None:
    """The first time at which the piecewise-linear ``points`` ((time, value), value not decreasing) reach
    ``level``; None when they never do."""
    for (t0, v0), (t1, v1) in itertools.pairwise(points):
        if v1 >= level:
            if v1 == v0 or level <= v0:
                return t0 if level <= v0 else t1
            return t0 + (t1 - t0) * (level - v0) / (v1 - v0)
    return None


def value_at(points: list[tuple[float, float]], t: float) -> float | None:
    """The piecewise-linear ``points`` ((time, value)) at time ``t``; None outside them."""
    for (t0, v0), (t1, v1) in itertools.pairwise(points):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return None


@dataclass(frozen=True)
class Firehose:
    url: str  # the port it serves (shared with other processes under --reuse-port)
    control: str  # its own port, for /stats and /reset of this process
    pid: int


def http_json(url: str, method: str = "GET") -> dict:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


@contextlib.contextmanager
def firehose(
    events_per_write: int,
    *,
    itl_ms: float = 0.0,
    continuous_usage: bool = True,
    core: int | None = 0,
    port: int | None = None,
    reuse_port: bool = False,
    chunks_per_send: int = 1,
    writes_per_turn: int = 1,
    dialect: str = "sglang",
    uvloop: bool = True,
) -> Iterator[Firehose]:
    """Run bench/firehose.py; yield its URLs and PID once it answers. ``port`` shared with ``reuse_port``;
    ``uvloop=False`` keeps it on asyncio's own loop (each write its own ``send``: see its ``--writes-per-turn``)."""
    command = [sys.executable, str(ROOT / "bench" / "firehose.py"), "--events-per-write", str(events_per_write)]
    command += ["--port", str(port if port is not None else free_port()), "--itl-ms", str(itl_ms)]
    command += ["--chunks-per-send", str(chunks_per_send), "--writes-per-turn", str(writes_per_turn)]
    command += ["--dialect", dialect]
    if uvloop and importlib.util.find_spec("uvloop") is not None:
        command.append("--uvloop")  # the server's own cost per write, the limit when it writes one token per send
    if reuse_port:
        command.append("--reuse-port")
    if not continuous_usage:
        command += ["--continuous-usage", "ignore"]
    process = subprocess.Popen(pinned(command, core), cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "firehose on URL control URL pid N"
        parts = line.split()
        if len(parts) < 6 or parts[0] != "firehose":
            raise RuntimeError(f"the firehose did not start: {line!r}")
        url, control = parts[2], parts[4]
        http_json(control + "/health")
        yield Firehose(url, control, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass(frozen=True)
class Mode:
    per_write: int  # events per HTTP chunk
    chunks: int = 1  # HTTP chunks per write
    writes: int = 1  # writes per stream per turn of the server's pump, each its own send (then on asyncio's loop)
    itl_ms: float = 0.0  # paced: a turn every T ms
    dialect: str = "sglang"
    continuous_usage: bool = True


# What an outside harness wrote (issue 31): an asyncio-protocol server, plain OpenAI chunks of one short word,
# one event per HTTP chunk and per write, 16 writes per stream per turn, usage only at the end.
NAMED_MODES = {"outside": Mode(1, 1, 16, 0.0, "vllm", False)}


def parse_mode(mode: str) -> Mode:
    """``E[xK][/W][@T]``: E events per HTTP chunk, K chunks per write (1), W writes per stream per turn (1), one
    turn every T ms (0: as fast as it can); or a name in NAMED_MODES."""
    if mode in NAMED_MODES:
        return NAMED_MODES[mode]
    head, _, itl = mode.partition("@")
    head, _, writes = head.partition("/")
    per_write, _, chunks = head.partition("x")
    try:
        spec = Mode(int(per_write), int(chunks or 1), int(writes or 1), float(itl or 0))
    except ValueError:
        raise SystemExit(
            f"bad mode {mode!r}: E, ExK, E/W, E@T, ExK/W@T (numbers) or {', '.join(NAMED_MODES)}"
        ) from None
    if min(spec.per_write, spec.chunks, spec.writes) < 1:
        raise SystemExit(f"bad mode {mode!r}: every count at least 1")
    return spec


def mode_firehose(
    spec: Mode, *, core: int | None = 0, port: int | None = None, reuse_port: bool = False
) -> contextlib.AbstractContextManager[Firehose]:
    """:func:`firehose` writing as ``spec`` says (asyncio's own loop when it writes several times per turn)."""
    return firehose(
        spec.per_write,
        itl_ms=spec.itl_ms,
        core=core,
        port=port,
        reuse_port=reuse_port,
        chunks_per_send=spec.chunks,
        writes_per_turn=spec.writes,
        dialect=spec.dialect,
        continuous_usage=spec.continuous_usage,
        uvloop=spec.writes == 1,
    )
