"""How a run was made, kept in its run directory as ``provenance.json`` and shown in the report's header.

- ``run``: the specsweep version and the git revision of its checkout (``git rev-parse HEAD``, ``dirty`` when
  the work tree differs; none for an installed wheel), Python, the controller, and the experiment file with
  the SHA-256 of its bytes;
- ``hosts``: per target, its GPUs (model, count, driver, memory; :func:`orchestrator.hosts.telemetry.gpu_facts`) or
  the note saying why there is none;
- ``deployments``: per deployment, the engine and the version the server reported
  (:mod:`orchestrator.engines.info`), the command specsweep rendered, and the command actually running on the
  host, read back after the start: the main process's command line (``ps -ww -o args= -p PID``) and, for a
  systemd unit, ``systemctl show -p ExecStart --value UNIT``.

:func:`provenance_differences` says what differs between two runs' provenance (``specsweep compare`` warns
with it). Reading any of it never fails a run: what cannot be read is a note.
"""

from __future__ import annotations

import contextlib
import hashlib
import platform
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

from orchestrator import __version__
from orchestrator.errors import SpecsweepError

__all__ = [
    "PROVENANCE_FILE",
    "ProvenanceLog",
    "experiment_hash",
    "git_revision",
    "provenance_differences",
    "run_provenance",
    "running_command",
]

PROVENANCE_FILE = "provenance.json"
_SHELLS = ("sh ", "/bin/sh ", "bash ", "/bin/bash ", "dash ")


#: The checkout specsweep runs from: the folder holding the ``orchestrator`` package (this file is
#: orchestrator/runs/provenance.py). Only that folder: a wheel installed in a virtual environment that lives
#: inside some other repository must not take that repository's revision.
CHECKOUT = Path(__file__).resolve().parents[2]


def git_revision(path: Path | None = None) -> dict[str, Any] | None:
    """The git revision of the specsweep checkout (``commit``, ``dirty``), or None outside a checkout. Its root
    holds ``.git``: a folder, or a file in a worktree (``git worktree add``) or a submodule."""
    where = path or CHECKOUT
    if not (where / ".git").exists():
        return None
    try:
        commit = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
        if commit.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def experiment_hash(path: str | Path | None) -> str | None:
    """``sha256:<hex>`` of the experiment file's bytes, or None when there is no readable file."""
    if path is None:
        return None
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    return "sha256:" + hashlib.sha256(data).hexdigest()


def run_provenance(experiment_file: str | Path | None) -> dict[str, Any]:
    """The run-level part (see the module docstring)."""
    return {
        "specsweep_version": __version__,
        "git": git_revision(),
        "python": platform.python_version(),
        "controller": socket.gethostname(),
        "experiment_file": str(experiment_file) if experiment_file is not None else None,
        "experiment_sha256": experiment_hash(experiment_file),
    }


def running_command(service: Any) -> dict[str, Any]:
    """What runs on the host now for ``service``: its main process's pid and command line, and (systemd) the
    unit's ExecStart as systemd holds it. Whatever cannot be read is left out with a ``note``."""
    out: dict[str, Any] = {}
    host = getattr(service, "host", None)
    if host is None:
        return {"note": "the launcher has no host to read the running command from"}
    try:
        pid = service.state().main_pid
    except SpecsweepError as exc:
        return {"note": f"the service's state could not be read: {exc}"}
    out["pid"] = pid
    try:
        if pid:
            result = host.run(["ps", "-ww", "-o", "args=", "-p", str(pid)], timeout=15)
            if result.ok and result.stdout.strip():
                out["command"] = " ".join(result.stdout.split())
            if out.get("command", "").startswith(_SHELLS):
                # A start wrapper (the process service's sh): the server is its child.
                children = host.run(["ps", "-ww", "-o", "args=", "--ppid", str(pid)], timeout=15)
                lines = [" ".join(line.split()) for line in children.stdout.splitlines() if line.strip()]
                if children.ok and lines:
                    out["wrapper"] = out["command"]
                    out["command"] = lines[0]
        unit = getattr(service, "unit", None)
        if isinstance(unit, str) and unit.endswith(".service"):
            result = host.run(["systemctl", "show", "-p", "ExecStart", "--value", unit], timeout=15)
            if result.ok:
                out["exec_start"] = " ".join(result.stdout.split())
    except SpecsweepError as exc:
        out["note"] = f"the running command could not be read: {exc}"
    if "command" not in out and "note" not in out:
        out["note"] = "no main process to read the command line of"
    # The command line as the host runs it holds the values of $NAME secret arguments, expanded at the start:
    # every text read back passes the service's redactor before it is kept (provenance.json is 0644).
    redact = getattr(service, "redact", None)
    if callable(redact):
        for key in ("command", "wrapper", "exec_start"):
            if isinstance(out.get(key), str):
                out[key] = redact(out[key])
    return out


class ProvenanceLog:
    """``provenance.json`` of one run, kept up to date as deployments start (thread-safe; each update rewrites
    the file atomically through the store)."""

    def __init__(self, store: Any, experiment_file: str | Path | None) -> None:
        self._store = store
        self._lock = threading.Lock()
        existing = store.read_json(PROVENANCE_FILE) or {}
        self.data: dict[str, Any] = {
            "run": run_provenance(experiment_file),
            "hosts": dict(existing.get("hosts") or {}),
            "deployments": dict(existing.get("deployments") or {}),
        }
        if existing.get("run") and existing["run"] != self.data["run"]:
            self.data["earlier_sessions"] = [*(existing.get("earlier_sessions") or []), existing["run"]]
        self._write()

    def _write(self) -> None:
        with contextlib.suppress(SpecsweepError):  # a full disk ends the run elsewhere; provenance never does
            self._store.write_json(PROVENANCE_FILE, self.data)

    def host(self, name: str, facts: dict[str, Any]) -> None:
        with self._lock:
            self.data["hosts"][name] = facts
            self._write()

    def knows_host(self, name: str) -> bool:
        with self._lock:
            return name in self.data["hosts"] and "gpu" in self.data["hosts"][name]

    def deployment(self, deployment_id: str, entry: dict[str, Any]) -> None:
        with self._lock:
            self.data["deployments"][deployment_id] = entry
            self._write()


def _engine_versions(data: dict[str, Any]) -> set[str]:
    return {
        f"{d.get('engine')} {d.get('engine_version')}"
        for d in (data.get("deployments") or {}).values()
        if isinstance(d, dict)
    }


def provenance_differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """One line per difference between two runs' provenance (none when either has none)."""
    if not a and not b:
        return []  # both made before specsweep kept provenance: nothing to say
    if not a or not b:
        missing = "A" if not a else "B"
        return [f"run {missing} has no provenance.json (made before specsweep kept it): nothing to compare"]
    out: list[str] = []
    ra, rb = a.get("run") or {}, b.get("run") or {}
    for key, name in (
        ("specsweep_version", "specsweep version"),
        ("experiment_sha256", "experiment file"),
        ("python", "Python"),
    ):
        if ra.get(key) != rb.get(key):
            out.append(f"{name}: {ra.get(key)} in A, {rb.get(key)} in B")
    ga, gb = (ra.get("git") or {}).get("commit"), (rb.get("git") or {}).get("commit")
    if ga != gb:
        out.append(f"specsweep git revision: {str(ga)[:12]} in A, {str(gb)[:12]} in B")
    if _engine_versions(a) != _engine_versions(b):
        out.append(
            f"engine: {', '.join(sorted(_engine_versions(a)))} in A, {', '.join(sorted(_engine_versions(b)))} in B"
        )
    hosts_a, hosts_b = a.get("hosts") or {}, b.get("hosts") or {}
    for name in sorted(set(hosts_a) & set(hosts_b)):
        gpu_a, gpu_b = (hosts_a[name] or {}).get("gpu"), (hosts_b[name] or {}).get("gpu")
        for key, what in (
            ("model", "GPU"),
            ("count", "GPU count"),
            ("driver_version", "driver"),
            ("memory_total_mib", "GPU memory"),
        ):
            va = (gpu_a or {}).get(key)
            vb = (gpu_b or {}).get(key)
            if va != vb:
                out.append(f"{name}: {what} {va} in A, {vb} in B")
    commands_a = {d.get("label"): d.get("running", {}).get("command") for d in (a.get("deployments") or {}).values()}
    commands_b = {d.get("label"): d.get("running", {}).get("command") for d in (b.get("deployments") or {}).values()}
    for label in sorted(set(commands_a) & set(commands_b), key=str):
        if commands_a[label] and commands_b[label] and commands_a[label] != commands_b[label]:
            out.append(f"{label}: the command running on the host differs")
    return out
