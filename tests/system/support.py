"""Helpers for the system tests: a booted test host (testhost.sh), its out-of-band admin channel, and
snapshots of what a Service must leave unchanged.

The admin channel is the OpenSSH client through ``testhost.sh ssh``: independent of the code under test, so
assertions about the host never trust specsweep's own SSH layer.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from orchestrator.hosts import SSHHost
from orchestrator.plan.deployments import Deployment
from tests.timing import scaled

SCRIPT = Path(__file__).with_name("testhost.sh")
LAB_ROOT = Path(os.environ.get("TESTHOST_ROOT", "/tmp/specsweep-testhost"))
PYTHON = sys.executable  # the checkout's virtualenv: the container sees it through the overlay


def cannot_boot_reason() -> str | None:
    """Why this machine cannot boot a test host, or None when it can."""
    if sys.platform != "linux":
        return "the test host needs Linux"
    if os.geteuid() != 0:
        return "the test host needs root (systemd-nspawn, network namespaces)"
    missing = [tool for tool in ("systemd-nspawn", "ip", "ssh", "ssh-keygen") if shutil.which(tool) is None]
    if not os.path.exists("/usr/sbin/sshd"):
        missing.append("sshd")
    if missing:
        return f"missing {', '.join(missing)}: apt-get install systemd-container openssh-server iproute2"
    return None


@dataclass
class TestHost:
    """One booted host: address, keys, and an admin channel."""

    __test__ = False  # not a test class, whatever its name says

    index: int
    info: dict[str, str]
    lock_file: IO[str] | None = field(default=None, repr=False)

    @property
    def guest_ip(self) -> str:
        return self.info["guest_ip"]

    @property
    def key(self) -> str:
        return self.info["key"]

    @property
    def known_hosts(self) -> str:
        return self.info["known_hosts"]

    @property
    def lab(self) -> Path:
        return Path(self.info["lab"])

    def env(self) -> dict[str, str]:
        return {**os.environ, "TESTHOST_INDEX": str(self.index), "TESTHOST_ROOT": str(LAB_ROOT)}

    def admin(self, script: str, *, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run ``script`` as root on the host through the OpenSSH client (not through specsweep); ``timeout`` is
        the quiet machine's limit, scaled (tests/timing.py)."""
        result = subprocess.run(
            [str(SCRIPT), "ssh", script], env=self.env(), capture_output=True, text=True, timeout=scaled(timeout)
        )
        if check and result.returncode != 0:
            raise AssertionError(f"admin command failed ({result.returncode}): {script}\n{result.stderr}")
        return result

    def ssh(self, user: str = "root", **overrides: Any) -> SSHHost:
        """specsweep's SSHHost for this host (as ``user``: root, or one of testhost.sh's unprivileged logins
        ``specsweep-sudo`` and ``specsweep-nosudo``), with the fixture's key and known_hosts."""
        options: dict[str, Any] = {
            "identity_file": self.key,
            "known_hosts": self.known_hosts,
            "connect_timeout": 5.0,
            "command_timeout": 30.0,
            "name": f"testhost{self.index}",
        }
        options.update(overrides)
        return SSHHost(f"{user}@{self.guest_ip}", **options)


def _subnet_taken(index: int) -> bool:
    """Another interface (someone else's) already uses this index's subnet."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    prefix = f"10.231.{100 + index}."
    ours = f"ssth{index}h"
    return any(prefix in line and ours not in line for line in out.splitlines())


def claim_index(start: int = 0) -> tuple[int, IO[str]]:
    """A free host index, held by an flock for as long as the returned file stays open."""
    LAB_ROOT.mkdir(parents=True, exist_ok=True)
    for index in range(start, 100):
        fh = open(LAB_ROOT / f"{index}.lock", "w")  # noqa: SIM115 -- held open for the whole session
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue
        if _subnet_taken(index):
            fh.close()
            continue
        return index, fh
    raise RuntimeError("no free test host index (0..99)")


def boot(index: int, lock_file: IO[str]) -> TestHost:
    env = {**os.environ, "TESTHOST_INDEX": str(index), "TESTHOST_ROOT": str(LAB_ROOT)}
    up = subprocess.run([str(SCRIPT), "up"], env=env, capture_output=True, text=True, timeout=scaled(240))
    if up.returncode != 0:
        subprocess.run([str(SCRIPT), "down"], env=env, capture_output=True, timeout=scaled(120))
        raise RuntimeError(f"testhost {index} did not boot:\n{up.stdout}\n{up.stderr}")
    info_out = subprocess.run([str(SCRIPT), "info"], env=env, capture_output=True, text=True, check=True).stdout
    info = dict(line.split("=", 1) for line in info_out.splitlines() if "=" in line)
    return TestHost(index=index, info=info, lock_file=lock_file)


def shut_down(host: TestHost) -> None:
    try:
        subprocess.run([str(SCRIPT), "down"], env=host.env(), capture_output=True, timeout=scaled(120))
    finally:
        if host.lock_file is not None:
            with contextlib.suppress(OSError):
                host.lock_file.close()


# -- what a Service must leave as it found ------------------------------------------------------------------

#: What a run may change on a host: unit files and drop-ins, specsweep's markers and backups.
CHANGED_DIRS = ("etc/systemd/system", "var/lib/specsweep")
#: Where specsweep keeps a run's secret environment files (a tmpfs in the guest, so not in the overlay).
SECRET_DIR = "/run/specsweep"


def changed_files(host: TestHost) -> str:
    """Every path the host has changed under /etc/systemd/system and /var/lib/specsweep since it booted, with
    type, mode, symlink target and content hash.

    Read from the overlay's upper layer, which holds exactly what the guest wrote (deletions as whiteouts):
    unlike a listing of the merged tree, it cannot be disturbed by the controller's own /etc changing
    underneath (the lower layer is this machine's /, shared with whoever else works here: a package installed
    meanwhile adds units there).
    """
    upper = host.lab / "ovl" / "upper"
    script = (
        'cd "$0" || exit 1; for d in ' + " ".join(CHANGED_DIRS) + '; do [ -e "$d" ] || continue; '
        'find "$d" -printf \'%p %y %m %l\\n\'; find "$d" -type f -exec sha256sum {} +; done | sort'
    )
    return subprocess.run(["sh", "-c", script, str(upper)], capture_output=True, text=True, check=True).stdout


def secret_files(host: TestHost) -> str:
    """What the guest holds under specsweep's secret directory (names, modes, sizes; never the content)."""
    return host.admin(f"cd {SECRET_DIR} 2>/dev/null && find . -printf '%p %y %m %s\\n' | sort; true").stdout


_UNIT_PROPERTIES = "ActiveState,SubState,LoadState,UnitFileState,FragmentPath,DropInPaths,Environment,ExecStart"


def etc_snapshot(host: TestHost) -> str:
    """What the guest changed under /etc/systemd/system and /var/lib/specsweep (from the overlay's upper layer:
    :func:`changed_files`), and its secret directory."""
    return changed_files(host) + "--- secrets\n" + secret_files(host)


def unit_snapshot(host: TestHost, unit: str) -> dict[str, str]:
    """The unit's state and configuration as systemd sees it (ExecStart reduced to its argv)."""
    out = host.admin(f"systemctl show {unit} -p {_UNIT_PROPERTIES}").stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    exec_start = values.get("ExecStart", "")
    if "argv[]=" in exec_start:
        values["ExecStart"] = exec_start.split("argv[]=", 1)[1].split(" ;", 1)[0]
    return values


def sim_command(port: int, *extra: str, load_seconds: float = 0.5) -> str:
    return (
        f"{PYTHON} -m orchestrator.sim --host 0.0.0.0 --port {port} --profile tiny "
        f"--load-seconds {load_seconds:g} " + " ".join(extra)
    ).strip()


def deployment(command: str | None, *, id: str = "d-test", environment: dict[str, str] | None = None) -> Deployment:
    return Deployment(
        id=id,
        variant="test",
        command=command,
        environment=environment or {},
        config_hash=f"c-{id}",
        load_points=[],
    )


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns something truthy (a test helper, not a timed assertion)."""
    import time

    deadline = time.monotonic() + scaled(timeout)
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)
