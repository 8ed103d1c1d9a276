"""What specsweep keeps on a host between its own commands: the lock and the marker, as small JSON files.

The lock (``<state_dir>/<service>.lock``) says which specsweep run drives the service: controller host name,
boot id, pid and the pid's start time, user, label, time, and a random token. It is written whole to a
temporary file and then hard-linked to its name (``ln`` fails when the name exists), so two runs can never both
take it and a controller killed mid-write leaves no empty lock. A lock is *stale* when it
provably belongs to a dead run: same controller and the pid is gone (or is another process now), or the
controller has rebooted since. A lock of another controller is never broken on a guess; ``break_lock=True``
(``--break-lock``) breaks it on the user's word.

The marker (``<state_dir>/<service>.marker.json``) is the Service's record of what it found before its first
change; its content is the Service's business. Both are read and written through the Host, so they work the
same over SSH (with sudo) and locally.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import getpass
import json
import os
import secrets
import socket
from typing import Any

from orchestrator.errors import HostLockedError, ServiceError
from orchestrator.hosts.base import Host
from orchestrator.quoting import shell_quote

__all__ = ["HostLock", "controller_identity", "lock_is_stale", "read_json", "write_json"]


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _pid_start(pid: int) -> str:
    """The start time of ``pid`` in clock ticks since boot (field 22 of /proc/PID/stat), or ""."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return ""
    # The command name (field 2) may contain spaces and parentheses: split after its closing parenthesis.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def controller_identity() -> dict[str, Any]:
    """Who is driving: this controller and process."""
    pid = os.getpid()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {
        "controller": socket.gethostname(),
        "boot_id": _boot_id(),
        "pid": pid,
        "pid_start": _pid_start(pid),
        "user": user,
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def lock_is_stale(info: dict[str, Any]) -> tuple[bool, str]:
    """Whether a lock provably belongs to a dead run, and why (or why not)."""
    if info.get("controller") != socket.gethostname():
        return False, f"held by a run on another controller ({info.get('controller', '?')})"
    boot = info.get("boot_id") or ""
    if boot and _boot_id() and boot != _boot_id():
        return True, "the controller has rebooted since"
    pid = info.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True, "it names no process"
    start = _pid_start(pid)
    if not start:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True, f"process {pid} is gone"
        except PermissionError:
            pass
        return False, f"process {pid} is alive"
    if info.get("pid_start") and start != info.get("pid_start"):
        return True, f"process {pid} is gone (the pid now belongs to another process)"
    return False, f"process {pid} is alive"


def read_json(host: Host, path: str) -> dict[str, Any] | None:
    """A JSON object from ``path`` on the host; None when the file does not exist."""
    result = host.run(f"cat -- {shell_quote(path)} 2>/dev/null || echo '<missing>'")
    text = result.stdout.strip()
    if text == "<missing>":
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ServiceError(f"{host.name}: {path} is not valid JSON ({exc}); remove it by hand") from exc
    if not isinstance(value, dict):
        raise ServiceError(f"{host.name}: {path} does not hold a JSON object; remove it by hand")
    return value


def write_json(host: Host, path: str, value: dict[str, Any]) -> None:
    host.write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n", 0o644)


# The lock is made whole or not at all: its content goes to a temporary file first, and only when every byte
# arrived is the file hard-linked to the lock's name (``ln`` fails when the lock exists, so taking it stays
# exclusive, as ``set -C`` was). A controller killed mid-write (issue 49) leaves no empty lock for the next
# run's resume to call unreadable; its temporary file goes with the shell's EXIT trap, else ``restore``'s.
_ACQUIRE = """mkdir -p -- {dir}
t=$(mktemp -- {lock}.specsweep-XXXXXX) || {{ echo "cannot write in {dir}" >&2; exit 73; }}
trap 'rm -f -- "$t"' EXIT
cat > "$t"
n=$(wc -c < "$t")
[ "$n" -eq {size} ] || {{ echo "only $n of {size} bytes arrived: the lock {lock} not taken" >&2; exit 75; }}
chmod 644 -- "$t"
if ln -- "$t" {lock} 2>/dev/null; then echo acquired; else echo held; cat -- {lock} 2>/dev/null; fi
"""


class HostLock:
    """An exclusive lock file on a host (see the module docstring)."""

    def __init__(self, host: Host, path: str, *, service: str) -> None:
        self.host = host
        self.path = path
        self.service = service
        self.token: str | None = None

    @property
    def held(self) -> bool:
        return self.token is not None

    def read(self) -> dict[str, Any] | None:
        try:
            return read_json(self.host, self.path)
        except ServiceError:
            return {"corrupt": True}

    def acquire(self, label: str, *, break_lock: bool = False) -> None:
        """Take the lock, breaking a stale one; HostLockedError when a live run (or an unknown one) holds it."""
        if self.token is not None:
            return
        token = secrets.token_hex(8)
        info = {**controller_identity(), "label": label, "token": token, "service": self.service}
        directory = os.path.dirname(self.path)
        content = json.dumps(info, sort_keys=True) + "\n"
        script = _ACQUIRE.format(dir=shell_quote(directory), lock=shell_quote(self.path), size=len(content.encode()))
        for _ in range(3):
            result = self.host.run(script, input=content)
            head, _, rest = result.stdout.partition("\n")
            if head.strip() == "acquired":
                self.token = token
                return
            if head.strip() != "held":
                result.check(f"taking the lock {self.path}", host=self.host.name)
                raise ServiceError(f"{self.host.name}: unexpected answer taking the lock {self.path}: {head!r}")
            try:
                holder = json.loads(rest) if rest.strip() else {}
            except json.JSONDecodeError:
                holder = {}
            if holder.get("token") == token:  # our own creation, seen again after a retried command
                self.token = token
                return
            stale, why = lock_is_stale(holder) if holder else (False, "the lock file is unreadable")
            if not (stale or break_lock):
                who = (
                    f"{holder.get('label', '?')} (pid {holder.get('pid', '?')} on {holder.get('controller', '?')}, "
                    f"user {holder.get('user', '?')}, since {holder.get('started', '?')})"
                    if holder
                    else "an unknown run"
                )
                raise HostLockedError(
                    f"{self.service} is driven by another specsweep run: {who}; {why}. If that run is dead, "
                    f"break the lock with --break-lock (or remove {self.path})",
                    host=self.host.name,
                )
            self._remove_if(holder.get("token"))
        raise HostLockedError(f"could not take the lock {self.path} (it keeps coming back)", host=self.host.name)

    def _remove_if(self, token: str | None) -> None:
        """Remove the lock file only if it still holds ``token`` (so a lock taken meanwhile survives)."""
        if token:
            script = f"grep -qF {shell_quote(token)} {shell_quote(self.path)} && rm -f -- {shell_quote(self.path)}"
        else:
            script = f"rm -f -- {shell_quote(self.path)}"
        self.host.run(script + "; true")

    def release(self) -> None:
        """Remove the lock if it is ours; the state directory too when that leaves it empty."""
        if self.token is None:
            return
        token, self.token = self.token, None
        with contextlib.suppress(ServiceError):
            self._remove_if(token)
        self.host.run(f"rmdir -- {shell_quote(os.path.dirname(self.path))} 2>/dev/null; true")
