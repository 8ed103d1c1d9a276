"""Hostile values from an experiment file reach the server as data, never as a command or a directive.

Each value tries to create a file on the host (``/tmp/pwned-N``) through a shell, a unit-file newline, a
specifier or an environment expansion. The tests assert on the host itself: no such file exists, systemd
shows no extra directive, and the server received every value byte for byte.
"""

from __future__ import annotations

import pytest

from orchestrator.errors import ConfigError
from orchestrator.hosts.base import Host
from orchestrator.quoting import shell_join
from orchestrator.services import ProcessService, SystemdService
from tests.system.conftest import SimUnit
from tests.system.support import PYTHON, TestHost, deployment, wait_for

pytestmark = pytest.mark.timeout(90)

HOSTILE_ARGS = [
    "; touch /tmp/pwned-1 #",
    "$(touch /tmp/pwned-2)",
    "`touch /tmp/pwned-3`",
    "x\nExecStartPre=/bin/touch /tmp/pwned-4",
    "y\n[Service]\nExecStartPost=/bin/touch /tmp/pwned-5",
    "%n %h %% \\; ;",
    "$HOME ${PATH} $$",
    "\"quoted\" 'single' back\\slash\ttab",
    "trailing backslash \\",
    ";",
    "| touch /tmp/pwned-6",
    "ünïcode ✓",
]
HOSTILE_ENV = {
    "SIM_A": "a\nExecStartPre=/bin/touch /tmp/pwned-7",
    "SIM_B": '" ; touch /tmp/pwned-8 ; "',
    "SIM_C": "%h $HOME \\n \\",
}
PRINTER = (
    f"{PYTHON} -c 'import os,sys,json; "
    'print(json.dumps([sys.argv[1:], {k: v for k, v in os.environ.items() if k.startswith("SIM_")}]))\''
)


def _no_pwned_files(host: TestHost) -> None:
    leftover = host.admin("ls /tmp/pwned-* 2>/dev/null; true").stdout.strip()
    assert leftover == "", f"an injected command ran: {leftover}"


def _printed(text: str) -> tuple[list[str], dict[str, str]]:
    import json

    for line in reversed(text.splitlines()):
        if line.startswith("[["):
            argv, env = json.loads(line)
            return argv, env
    raise AssertionError(f"the printer's output is not in the log:\n{text}")


def test_systemd_dropin_passes_hostile_values_verbatim(sim_unit: SimUnit) -> None:
    host = sim_unit.host
    host.admin("rm -f /tmp/pwned-*")
    service = SystemdService(host.ssh(), sim_unit.unit)
    command = PRINTER + " " + shell_join(HOSTILE_ARGS)
    try:
        service.apply(deployment(command, environment=HOSTILE_ENV))
        for extra in ("ExecStartPre", "ExecStartPost", "ExecStop", "ExecStopPost", "ExecCondition"):
            assert host.admin(f"systemctl show {sim_unit.unit} -p {extra}").stdout == ""
        dropin = host.admin(f"cat /etc/systemd/system/{sim_unit.unit}.d/50-specsweep.conf").stdout
        keys = [line.split("=", 1)[0] for line in dropin.splitlines() if line and not line.startswith("#")]
        assert keys == ["[Service]", "ExecStart", "ExecStart", "Environment", "Environment", "Environment"]
        assert wait_for(lambda: "[[" in service.journal_since(service.start_cursor or ""), timeout=20)
        argv, env = _printed(service.journal_since(service.start_cursor or ""))
    finally:
        service.restore()
    assert argv == HOSTILE_ARGS
    assert env == HOSTILE_ENV
    _no_pwned_files(host)


def test_process_service_passes_hostile_values_verbatim(testhost: TestHost) -> None:
    testhost.admin("rm -f /tmp/pwned-*")
    service = ProcessService(testhost.ssh(), "hostile", state_dir="/tmp/specsweep-hostile")
    try:
        service.apply(deployment(PRINTER + " " + shell_join(HOSTILE_ARGS), environment=HOSTILE_ENV))
        assert wait_for(lambda: "[[" in service.journal_since("0"), timeout=20)
        argv, env = _printed(service.journal_since("0"))
    finally:
        service.restore()
        testhost.admin("rm -rf /tmp/specsweep-hostile")
    assert argv == HOSTILE_ARGS
    assert env == HOSTILE_ENV
    _no_pwned_files(testhost)


@pytest.mark.parametrize(
    "unit",
    ["x; touch /tmp/pwned-9.service", "../../tmp/pwned-10", "a b.service", "$(touch /tmp/pwned-11)", "-x.service"],
)
def test_hostile_unit_names_are_refused_before_reaching_the_host(testhost: TestHost, unit: str) -> None:
    with pytest.raises(ConfigError):
        SystemdService(_never_called(), unit)
    _no_pwned_files(testhost)


def test_a_value_that_changes_a_unit_template_is_refused(sim_unit: SimUnit) -> None:
    template = "[Service]\nExecStart=/bin/echo {value}\n"
    hostile = template.replace("{value}", "x\nExecStartPre=/bin/touch /tmp/pwned-12")
    service = SystemdService(sim_unit.host.ssh(), sim_unit.unit, mode="unit", unit_template=template)
    with pytest.raises(ConfigError, match="structure"):
        service.apply(deployment(hostile))
    separator = template.replace("{value}", "a ; /bin/touch /tmp/pwned-13")
    with pytest.raises(ConfigError, match="structure"):
        service.apply(deployment(separator))
    _no_pwned_files(sim_unit.host)
    assert sim_unit.host.admin(f"ls /etc/systemd/system/{sim_unit.unit}.d 2>&1; true").stdout.count("No such") == 1


def _never_called() -> Host:
    class Unreachable:
        name = "unreachable"

        def __getattr__(self, item: str) -> object:
            raise AssertionError("the host must not be touched")

    return Unreachable()  # type: ignore[return-value]
