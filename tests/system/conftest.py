"""System-test fixtures: real systemd + journald + sshd hosts booted with ``testhost.sh``.

Hosts boot lazily, once per session, each on its own index (lab dir, machine, netns, veth, subnet) claimed
with an flock so parallel sessions on one machine never collide, and are always torn down at the end, tests
failing or not. Where the machine cannot boot a host (not root, no systemd-nspawn or sshd) every test here
skips, saying why.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.system.support import (
    TestHost,
    boot,
    cannot_boot_reason,
    claim_index,
    shut_down,
    sim_command,
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/system/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.system)


class HostPool:
    """Boots test hosts on first use and shuts every one of them down at the end of the session."""

    def __init__(self) -> None:
        self.hosts: list[TestHost] = []

    def get(self, position: int) -> TestHost:
        reason = cannot_boot_reason()
        if reason:
            pytest.skip(reason)
        while len(self.hosts) <= position:
            start = self.hosts[-1].index + 1 if self.hosts else 0
            index, lock_file = claim_index(start)
            try:
                self.hosts.append(boot(index, lock_file))
            except BaseException:
                lock_file.close()
                raise
        return self.hosts[position]

    def close(self) -> None:
        for host in self.hosts:
            shut_down(host)
        self.hosts.clear()


@pytest.fixture(scope="session")
def testhost_pool() -> Iterator[HostPool]:
    pool = HostPool()
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(scope="session")
def testhost(testhost_pool: HostPool) -> TestHost:
    """The first test host of the session."""
    return testhost_pool.get(0)


@pytest.fixture(scope="session")
def testhost_pair(testhost_pool: HostPool) -> tuple[TestHost, TestHost]:
    """Two test hosts side by side (a host pool)."""
    return testhost_pool.get(0), testhost_pool.get(1)


@dataclass
class SimUnit:
    """A simulator unit installed on the test host, stopped, with its original ExecStart."""

    host: TestHost
    unit: str
    port: int
    command: str

    @property
    def url(self) -> str:
        return f"http://{self.host.guest_ip}:{self.port}"


_counter = itertools.count(1)


def install_sim_unit(host: TestHost, *, running: bool = False, command: str | None = None) -> SimUnit:
    """``command``: the unit's original ExecStart (the simulator on the unit's port unless given)."""
    n = next(_counter)
    unit = f"specsweep-sim{n}.service"
    port = 30000 + n
    command = command or sim_command(port)
    text = f"[Unit]\nDescription=specsweep test simulator {n}\n\n[Service]\nExecStart={command}\n"
    host.admin(
        f"cat > /etc/systemd/system/{unit} <<'EOF'\n{text}EOF\nsystemctl daemon-reload"
        + (f" && systemctl start {unit}" if running else "")
    )
    return SimUnit(host=host, unit=unit, port=port, command=command)


def remove_sim_unit(sim: SimUnit) -> None:
    u = sim.unit
    sim.host.admin(
        f"systemctl stop {u}; rm -rf /etc/systemd/system/{u} /etc/systemd/system/{u}.d "
        f"/var/lib/specsweep/{u}.*; rmdir /var/lib/specsweep 2>/dev/null; systemctl daemon-reload; "
        f"systemctl reset-failed {u} 2>/dev/null; true",
        check=False,
    )


@pytest.fixture
def sim_unit(testhost: TestHost) -> Iterator[SimUnit]:
    """A fresh, stopped simulator unit on the test host; removed afterwards whatever the test did."""
    sim = install_sim_unit(testhost)
    try:
        yield sim
    finally:
        remove_sim_unit(sim)


@pytest.fixture
def running_sim_unit(testhost: TestHost) -> Iterator[SimUnit]:
    """A simulator unit that is running its original configuration when the test starts."""
    sim = install_sim_unit(testhost, running=True)
    try:
        yield sim
    finally:
        remove_sim_unit(sim)
