"""Hostile values in every field of an experiment that reaches the host, through whole sweeps, checked ON the host.

Each hostile value tries to run ``touch /tmp/pwned-N`` or to add a unit directive: shell metacharacters,
``$()``, backticks, ``;``, pipes, newlines and carriage returns, systemd specifiers (``%``), ``$VAR``
expansions, line continuations, Unicode line separators. They go, as an experiment file would carry them,
into: the service command's words (quoted, and raw), the environment's values, the simulator's model name (a
server that becomes healthy and serves load), a host's display name, and for the process service the command,
the environment, the working directory and the log file path. Names that become paths or unit names (the
experiment, the variants, the unit, environment variable names) are refused by validation instead.

Assertions are made on the host: no ``/tmp/pwned-*`` file exists; while each configuration is applied
``systemctl show`` has no Exec*= setting but ExecStart and ``systemctl cat`` no directive but the drop-in's
own; and the program received every value byte for byte (it prints its argv, environment and working
directory as JSON, which is read back from the journal or the log file).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deployments import build_plan
from orchestrator.sweep.events import DeploymentFailed, DeploymentReady
from tests.reliability.conftest import Outcome
from tests.reliability.harness import (
    PYTHON,
    SMALL_LOAD,
    host_state,
    ssh_host_spec,
    state_differences,
    sweep_in_process,
    write_experiment,
)
from tests.system.conftest import SimUnit
from tests.system.support import TestHost

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]

HOSTILE = [
    "; touch /tmp/pwned-1 #",
    "$(touch /tmp/pwned-2)",
    "`touch /tmp/pwned-3`",
    "x\nExecStartPre=/bin/touch /tmp/pwned-4",
    "y\n[Service]\nExecStartPost=/bin/touch /tmp/pwned-5",
    "| touch /tmp/pwned-6",
    "&& touch /tmp/pwned-7 || touch /tmp/pwned-7",
    "> /tmp/pwned-8",
    "a\\\nExecStartPre=/bin/touch /tmp/pwned-9",
    "b\r\nExecStopPost=/bin/touch /tmp/pwned-10",
    "'; touch /tmp/pwned-11; '",
    '"; touch /tmp/pwned-12; "',
    "$(touch${IFS}/tmp/pwned-13)",
    "c\u2028ExecStartPre=/bin/touch /tmp/pwned-14",
    "%n %h %% %i %U \\; ;",
    "$HOME ${PATH} $$ $1",
    "{literal braces} {{double}}",
    "ünïcode ✓ \t tab",
]
#: The program the configuration runs: prints its argv, SIM_* environment and working directory as JSON.
PRINTER_CODE = (
    "import os,sys,json; print('ARGV-ENV ' + json.dumps([sys.argv[1:], "
    "sorted((k, v) for k, v in os.environ.items() if k.startswith('SIM_')), os.getcwd()]))"
)
EXTRA_DIRECTIVES = "ExecStartPre,ExecStartPost,ExecStop,ExecStopPost,ExecCondition,ExecReload"


def _template_text(value: str) -> str:
    """A value as a template field holds it: literal braces doubled."""
    return value.replace("{", "{{").replace("}", "}}")


def _splits(value: str) -> bool:
    try:
        return bool(shlex.split(value))
    except ValueError:
        return False


def _printer(words: list[str]) -> str:
    return f"{{python}} -c {_template_text(shlex.quote(PRINTER_CODE))} " + " ".join(words)


def _environment_fields() -> dict[str, str]:
    return {f"e{i}": _template_text(value) for i, value in enumerate(HOSTILE)}


def _expected_env() -> list[list[str]]:
    return sorted([f"SIM_{i}", value] for i, value in enumerate(HOSTILE))


def _printed(text: str) -> Any:
    for line in reversed(text.splitlines()):
        if line.startswith("ARGV-ENV "):
            return json.loads(line[len("ARGV-ENV ") :])
    raise AssertionError(f"the printer's line is not in:\n{text[-3000:]}")


def _pwned(host: TestHost) -> list[str]:
    return host.admin("ls /tmp/pwned-* 2>/dev/null; true").stdout.split()


def _check_unit_while_applied(host: TestHost, unit: str, seen: list[str]) -> None:
    """Called while a configuration is applied: systemd shows no directive we did not write."""
    show = host.admin(f"systemctl show {unit} -p {EXTRA_DIRECTIVES}").stdout
    for line in show.splitlines():
        if line.split("=", 1)[1:] != [""]:
            seen.append(f"systemctl show: {line}")
    cat = host.admin(f"systemctl cat {unit} 2>/dev/null | sed -n '/50-specsweep.conf/,$p'").stdout
    keys = [ln.split("=", 1)[0] for ln in cat.splitlines()[1:] if ln.strip() and not ln.startswith("#")]
    allowed = {"[Service]", "ExecStart", "Environment"}
    seen.extend(f"systemctl cat: {key}" for key in keys if key not in allowed)
    if keys.count("ExecStart") != 2 or keys.count("[Service]") != 1:
        seen.append(f"systemctl cat: unexpected drop-in shape {keys}")


def test_hostile_values_through_a_systemd_sweep(sim_unit: SimUnit, tmp_path: Path, outcome: Outcome) -> None:
    outcome.scenario = "hostile values: systemd sweep (command words, environment, model; a host name too)"
    outcome.kind = "injection"
    host = sim_unit.host
    host.admin("rm -f /tmp/pwned-*")
    before = host_state(host, sim_unit.unit)
    quoted = [_template_text(shlex.quote(v)) for v in HOSTILE]
    raw = [_template_text(v) for v in HOSTILE if _splits(v)]
    model = "|".join(HOSTILE)
    sim = (
        f"{{python}} -m orchestrator.sim --host 0.0.0.0 --port {sim_unit.port} --profile tiny --load-seconds 0.3 "
        f"--model {_template_text(shlex.quote(model))}"
    )
    env = _environment_fields()
    doc: dict[str, Any] = {
        "name": "hostile",
        "host": ssh_host_spec(host, name="th; touch /tmp/pwned-20 $(touch /tmp/pwned-21) %n"),
        "service": {
            "kind": "systemd",
            "unit": sim_unit.unit,
            "exec_start": "{cmd}",
            "environment": {f"SIM_{i}": f"{{e{i}}}" for i in range(len(HOSTILE))},
        },
        "server": {"url": f"http://{host.guest_ip}:{sim_unit.port}", "model": "sim", "ready_timeout": "15s"},
        "engine": "sim",
        "variants": {
            "server": {"cmd": sim, **env},
            "quoted": {"cmd": _printer(quoted), **env},
            "raw": {"cmd": _printer(raw), **env},
        },
        "baselines": ["server"],
        "load": {**SMALL_LOAD, "concurrency": [1], "warmup": 0},
    }
    path = write_experiment(tmp_path / "hostile.yaml", doc)
    # Each distinct value that reaches the host, once: the environment values (the same in all three
    # variants), the command words quoted, the values that split into words, the model name (one value made
    # of all of them). The host's display name is not counted: it never leaves the controller.
    outcome.injection_attempts = len(HOSTILE) + len(HOSTILE) + len(raw) + 1
    outcome.sweeps = 1
    directives: list[str] = []
    served: list[Any] = []

    def observe(event: Any) -> None:
        if isinstance(event, DeploymentReady | DeploymentFailed):
            _check_unit_while_applied(host, sim_unit.unit, directives)
        if isinstance(event, DeploymentReady):
            served.append(httpx.get(f"http://{host.guest_ip}:{sim_unit.port}/v1/models", timeout=5).json())
            pid = host.admin(f"systemctl show -p MainPID --value {sim_unit.unit}").stdout.strip()
            script = "import json,sys; print(json.dumps(sorted(l.split('=', 1) for l in open(sys.argv[1], newline='').read().split('\\0') if l.startswith('SIM_'))))"  # noqa: E501
            served.append(json.loads(host.admin(f"{PYTHON} -c {shlex.quote(script)} /proc/{pid}/environ").stdout))

    run = sweep_in_process(path, tmp_path / "results", observer=observe)
    pwned = _pwned(host)
    outcome.injections_reached = len(pwned) + len(directives)
    assert not pwned, f"an injected command ran: {pwned}"
    assert not directives, directives
    assert run.error is None, run.error
    assert run.state == "done"
    statuses = {r["variant"]: r["status"] for r in run.records}
    assert statuses == {"server": "ok", "quoted": "failed", "raw": "failed"}  # the printers exit at once
    # Every value arrived byte for byte: the model name the server serves, its environment, the printer's argv.
    assert served[0]["data"][0]["id"] == model
    assert served[1] == _expected_env()
    journal = host.admin(f"journalctl -u {sim_unit.unit} -o cat --no-pager").stdout
    printed = [json.loads(line[len("ARGV-ENV ") :]) for line in journal.splitlines() if line.startswith("ARGV-ENV ")]
    assert [p[0] for p in printed] == [HOSTILE, [w for v in HOSTILE if _splits(v) for w in shlex.split(v)]]
    assert all(p[1] == _expected_env() for p in printed)
    assert {r["host"] for r in run.records} == {doc["host"]["name"]}  # a display name, never sent to the host
    differences = state_differences(before, host_state(host, sim_unit.unit))
    outcome.host_checks = 1
    outcome.hosts_modified = 1 if differences else 0
    assert not differences, differences


def test_hostile_values_through_a_process_sweep(testhost: TestHost, tmp_path: Path, outcome: Outcome) -> None:
    outcome.scenario = "hostile values: process sweep over SSH (command, environment, workdir, log file)"
    outcome.kind = "injection"
    host = testhost
    host.admin("rm -f /tmp/pwned-*")
    workdir = "/tmp/specsweep-hostile/w $(touch /tmp/pwned-30) `touch /tmp/pwned-31`; touch /tmp/pwned-32 %n x"
    log_file = "/tmp/specsweep-hostile/l; touch /tmp/pwned-33 $(touch /tmp/pwned-34)/server log.txt"
    host.admin(f"rm -rf /tmp/specsweep-hostile; mkdir -p {shlex.quote(workdir)}")
    quoted = [_template_text(shlex.quote(v)) for v in HOSTILE]
    doc: dict[str, Any] = {
        "name": "hostile-process",
        "host": ssh_host_spec(host),
        "service": {
            "kind": "process",
            "command": "{cmd}",
            "workdir": workdir,
            "log_file": log_file,
            "environment": {f"SIM_{i}": f"{{e{i}}}" for i in range(len(HOSTILE))},
            "stop_timeout": "5s",
        },
        "server": {"url": f"http://{host.guest_ip}:30999", "model": "sim", "ready_timeout": "10s"},
        "engine": "sim",
        "variants": {"quoted": {"cmd": _printer(quoted), **_environment_fields()}},
        "load": {**SMALL_LOAD, "concurrency": [1], "warmup": 0},
    }
    path = write_experiment(tmp_path / "hostile-process.yaml", doc)
    outcome.injection_attempts = len(HOSTILE) * 2 + 2  # command words, environment values, workdir, log file
    outcome.sweeps = 1
    state = "ls -A ~/.local/state/specsweep 2>/dev/null; true"
    ours_before = [f for f in host.admin(state).stdout.split() if f.startswith("hostile-process.")]
    try:
        run = sweep_in_process(path, tmp_path / "results")
        pwned = _pwned(host)
        outcome.injections_reached = len(pwned)
        assert not pwned, f"an injected command ran: {pwned}"
        assert run.error is None, run.error
        assert [r["status"] for r in run.records] == ["failed"]  # the printer exits at once
        argv, env, cwd = _printed(host.admin(f"cat -- {shlex.quote(log_file)}").stdout)
        assert argv == HOSTILE
        assert env == _expected_env()
        assert cwd == workdir
        # What the host keeps of the run (specsweep's state directory) is what it kept before, but the log.
        ours = [f for f in host.admin(state).stdout.split() if f.startswith("hostile-process.")]
        left = sorted(set(ours) - set(ours_before) - {"hostile-process.log"})
        outcome.host_checks = 1
        outcome.hosts_modified = 1 if left else 0
        assert not left, left
    finally:
        host.admin("rm -rf /tmp/specsweep-hostile ~/.local/state/specsweep/hostile-process.*", check=False)


NAME_FIELDS = [
    pytest.param(("name",), id="experiment name"),
    pytest.param(("variants", "*"), id="variant name"),
    pytest.param(("service", "unit"), id="unit name"),
    pytest.param(("service", "environment", "*"), id="environment variable name"),
]


@pytest.mark.parametrize("where", NAME_FIELDS)
def test_hostile_names_are_refused_before_any_host(tmp_path: Path, outcome: Outcome, where: tuple[str, ...]) -> None:
    """Names that become paths, unit names or variable names are refused by validation: one ConfigError line
    naming the file, and nothing is planned (these never reach a host: counted as refused, not as injections)."""
    outcome.scenario = f"hostile names: {'.'.join(where)}"
    outcome.kind = "validation"
    refused = 0
    for value in [*HOSTILE, "../../etc/passwd", "-rf", ".hidden", "a b", "x/y", ""]:
        doc: dict[str, Any] = {
            "name": "names",
            "host": "local",
            "service": {"kind": "systemd", "unit": "sim.service", "exec_start": "/bin/true {a}"},
            "server": {"url": "http://127.0.0.1:1"},
            "engine": "sim",
            "variants": {"v": {"a": "1"}},
            "load": {"concurrency": [1]},
        }
        if where == ("name",):
            doc["name"] = value
        elif where == ("variants", "*"):
            doc["variants"] = {value: {"a": "1"}}
        elif where == ("service", "unit"):
            doc["service"]["unit"] = value
        else:
            doc["service"]["environment"] = {value: "x"}
        path = write_experiment(tmp_path / "names.yaml", doc)
        with pytest.raises(ConfigError) as caught:
            build_plan(load_experiment(path))
        message = str(caught.value)
        assert message.startswith(str(path)) and "\n" not in message
        refused += 1
    outcome.refused = refused


CONTROL_FIELDS = [
    pytest.param(("host", "name"), id="host name"),
    pytest.param(("service", "workdir"), id="working directory"),
    pytest.param(("service", "log_file"), id="log file"),
    pytest.param(("server", "model"), id="model name"),
]


@pytest.mark.parametrize("where", CONTROL_FIELDS)
def test_control_characters_in_paths_and_names_are_refused(
    tmp_path: Path, outcome: Outcome, where: tuple[str, ...]
) -> None:
    """A path, a host's or a model's name takes any printable text (the sweeps above send such values), but a
    control character or a line separator in one is refused by validation: one ConfigError line, nothing
    planned."""
    outcome.scenario = f"control characters: {'.'.join(where)}"
    outcome.kind = "validation"
    values = [v for v in HOSTILE if any(not ch.isprintable() for ch in v)] + ["a\x00b", "x\x1b[31m", "\x7f", "\x9b"]
    for value in values:
        doc: dict[str, Any] = {
            "name": "controls",
            "host": {"ssh": "root@gpu-box"},
            "service": {"kind": "process", "command": "/bin/true {a}"},
            "server": {"url": "http://127.0.0.1:1"},
            "engine": "sim",
            "variants": {"v": {"a": "1"}},
            "load": {"concurrency": [1]},
        }
        doc[where[0]][where[1]] = value
        path = write_experiment(tmp_path / "controls.yaml", doc)
        with pytest.raises(ConfigError) as caught:
            build_plan(load_experiment(path))
        message = str(caught.value)
        assert message.startswith(str(path)) and "\n" not in message
        outcome.refused += 1
