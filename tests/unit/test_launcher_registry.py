"""The launcher seam: launchers registered by kind, the experiment naming its kind, the protocol's defaults, and
the ``launcher:`` specs found in ``experiment/launcherspecs/`` (issue 51)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.experiment.launcherspecs import launcher_kinds
from orchestrator.launchers import Launcher, LauncherKind, launcher_for, launcher_kind, register_launcher
from orchestrator.launchers.gpuslots import GpuSlotLauncher
from orchestrator.launchers.hosts import HostServer, HostSlot, LocalLauncher, SSHPoolLauncher
from orchestrator.launchers.registry import kind_of, launcher_kind_names
from orchestrator.launchers.slurm.launcher import SlurmLauncher
from orchestrator.plan.deployments import build_plan
from tests.unit.launch_fakes import FakeLauncher, FakeSlot, make_experiment


@pytest.mark.parametrize(
    ("hosts", "kind", "cls"),
    [
        pytest.param("host: local", "local", LocalLauncher, id="local"),
        pytest.param('hosts: [{ssh: "root@a"}, {ssh: "root@b"}]', "ssh", SSHPoolLauncher, id="ssh-pool"),
        pytest.param("host: {kind: local, gpus: 1}", "gpu-slots", GpuSlotLauncher, id="gpu-slots"),
    ],
)
def test_launcher_for_picks_the_launcher_by_the_experiments_kind(
    tmp_path: Path, hosts: str, kind: str, cls: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = make_experiment(tmp_path, hosts=hosts)
    assert exp.launcher_kind == kind
    assert kind_of(exp).kind == kind
    launcher = launcher_for(exp, lock_label="fake r1", plan=build_plan(exp))
    assert isinstance(launcher, cls) and isinstance(launcher, Launcher)


def test_a_slurm_experiment_gets_the_slurm_launcher(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path, hosts="launcher: {kind: slurm, partition: gpu}")
    assert exp.launcher_kind == "slurm"
    assert isinstance(launcher_for(exp, lock_label="fake r1"), SlurmLauncher)


def test_every_builtin_kind_is_registered_and_an_unknown_one_is_a_clear_error() -> None:
    names = launcher_kind_names()
    for name in ("local", "ssh", "gpu-slots", "slurm"):
        assert name in names and launcher_kind(name).kind == name
    with pytest.raises(ConfigError, match="no launcher of kind 'nope'"):
        launcher_kind("nope")
    assert "slurm" in launcher_kinds()  # the launcher: specs, found in experiment/launcherspecs/


def test_a_kind_registered_from_outside_is_what_launcher_for_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[dict[str, Any]] = []

    class Mine(LauncherKind):
        kind = "local"

        def make(self, experiment: Any, **how: Any) -> Launcher:
            made.append(how)
            return FakeLauncher(FakeSlot("mine"))

    from orchestrator.launchers import registry

    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    register_launcher(Mine())
    launcher = launcher_for(make_experiment(tmp_path), lock_label="fake r7")
    assert [s.name for s in launcher.slots()] == ["mine"]
    assert made == [{"plan": None, "run_id": "r7", "lock_label": "fake r7", "break_lock": False}]


def test_the_protocol_defaults_are_there_for_every_launcher(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path)
    launcher = launcher_for(exp, lock_label="fake r1")
    assert launcher.layout is None
    assert launcher.expect([]) is None
    (slot,) = launcher.slots()
    assert isinstance(slot, HostSlot) and slot.blocked is False and slot.failure_placement() is None
    server = HostServer("http://x", object())  # type: ignore[arg-type]
    assert server.placement is None and server.host is None
    gpu = make_experiment(tmp_path, hosts="host: {kind: local, gpus: 1}")
    slots = launcher_for(gpu, lock_label="fake r1").slots()
    assert launcher_for(gpu, lock_label="fake r1").layout is not None
    placement = slots[0].failure_placement()
    assert placement is not None and placement["gpus"] == [0]


def test_a_kinds_defaults_describe_restore_and_check_nothing() -> None:
    kind = LauncherKind()
    assert kind.restore(None, break_lock=False, dry_run=True, progress=None) == []  # type: ignore[arg-type]
    assert kind.doctor(None, progress=None) == []  # type: ignore[arg-type]
    assert kind.dry_run(None, None) is None  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError):
        kind.make(None, plan=None, run_id="r", lock_label="x", break_lock=False)  # type: ignore[arg-type]


def test_no_module_outside_a_launchers_own_files_names_kubernetes() -> None:
    """Adding the Kubernetes launcher touched only launchers/ and its spec (issue 51): no other module of the
    package knows it is there."""
    root = Path(__file__).resolve().parents[2] / "orchestrator"
    own = (root / "launchers", root / "experiment" / "launcherspecs")
    naming = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if not any(path.is_relative_to(d) for d in own)
        and any(word in path.read_text().lower() for word in ("kubernetes", "kubectl"))
    ]
    assert naming == []


def test_an_unknown_placeholder_names_the_launchers_that_fill_it(tmp_path: Path) -> None:
    from orchestrator.experiment.schema import load_experiment

    make_experiment(tmp_path)  # writes fake.yaml
    path = tmp_path / "fake.yaml"
    path.write_text(path.read_text().replace('url: "http://{host}:9000"', 'url: "http://{node}:9000"'))
    with pytest.raises(ConfigError) as found:
        load_experiment(path)
    assert "may only use {host} (and {node} with a Slurm launcher)" in str(found.value)


def test_the_gpu_slots_kind_checks_the_declared_gpus_and_the_plain_hosts_kind_does_not(tmp_path: Path) -> None:
    from orchestrator.launchers.doctor import run_doctor

    (plain,) = run_doctor(make_experiment(tmp_path))
    (slots,) = run_doctor(make_experiment(tmp_path, hosts="host: {kind: local, gpus: 1}"))
    assert "gpu slots" not in {c.name for c in plain.checks}
    assert "gpu slots" in {c.name for c in slots.checks}


_LOADED = """
import sys
import orchestrator.launchers as launchers
for name in sys.argv[1:]:
    launchers.launcher_kind(name)
print(" ".join(sorted(m for m in sys.modules if m.startswith("orchestrator.launchers"))))
"""

#: The scheduler kinds' packages and their shared base: none of them is loaded until a kind is asked for.
_SCHEDULER_PARTS = ("slurm", "kubernetes", "scheduler")


def _loaded_after(*kinds: str) -> set[str]:
    """The launcher modules a fresh interpreter holds after importing ``orchestrator.launchers`` and asking for
    ``kinds``."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-c", _LOADED, *kinds], capture_output=True, text=True, check=True, env=env, cwd=root
    )
    return set(proc.stdout.split())


@pytest.mark.parametrize(
    ("kinds", "loaded"),
    [
        pytest.param((), set(), id="none-asked"),
        pytest.param(("local",), set(), id="hosts-asked"),
        pytest.param(
            ("slurm",), {"slurm", "slurm.jobs", "slurm.kind", "slurm.launcher", "scheduler"}, id="slurm-asked"
        ),
        pytest.param(
            ("kubernetes",),
            {"kubernetes", "kubernetes.jobs", "kubernetes.kind", "kubernetes.launcher", "scheduler"},
            id="kubernetes-asked",
        ),
    ],
)
def test_a_scheduler_kind_loads_only_when_asked_for(kinds: tuple[str, ...], loaded: set[str]) -> None:
    modules = _loaded_after(*kinds)
    assert "orchestrator.launchers.registry" in modules  # the child did import the package
    schedulers = {m for m in modules if m.split(".")[2:3] and m.split(".")[2] in _SCHEDULER_PARTS}
    assert schedulers == {f"orchestrator.launchers.{m}" for m in loaded}


def test_the_scheduler_kinds_share_one_base_and_copy_none_of_it() -> None:
    """Slurm and Kubernetes differ only in what their scheduler does (issue 61): the slot, the wait for a running
    job, the evidence, the release and the slots' shared open and close are the base's, not a kind's copy."""
    from orchestrator.launchers.kubernetes.launcher import KubernetesLauncher, KubernetesServer
    from orchestrator.launchers.scheduler import SchedulerLauncher, SchedulerServer
    from orchestrator.launchers.slurm.launcher import SlurmJobServer, SlurmLauncher

    for server in (SlurmJobServer, KubernetesServer):
        assert issubclass(server, SchedulerServer)
        assert not {"start", "wait_running", "alive", "evidence", "release"} & set(vars(server)), server
    for launcher in (SlurmLauncher, KubernetesLauncher):
        assert issubclass(launcher, SchedulerLauncher)
        assert not {"slots", "open_slot", "close_slot"} & set(vars(launcher)), launcher
