"""Hostile values from an experiment file reach the server as data, never as a command or a directive.

Each value tries to create a file on the host (``/tmp/pwned-N``) through a shell, a unit-file newline, a
specifier or an environment expansion, in drop-in mode, for a plain process, and in unit mode (a whole unit
file from a template). The tests assert on the host itself: no such file exists, systemd shows no extra
directive or assignment, and the server received every value byte for byte.
"""

from __future__ import annotations

import pytest

from orchestrator.errors import ConfigError
from orchestrator.hosts.base import Host
from orchestrator.quoting import render_unit_template, shell_join
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


# mode: unit. The template is the user's own systemd text; the values go through render_unit_template, escaped
# for the setting each lands in: argument words in ExecStart= (outside and inside the template's quotes), one
# literal piece of an assignment in Environment=, a plain value in Description=.
UNIT_TEMPLATE = (
    "[Unit]\n"
    "Description=specsweep hostile unit-mode test {tag}\n"
    "[Service]\n"
    "ExecStart={python} -c '"
    + PRINTER.split(" -c '", 1)[1].replace("{", "{{").replace("}", "}}")
    + ' {args} "{inside}"\n'
    'Environment=SIM_X={x} "SIM_Y=in quotes {x}" SIM_Z={plain}\n'
)
UNIT_VALUES = {
    "python": PYTHON,
    "tag": "run-1",
    "args": shell_join(HOSTILE_ARGS),
    "inside": '"; touch /tmp/pwned-20; "\\ %h $HOME ${PATH} \\n\nExecStartPre=/bin/touch /tmp/pwned-21',
    "x": "a LD_PRELOAD=/tmp/evil.so %h $HOME \\ \"q\" 's'\nExecStartPost=/bin/touch /tmp/pwned-22",
    "plain": "%h$HOME;\\x",
}


def _shown_words(text: str) -> list[str]:
    """Undo `systemctl show`'s quoting of a list (systemd src/basic/escape.c shell_maybe_quote: a word with
    specials is double-quoted, with \\ before " \\ ` $ and C escapes for control characters)."""
    escapes = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
    words: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == " ":
            i += 1
            continue
        word: list[str] = []
        quoted = False
        while i < len(text) and (quoted or text[i] != " "):
            ch = text[i]
            if ch == '"':
                quoted = not quoted
            elif ch == "\\" and quoted:
                nxt = text[i + 1]
                if nxt == "x":
                    word.append(chr(int(text[i + 2 : i + 4], 16)))
                    i += 2
                else:
                    word.append(escapes.get(nxt, nxt))
                i += 1
            else:
                word.append(ch)
            i += 1
        words.append("".join(word))
    return words


def _bus_property(host: TestHost, unit: str, interface: str, name: str) -> object:
    """A unit property as systemd's D-Bus API has it (busctl's JSON: exact strings, no display escaping)."""
    import json

    path = json.loads(
        host.admin(
            f"busctl --json=short call org.freedesktop.systemd1 /org/freedesktop/systemd1 "
            f"org.freedesktop.systemd1.Manager LoadUnit s {unit}"
        ).stdout
    )["data"][0]
    out = host.admin(
        f"busctl --json=short get-property org.freedesktop.systemd1 {path} org.freedesktop.systemd1.{interface} {name}"
    ).stdout
    return json.loads(out)["data"]


def test_systemd_unit_mode_passes_hostile_values_verbatim(sim_unit: SimUnit) -> None:
    host = sim_unit.host
    host.admin("rm -f /tmp/pwned-* /tmp/evil.so")
    unit = sim_unit.unit
    text = render_unit_template(UNIT_TEMPLATE, UNIT_VALUES)
    service = SystemdService(host.ssh(), unit, mode="unit", unit_template=UNIT_TEMPLATE)
    try:
        service.apply(deployment(text))
        # systemd reads exactly the settings of the template: no directive, command or assignment was added.
        for extra in ("ExecStartPre", "ExecStartPost", "ExecStop", "ExecStopPost", "ExecCondition"):
            assert host.admin(f"systemctl show {unit} -p {extra}").stdout == ""
        shown = host.admin(f"systemctl show {unit} -p Environment,ExecStart,Description").stdout
        assert "Description=specsweep hostile unit-mode test run-1\n" in shown, shown
        # The assignments systemd holds, exactly three, as `systemctl show` prints them (shell-style quoting):
        # no LD_PRELOAD= of their own, specifiers and variables unexpanded, newlines inside the values.
        env_line = next(line for line in shown.splitlines() if line.startswith("Environment="))
        assert _shown_words(env_line[len("Environment=") :]) == [
            f"SIM_X={UNIT_VALUES['x']}",
            f"SIM_Y=in quotes {UNIT_VALUES['x']}",
            f"SIM_Z={UNIT_VALUES['plain']}",
        ], shown
        assert f"path={PYTHON} ;" in shown and "ignore_errors=no" in shown, shown  # no prefix took effect
        # The exact values, through systemd's D-Bus API.
        assert _bus_property(host, unit, "Service", "Environment") == [
            f"SIM_X={UNIT_VALUES['x']}",
            f"SIM_Y=in quotes {UNIT_VALUES['x']}",
            f"SIM_Z={UNIT_VALUES['plain']}",
        ]
        [exec_start] = _bus_property(host, unit, "Service", "ExecStart")  # type: ignore[misc]
        program, argv, ignore_failure = exec_start[0], exec_start[1], exec_start[2]
        assert program == PYTHON and not ignore_failure
        # "$$" is what substitution at exec time turns into "$"; a lone "$" would be a variable.
        assert all("$" not in arg.replace("$$", "") for arg in argv)
        assert [arg.replace("$$", "$") for arg in argv[3:]] == [*HOSTILE_ARGS, UNIT_VALUES["inside"]]
        # And the server received them byte for byte (with "$" and "%" left alone by systemd).
        assert wait_for(lambda: "[[" in service.journal_since(service.start_cursor or ""), timeout=20)
        printed_argv, printed_env = _printed(service.journal_since(service.start_cursor or ""))
    finally:
        service.restore()
    assert printed_argv == [*HOSTILE_ARGS, UNIT_VALUES["inside"]]
    assert printed_env == {
        "SIM_X": UNIT_VALUES["x"],
        "SIM_Y": f"in quotes {UNIT_VALUES['x']}",
        "SIM_Z": UNIT_VALUES["plain"],
    }
    _no_pwned_files(host)


@pytest.mark.parametrize(
    ("template", "value"),
    [
        ("[Service]\nExecStart={v} -c 'print(1)'\n", "+" + PYTHON),
        ("[Service]\nExecStart=/bin/echo x\nUser={v}\n", "root\nExecStartPre=/bin/touch /tmp/pwned-23"),
        ("[Service]\nExecStart=/bin/echo x\nWorkingDirectory={v}\n", "%h"),
        ("[Service]\nExecStart=/bin/echo x\n{v}\n", "ExecStartPre=/bin/touch /tmp/pwned-24"),
    ],
    ids=["prefix", "newline", "specifier", "own-line"],
)
def test_unit_mode_refuses_what_it_cannot_make_safe_before_the_host(
    sim_unit: SimUnit, template: str, value: str
) -> None:
    with pytest.raises(ConfigError, match="unit_file line"):
        render_unit_template(template, {"v": value})
    _no_pwned_files(sim_unit.host)


def _never_called() -> Host:
    class Unreachable:
        name = "unreachable"

        def __getattr__(self, item: str) -> object:
            raise AssertionError("the host must not be touched")

    return Unreachable()  # type: ignore[return-value]
