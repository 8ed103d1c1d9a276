"""A real Slurm cluster on the system-test hosts: one login/controller container (slurmctld) and compute
containers (slurmd), Debian's slurm-wlm and munge, configured, started and stopped here.

Each container is a ``testhost.sh`` host (its own network namespace and address for the controller to reach
it over SSH). The cluster talks over a private bridge in a network namespace of its own
(``specsweep-sl<k>``, 10.232.<k>.0/24, one veth per container): the compute nodes are reachable from the
login node only, never from this machine, as on a real cluster, so the sweep reaches its servers through the
login node's SSH connection (``server.via: ssh``). One directory of this machine is bound into every
container at :data:`SHARED` (the cluster's shared file system: job output files live there).

Facts these machines taught (see issue 18): munged wants /run/munge owned by munge and runs as that user (the
package's unit does both); a GPU GRES on a machine without GPUs registers with ``AutoDetect=off`` and
``File=`` naming fake character devices (``mknod ... c 1 3``); ``select/cons_tres`` without accounting
storage is enough. Slurm counts time limits in whole minutes (sbatch(1), --time), and slurmctld ends a job
that passed its limit only at its next periodic check: here a 1-minute job ended after 60 to 90 s.

By hand (as root): ``python -m tests.system.slurm_cluster up`` prints the cluster and leaves it running;
``python -m tests.system.slurm_cluster down`` stops the ones it booted (their indices are in a state file).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.system.support import LAB_ROOT, SCRIPT, TestHost, cannot_boot_reason, claim_index
from tests.timing import scaled

#: Where the shared directory appears inside every container.
SHARED = "/srv/specsweep-shared"
#: The unprivileged login sweeps submit jobs as (testhost.sh creates it in every container, same uid).
USER = "specsweep-nosudo"
PARTITION = "gpu"
GPUS_PER_NODE = 8


def cannot_run_reason() -> str | None:
    """Why this machine cannot run the Slurm cluster, or None."""
    reason = cannot_boot_reason()
    if reason:
        return reason
    missing = [p for p in ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged") if not os.path.exists(p)]
    if missing:
        return f"missing {', '.join(missing)}: apt-get install slurm-wlm munge (scripts/bootstrap.sh --system)"
    return None


@dataclass
class SlurmCluster:
    """A booted cluster: its login node, its compute nodes, the shared directory and the cluster network."""

    login: TestHost
    computes: list[TestHost]
    shared_host_dir: Path
    netns: str
    subnet: str
    lock_files: list[IO[str]] = field(default_factory=list, repr=False)

    @property
    def hosts(self) -> list[TestHost]:
        return [self.login, *self.computes]

    def address(self, host: TestHost) -> str:
        """The host's address on the cluster network."""
        return f"{self.subnet}.{self.hosts.index(host) + 1}"

    @staticmethod
    def node_name(host: TestHost) -> str:
        return f"specsweep-th{host.index}"

    @property
    def node_names(self) -> list[str]:
        return [self.node_name(h) for h in self.computes]

    def login_spec(self) -> dict[str, Any]:
        """The experiment's ``launcher.login``: the unprivileged user on the login node."""
        return {
            "ssh": f"{USER}@{self.login.guest_ip}",
            "identity_file": self.login.key,
            "known_hosts": self.login.known_hosts,
            "sudo": "never",
            "name": "slurm-login",
        }

    def run(self, script: str, *, check: bool = True, timeout: float = 60) -> str:
        """Run ``script`` as root on the login node (the admin channel, not specsweep's SSH)."""
        return self.login.admin(script, check=check, timeout=timeout).stdout

    def squeue(self) -> list[str]:
        """Every job ``squeue`` lists (its default states: pending, running, completing, ...), ``id|name|state``."""
        out = self.run("squeue -h -a -o '%i|%j|%T'")
        return [line for line in out.splitlines() if line.strip()]

    def jobs(self, name_part: str = "") -> list[dict[str, str]]:
        """``scontrol show job`` of every job the controller still knows (finished ones too, for MinJobAge)."""
        out = self.run("scontrol -o show job 2>/dev/null; true")
        jobs = []
        for line in out.splitlines():
            if not line.startswith("JobId="):
                continue
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
            if name_part in fields.get("JobName", ""):
                jobs.append(fields)
        return jobs

    def cancel_everything(self) -> None:
        """scancel every job (a test's own cleanup, whatever specsweep did), then wait until none is left."""
        self.run("scancel -u " + USER + " 2>/dev/null; scancel -u root 2>/dev/null; true", check=False)
        deadline = time.monotonic() + scaled(60)
        while self.squeue() and time.monotonic() < deadline:
            time.sleep(0.5)

    def wait_nodes_idle(self, timeout: float = 60) -> None:
        """Until every compute node is idle (a test starts from a quiet cluster)."""
        deadline = time.monotonic() + scaled(timeout)
        while True:
            states = self.run(f"sinfo -h -N -p {PARTITION} -o '%N %t'").split()
            if states and all(s in ("idle",) for s in states[1::2]):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"nodes not idle: {states}")
            time.sleep(0.5)

    def tail_logs(self) -> str:
        """The daemons' journals, for a failing test's report."""
        parts = [self.login.admin("journalctl -u slurmctld --no-pager -n 40", check=False).stdout]
        for host in self.computes:
            parts.append(host.admin("journalctl -u slurmd --no-pager -n 20", check=False).stdout)
        return "\n".join(parts)


def _slurm_conf(cluster: SlurmCluster) -> str:
    login = cluster.login
    nodes = "\n".join(
        f"NodeName={cluster.node_name(h)} NodeAddr={cluster.address(h)} CPUs=2 RealMemory=1000 "
        f"Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN"
        for h in cluster.computes
    )
    return f"""# written by specsweep's system tests (tests/system/slurm_cluster.py)
ClusterName=specsweep-test
SlurmctldHost={cluster.node_name(login)}({cluster.address(login)})
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SwitchType=switch/none
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldTimeout=10
SlurmdTimeout=30
MessageTimeout=5
KillWait=3
OverTimeLimit=0
MinJobAge=300
InactiveLimit=0
Waittime=0
{nodes}
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _gres_conf(cluster: SlurmCluster) -> str:
    last = GPUS_PER_NODE - 1
    return "AutoDetect=off\n" + "".join(
        f"NodeName={cluster.node_name(h)} Name=gpu File=/dev/specsweep-fakegpu[0-{last}]\n" for h in cluster.computes
    )


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _network_up(cluster: SlurmCluster) -> None:
    """The cluster's private bridge (its own namespace) and one veth into each container's namespace."""
    ns = cluster.netns
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    _ip("netns", "add", ns)
    _ip("-n", ns, "link", "set", "lo", "up")
    _ip("-n", ns, "link", "add", "br0", "type", "bridge")
    _ip("-n", ns, "link", "set", "br0", "up")
    for position, host in enumerate(cluster.hosts):
        guest_ns = host.info["netns"]
        port = f"p{position}"
        subprocess.run(["ip", "-n", guest_ns, "link", "del", "cl0"], capture_output=True)
        _ip("link", "add", "name", port, "netns", ns, "type", "veth", "peer", "name", "cl0", "netns", guest_ns)
        _ip("-n", ns, "link", "set", port, "master", "br0")
        _ip("-n", ns, "link", "set", port, "up")
        _ip("-n", guest_ns, "addr", "add", f"{cluster.address(host)}/24", "dev", "cl0")
        _ip("-n", guest_ns, "link", "set", "cl0", "up")


def _configure(cluster: SlurmCluster) -> None:
    key = secrets.token_hex(64)
    hosts_lines = "".join(f"{cluster.address(h)} {cluster.node_name(h)}\n" for h in cluster.hosts)
    conf = _slurm_conf(cluster)
    gres = _gres_conf(cluster)
    for host in cluster.hosts:
        compute = host is not cluster.login
        devices = (
            "".join(f"mknod -m 666 /dev/specsweep-fakegpu{i} c 1 3\n" for i in range(GPUS_PER_NODE)) if compute else ""
        )
        host.admin(
            "set -e\n"
            "systemctl stop slurmd slurmctld munge 2>/dev/null || true\n"
            # testhost.sh masks the daemons (every host overlays this machine's /, where they are installed).
            "rm -f /etc/systemd/system/munge.service /etc/systemd/system/slurmd.service "
            "/etc/systemd/system/slurmctld.service\n"
            "systemctl daemon-reload\n"
            # The names of every node, on every node (slurmd and sshd's direct-tcpip resolve them here).
            f"grep -v specsweep-th /etc/hosts > /etc/hosts.new || true\n"
            f"cat >> /etc/hosts.new <<'EOF'\n{hosts_lines}EOF\n"
            "cat /etc/hosts.new > /etc/hosts; rm -f /etc/hosts.new\n"
            f"printf %s {key} | xxd -r -p > /etc/munge/munge.key 2>/dev/null || "
            f"python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(sys.argv[1]))' {key} "
            "> /etc/munge/munge.key\n"
            "chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key\n"
            "mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm\n"
            "chown slurm:slurm /var/spool/slurmctld /var/log/slurm\n"
            f"cat > /etc/slurm/slurm.conf <<'EOF'\n{conf}EOF\n"
            f"cat > /etc/slurm/gres.conf <<'EOF'\n{gres}EOF\n"
            f"{devices}"
            f"chmod 1777 {SHARED}\n"
            "systemctl start munge\n" + ("systemctl start slurmd\n" if compute else "systemctl start slurmctld\n"),
            timeout=120,
        )


def _boot(index: int, lock_file: IO[str], shared: Path) -> TestHost:
    env = {
        **os.environ,
        "TESTHOST_INDEX": str(index),
        "TESTHOST_ROOT": str(LAB_ROOT),
        "TESTHOST_BIND": f"{shared}:{SHARED}",
    }
    up = subprocess.run([str(SCRIPT), "up"], env=env, capture_output=True, text=True, timeout=scaled(240))
    if up.returncode != 0:
        subprocess.run([str(SCRIPT), "down"], env=env, capture_output=True, timeout=scaled(120))
        raise RuntimeError(f"testhost {index} did not boot:\n{up.stdout}\n{up.stderr}")
    info_out = subprocess.run([str(SCRIPT), "info"], env=env, capture_output=True, text=True, check=True).stdout
    info = dict(line.split("=", 1) for line in info_out.splitlines() if "=" in line)
    return TestHost(index=index, info=info, lock_file=lock_file)


def boot_cluster(computes: int = 2) -> SlurmCluster:
    """Boot a login node and ``computes`` compute nodes, configure Slurm, and wait until every node is idle.
    Whatever was started is stopped again when booting fails."""
    booted: list[TestHost] = []
    locks: list[IO[str]] = []
    shared: Path | None = None
    netns = ""
    try:
        start = 0
        for _ in range(computes + 1):
            index, lock_file = claim_index(start)
            locks.append(lock_file)
            start = index + 1
            if shared is None:
                shared = LAB_ROOT / f"slurm-{index}" / "shared"
                shutil.rmtree(shared.parent, ignore_errors=True)
                shared.mkdir(parents=True)
                shared.chmod(0o1777)
                netns = f"specsweep-sl{index}"
            booted.append(_boot(index, lock_file, shared))
        assert shared is not None
        cluster = SlurmCluster(
            login=booted[0],
            computes=booted[1:],
            shared_host_dir=shared,
            netns=netns,
            subnet=f"10.232.{booted[0].index}",
            lock_files=locks,
        )
        _network_up(cluster)
        _configure(cluster)
        try:
            cluster.wait_nodes_idle(timeout=90)
        except AssertionError as exc:
            raise RuntimeError(f"{exc}\n{cluster.tail_logs()}") from exc
        return cluster
    except BaseException:
        _tear_down(booted, netns, shared, locks)
        raise


def _tear_down(hosts: list[TestHost], netns: str, shared: Path | None, locks: list[IO[str]]) -> None:
    for host in hosts:
        with contextlib.suppress(Exception):
            host.admin("systemctl stop slurmd slurmctld munge", check=False, timeout=30)
        subprocess.run([str(SCRIPT), "down"], env=host.env(), capture_output=True, timeout=scaled(120))
    if netns:
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)
    if shared is not None:
        shutil.rmtree(shared.parent, ignore_errors=True)
    for lock in locks:
        with contextlib.suppress(OSError):
            lock.close()


def shut_down_cluster(cluster: SlurmCluster) -> None:
    """Stop every daemon and container of the cluster and remove its network and shared directory."""
    _tear_down(cluster.hosts, cluster.netns, cluster.shared_host_dir, cluster.lock_files)


# -- by hand ---------------------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """``up``: boot a cluster, print it as JSON (one line), hold it until SIGTERM or SIGINT, then stop it."""
    import signal

    if (argv or ["up"])[0] != "up":
        print("usage: python -m tests.system.slurm_cluster up   (stop it with SIGTERM)", file=sys.stderr)
        return 2
    reason = cannot_run_reason()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    cluster = boot_cluster()
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    try:
        print(
            json.dumps(
                {
                    "indices": [h.index for h in cluster.hosts],
                    "login_ip": cluster.login.guest_ip,
                    "netns": cluster.netns,
                    "shared": str(cluster.shared_host_dir),
                    "login": cluster.login_spec(),
                    "nodes": cluster.node_names,
                }
            ),
            flush=True,
        )
        while not stopping:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        shut_down_cluster(cluster)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
