"""A drop-in specsweep wrote for a systemd unit whose marker is gone (a controller killed while it wrote the
marker, the marker removed by hand): ``restore`` finds it by its file name and first line and undoes it
(issue 49). At the host interface: the commands the service runs on a scripted host."""

from __future__ import annotations

from orchestrator.hosts.base import CommandResult
from orchestrator.plan.deployments import Deployment
from orchestrator.services import SystemdService
from orchestrator.services.systemd import render_dropin
from tests.unit.test_services import ScriptedHost, dep

MISSING = CommandResult(0, "<missing>\n", "")  # read_json's answer for a file that is not there


def _host(dropin_text: str) -> ScriptedHost:
    first = dropin_text.splitlines()[0] + "\n" if dropin_text else ""
    return ScriptedHost([("head -n 1 --", CommandResult(0, first, "")), ("cat --", MISSING)])


def _ours() -> tuple[Deployment, str]:
    deployment = dep("/opt/venv/bin/python -m sglang.launch_server --port 30000")
    return deployment, render_dropin(deployment)


def test_a_dropin_of_ours_without_its_marker_is_found_and_removed_and_the_unit_stopped() -> None:
    deployment, text = _ours()
    host = _host(text)
    service = SystemdService(host, "sglang")
    leftover = service.find_leftovers()
    assert leftover is not None and leftover.marker is None and leftover.lock is None
    assert service.dropin_path in leftover.files
    assert deployment.id in leftover.detail and "without its marker" in leftover.detail
    host.commands.clear()
    assert service.restore() is True
    script = "\n".join(host.commands)
    assert "systemctl stop sglang.service" in script
    assert f"rm -f -- {service.dropin_path}" in script
    assert "systemctl daemon-reload" in script
    assert f"rm -rf -- {service.backup_dir}" in script  # the killed run's copies go too
    assert script.index("systemctl stop") < script.index("rm -f --")  # stopped while our drop-in describes it


def test_the_next_run_undoes_it_too_before_it_records_the_units_state() -> None:
    _deployment, text = _ours()
    host = _host(text)
    assert SystemdService(host, "sglang").recover() is not None
    assert any("rm -f -- /etc/systemd/system/sglang.service.d/50-specsweep.conf" in c for c in host.commands)


def test_a_dropin_someone_else_wrote_under_our_name_is_left_alone() -> None:
    for text in ("[Service]\nExecStart=\nExecStart=/bin/their-server\n", ""):
        host = _host(text)
        service = SystemdService(host, "sglang")
        assert service.find_leftovers() is None
        assert service.restore() is False
        assert not any("rm -f" in c or "systemctl stop" in c for c in host.commands)
