"""Shared machinery of the end-to-end sweep tests and the reliability suite.

Experiment documents for the simulator (locally through the process service, or as a systemd unit on a test
host over SSH), the CLI as a subprocess that is always stopped, readers of a run directory, a snapshot of what
a host must look like after a run, and the fault triggers that need more than a flag of the simulator (an SSH
session killed under the controller, sshd stopped for a while).

Everything here only talks to loopback or to the test hosts' own network namespaces.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.system.support import TestHost, changed_files, secret_files, unit_snapshot
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def _limit(seconds: float) -> str:
    """A duration of an experiment file: the quiet machine's ``seconds``, scaled (tests/timing.py), whole seconds."""
    return f"{math.ceil(scaled(seconds))}s"


#: A load small enough for a test: two levels, two requests each, short timeouts (a stalled stream costs 1 s on a
#: quiet machine; more on a busy one, where a request that is only slow must not time out).
SMALL_LOAD: dict[str, Any] = {
    "concurrency": [1, 2],
    "warmup": 1,
    "requests": 2,
    "max_tokens": 8,
    "timeouts": {"connect": _limit(2), "first_token": _limit(1), "total": _limit(1)},
}


def free_port() -> int:
    """A TCP port nobody listens on right now (on loopback)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sim_template(
    port: int, *, listen: str = "127.0.0.1", load_seconds: float = 0.3, itl_ms: float | None = None
) -> str:
    """The service command template of a tiny simulator; variants fill ``{spec_args}``."""
    slow = f" --itl-ms {itl_ms:g}" if itl_ms is not None else ""
    return (
        f"{{python}} -m orchestrator.sim --host {listen} --port {port} --profile tiny --load-seconds {load_seconds:g} "
        f"--decode-log-interval 1{slow} {{spec_args}}"
    )


def local_experiment(
    name: str,
    port: int,
    variants: dict[str, str],
    *,
    baselines: list[str] | None = None,
    load: dict[str, Any] | None = None,
    ready_timeout: str | None = None,
    itl_ms: float | None = None,
) -> dict[str, Any]:
    """An experiment on this machine: the simulator as a plain process (the demo's shape)."""
    return {
        "name": name,
        "host": "local",
        "service": {"kind": "process", "command": sim_template(port, itl_ms=itl_ms)},
        "server": {
            "url": f"http://127.0.0.1:{port}",
            "model": "sim",
            "ready_timeout": ready_timeout or _limit(20),
            "expected_load_time": "1s",
        },
        "engine": "sim",
        "variants": {k: {"spec_args": v} for k, v in variants.items()},
        "baselines": baselines if baselines is not None else [next(iter(variants))],
        "load": load or SMALL_LOAD,
    }


def ssh_host_spec(host: TestHost, **extra: Any) -> dict[str, Any]:
    return {
        "ssh": f"root@{host.guest_ip}",
        "name": f"testhost{host.index}",
        "identity_file": host.key,
        "known_hosts": host.known_hosts,
        "connect_timeout": "5s",
        "command_timeout": "30s",
        **extra,
    }


def ssh_experiment(
    name: str,
    hosts: list[TestHost],
    unit: str,
    port: int,
    variants: dict[str, str],
    *,
    baselines: list[str] | None = None,
    load: dict[str, Any] | None = None,
    ready_timeout: str | None = None,
    itl_ms: float | None = None,
    environment: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An experiment against test hosts over SSH: the simulator as the systemd unit ``unit`` (a drop-in)."""
    service: dict[str, Any] = {
        "kind": "systemd",
        "unit": unit,
        "exec_start": sim_template(port, listen="0.0.0.0", itl_ms=itl_ms),
    }
    if environment:
        service["environment"] = environment
    doc: dict[str, Any] = {
        "name": name,
        "service": service,
        "server": {
            "url": f"http://{{host}}:{port}",
            "model": "sim",
            "ready_timeout": ready_timeout or _limit(20),
            "expected_load_time": "1s",
        },
        "engine": "sim",
        "variants": {k: {"spec_args": v} for k, v in variants.items()},
        "baselines": baselines if baselines is not None else [next(iter(variants))],
        "load": load or SMALL_LOAD,
    }
    if len(hosts) == 1:
        doc["host"] = ssh_host_spec(hosts[0])
    else:
        doc["hosts"] = [ssh_host_spec(h) for h in hosts]
    return doc


def write_experiment(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    return path


# -- the CLI as a subprocess --------------------------------------------------------------------------------


def cli_env(home: Path | None = None, **extra: str) -> dict[str, str]:
    """The CLI's environment: wide (no wrapped lines), and with ``home`` as $HOME (the process service keeps its
    state under ~/.local/state, which a test must not share with anyone)."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **extra}
    if home is not None:
        env["HOME"] = str(home)
    return env


def cli_command(*args: str) -> list[str]:
    return [PYTHON, "-m", "orchestrator", *args]


def run_cli(*args: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """The CLI run to its end; ``timeout`` is the quiet machine's limit, scaled (tests/timing.py)."""
    with started_cli(*args, env=env) as proc:
        out, err = proc.communicate(timeout=scaled(timeout))
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@contextlib.contextmanager
def started_cli(*args: str, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """The CLI running in the background, in its own session (so a signal reaches it alone); killed on the way
    out if it is still running, whatever the test did."""
    proc = subprocess.Popen(
        cli_command(*args),
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
            proc.communicate(timeout=scaled(30))


def wait_until(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.05) -> Any:
    """Poll until ``predicate`` is truthy and return its value (a synchronisation helper, not an assertion on
    time: the caller asserts on the value). ``timeout`` is the quiet machine's limit, scaled (tests/timing.py)."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


# -- reading a run directory ---------------------------------------------------------------------------------


def run_dirs(results: Path, experiment: str) -> list[Path]:
    base = results / experiment
    return sorted(p for p in base.iterdir() if (p / "run.json").is_file()) if base.is_dir() else []


def only_run_dir(results: Path, experiment: str) -> Path:
    dirs = run_dirs(results, experiment)
    assert len(dirs) == 1, dirs
    return dirs[0]


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    # Lines end at "\n" only, as the store writes and reads them: str.splitlines() would also split at a
    # U+2028 or U+0085 inside a JSON string (a hostile value echoed by the server), losing the record.
    for line in path.read_text(encoding="utf-8").split("\n"):
        with contextlib.suppress(json.JSONDecodeError):
            if line.strip():
                out.append(json.loads(line))
    return out


def records(run_dir: Path) -> list[dict[str, Any]]:
    return read_lines(run_dir / "records.jsonl")


def events(run_dir: Path) -> list[dict[str, Any]]:
    return read_lines(run_dir / "events.jsonl")


def run_state(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text())["state"])


def planned_points(run_dir: Path) -> set[tuple[str, str]]:
    """(deployment id, point id) of every point of the run's plan."""
    plan = json.loads((run_dir / "plan.json").read_text())
    return {(d["id"], p["id"]) for d in plan["deployments"] for p in d["load_points"]}


def duplicates(recs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(host, point id) pairs recorded more than once."""
    counts = Counter((r["host"], r["point_id"]) for r in recs)
    return sorted(k for k, n in counts.items() if n > 1)


def point_ids(recs: list[dict[str, Any]]) -> set[str]:
    return {r["point_id"] for r in recs}


# -- a host's state, byte for byte ---------------------------------------------------------------------------


def host_state(host: TestHost, unit: str) -> dict[str, Any]:
    """What a run must leave exactly as it found: the files the host changed under /etc/systemd/system and
    specsweep's state directory (byte for byte, from the overlay's upper layer: ``changed_files``), its secret
    directory, the unit's state and configuration as systemd shows them, and the text of its drop-ins."""
    dropins = host.admin(f"cat /etc/systemd/system/{unit}.d/* 2>/dev/null; true").stdout
    return {
        "files": changed_files(host),
        "secrets": secret_files(host),
        "unit": unit_snapshot(host, unit),
        "dropins": dropins,
    }


def state_differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    out = []
    for key in before:
        if before[key] != after[key]:
            out.append(f"{key}: before={before[key]!r} after={after[key]!r}")
    return out


# -- the server's own view ------------------------------------------------------------------------------------


def server_metric(url: str, name: str) -> float | None:
    """The sum of the samples of ``name`` on the server's /metrics (every label set), None when it has none or
    does not answer: what the server says it is doing, independent of the controller."""
    import httpx

    try:
        text = httpx.get(url.rstrip("/") + "/metrics", timeout=2.0).text
    except httpx.HTTPError:
        return None
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " ")
    ]
    return sum(values) if values else None


# -- faults the simulator cannot inject itself -----------------------------------------------------------------


def controller_ports(host: TestHost, pid: int) -> list[int]:
    """Local ports of the TCP connections process ``pid`` (the controller) holds to the host's sshd."""
    out = subprocess.run(
        ["ss", "-tnpH", "state", "established", "dst", f"{host.guest_ip}:22"], capture_output=True, text=True
    ).stdout
    # With a state filter, ss prints: Recv-Q Send-Q Local-Address:Port Peer-Address:Port Process
    return [int(line.split()[2].rsplit(":", 1)[1]) for line in out.splitlines() if f"pid={pid}," in line]


def kill_ssh_sessions(host: TestHost, pid: int) -> int:
    """Cut every SSH connection of controller process ``pid``: kill -9 the host's sshd processes serving it
    (as a dropped link would). Returns how many connections were cut."""
    ports = controller_ports(host, pid)
    if not ports:
        return 0
    script = " ; ".join(
        f"ss -tnpH state established '( sport = :22 and dport = :{port} )' | grep -o 'pid=[0-9]*' | cut -d= -f2"
        for port in ports
    )
    pids = sorted(set(host.admin(script, check=False).stdout.split()))
    if pids:
        host.admin(f"kill -9 {' '.join(pids)}", check=False)
    return len(ports)


def stop_sshd(host: TestHost) -> None:
    """Stop the host's sshd listener (open sessions, like the test's admin channel, stay)."""
    host.admin("systemctl stop ssh.service ssh.socket 2>/dev/null; systemctl stop ssh.service")


def start_sshd(host: TestHost) -> None:
    """Start sshd again: through the admin channel's open session, else from inside the container's
    namespaces (the admin channel may have lost its session meanwhile)."""
    if host.admin("systemctl start ssh.service", check=False).returncode == 0:
        return
    subprocess.run(
        ["nsenter", "-t", str(leader_pid(host)), "-m", "-u", "-i", "-n", "-p", "systemctl", "start", "ssh.service"],
        check=True,
        capture_output=True,
        timeout=60,
    )


def leader_pid(host: TestHost) -> int:
    return int((host.lab / "leader.pid").read_text().split()[0])


# -- sweeps in this process ----------------------------------------------------------------------------------


class Trigger:
    """An observer that runs ``action`` once, in its own thread, at the first event ``when`` accepts.

    Observers are called from inside the runner (some from the load's event loop): the action must not run
    there, or it would stall what it means to disturb.
    """

    def __init__(self, when: Callable[[Any], bool], action: Callable[[], Any]) -> None:
        self.when = when
        self.action = action
        self.fired = threading.Event()
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __call__(self, event: Any) -> None:
        with self._lock:
            if self.fired.is_set() or not self.when(event):
                return
            self.fired.set()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.value = self.action()
        except BaseException as exc:  # reported by join()
            self.error = exc
        finally:
            self.done.set()

    def join(self, timeout: float = 120.0) -> Any:
        if self._thread is not None:
            self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        return self.value


def observers(*callbacks: Callable[[Any], None]) -> Callable[[Any], None]:
    def observe(event: Any) -> None:
        for callback in callbacks:
            callback(event)

    return observe


class SweepRun:
    """One in-process ``run_sweep``: its result, or the SpecsweepError it ended with, and its run directory."""

    def __init__(self, result: Any, error: BaseException | None, run_dir: Path) -> None:
        self.result = result
        self.error = error
        self.run_dir = run_dir

    @property
    def state(self) -> str:
        return run_state(self.run_dir)

    @property
    def records(self) -> list[dict[str, Any]]:
        return records(self.run_dir)


def sweep_in_process(
    path: Path,
    results: Path,
    *,
    observer: Callable[[Any], None] | None = None,
    stop: Any = None,
    resume: str | None = None,
) -> SweepRun:
    from orchestrator.errors import SpecsweepError
    from orchestrator.experiment.schema import load_experiment
    from orchestrator.sweep.runner import SweepOptions, run_sweep

    experiment = load_experiment(path)
    try:
        result = run_sweep(experiment, SweepOptions(results_root=results, resume=resume), observer=observer, stop=stop)
    except SpecsweepError as exc:
        dirs = run_dirs(results, experiment.name)
        if resume and resume != "latest":
            return SweepRun(None, exc, Path(resume))
        # A sweep refused before it measured anything leaves no run directory: the path names none.
        return SweepRun(None, exc, dirs[-1] if dirs else results / experiment.name / "no-run-directory")
    return SweepRun(result, None, result.run_dir)


@contextlib.contextmanager
def local_leftovers_restored(home: Path, *experiments: Path) -> Iterator[None]:
    """On the way out, whatever happened, undo what a run of these local experiments left (a simulator still
    running after its CLI was killed, a marker, a lock), as ``specsweep restore --break-lock`` would."""
    try:
        yield
    finally:
        from orchestrator.experiment.schema import load_experiment
        from orchestrator.launchers.restore import restore_experiment

        previous = os.environ.get("HOME")
        os.environ["HOME"] = str(home)  # the process service keeps its state under ~/.local/state
        try:
            for path in experiments:
                with contextlib.suppress(Exception):
                    restore_experiment(load_experiment(path), break_lock=True)
        finally:
            if previous is None:
                os.environ.pop("HOME", None)
            else:
                os.environ["HOME"] = previous
