"""Secrets never appear in anything specsweep writes or prints: the run directory, the report, a log, the CLI's
outputs, an error, the host's files, ``systemctl show``, a command line of specsweep's.

- ``server.api_key``, locally: the key is used for real (every request and scrape carries it), the sweep has a
  deployment that fails to start and one whose requests fail (so error paths and their evidence are written
  too), and the report is built. Every byte the run left is searched for the key, and so are the CLI's
  outputs of ``sweep --json``, ``validate``, ``plan --json``, ``sweep --dry-run`` and of experiments that
  are invalid around the key.
- Secrets the server needs (``environment: {HF_TOKEN: {secret_env: ...}}``, ``{secret_file: ...}``, and an
  argument ``$API_KEY``), on the real test host: a systemd sweep through the CLI (the simulator, then a
  program that prints what it received and, like a server logging its arguments, the values themselves), and
  a process sweep over SSH. While a configuration is applied, the host is searched: the drop-in, its
  directory, ``systemctl show`` of the unit, every file specsweep keeps, every process's command line but
  the server's own; the environment file is mode 0600 and the server's environment holds the values. After
  the run, the run directory, the CLI's outputs and the host are searched again, and the host is as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shlex
import threading
from pathlib import Path
from typing import Any

import pytest

from orchestrator.sweep.events import HealthProgress
from tests.reliability.conftest import Outcome
from tests.reliability.harness import (
    SMALL_LOAD,
    Trigger,
    cli_env,
    free_port,
    host_state,
    local_experiment,
    local_leftovers_restored,
    only_run_dir,
    run_cli,
    ssh_host_spec,
    started_cli,
    state_differences,
    sweep_in_process,
    wait_until,
    write_experiment,
)
from tests.system.conftest import SimUnit
from tests.system.support import SECRET_DIR, TestHost
from tests.timing import scaled

pytestmark = pytest.mark.timeout(240)

EXIT_POINTS_FAILED = 3  # orchestrator/cli/commands/sweep.py: the sweep ran to the end, some points failed


def _files_containing(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_api_key_never_leaks(tmp_path: Path, outcome: Outcome) -> None:
    outcome.scenario = "secrets: server.api_key"
    outcome.kind = "secret"
    key = f"sk-specsweep-{secrets.token_hex(12)}"
    home = tmp_path / "home"
    home.mkdir()
    doc: dict[str, Any] = local_experiment(
        "secret",
        free_port(),
        {"ar": "--algorithm ar", "broken": "--fault fail-start", "errors": "--fault http-500-rate=1"},
        load={**SMALL_LOAD, "concurrency": [1]},
    )
    doc["server"]["api_key"] = key
    path = write_experiment(tmp_path / "secret.yaml", doc)
    env = cli_env(home)
    results = tmp_path / "results"
    with local_leftovers_restored(home, path):
        outputs = [run_cli("sweep", str(path), "--results", str(results), "--json", env=env)]
    outcome.sweeps = 1
    # Two deployments fail on purpose: the sweep runs to its end and says so with exit 3, not 0.
    assert outputs[0].returncode == EXIT_POINTS_FAILED, outputs[0].stderr
    summary = json.loads(outputs[0].stdout)
    assert summary["exit_code"] == EXIT_POINTS_FAILED and summary["state"] == "done", summary
    run_dir = only_run_dir(results, "secret")
    assert (run_dir / "report.html").is_file()
    # Invalid around the key: an error in the same mapping, the key under a misspelt name.
    broken = [
        {**doc, "server": {**doc["server"], "url": "not a url"}},
        {**doc, "server": {**doc["server"], "ready_timeout": "soon"}},
        {**doc, "server": {**{k: v for k, v in doc["server"].items() if k != "api_key"}, "api_kye": key}},
    ]
    files = [str(write_experiment(tmp_path / f"bad{i}.yaml", bad)) for i, bad in enumerate(broken)]
    outputs += [
        run_cli("validate", str(path), *files, env=env),
        run_cli("plan", str(path), "--json", env=env),
        run_cli("sweep", str(path), "--dry-run", env=env),
    ]
    assert outputs[1].returncode == 2 and outputs[1].stderr.count("invalid") == len(broken), outputs[1].stderr
    searched = [*results.rglob("*"), *home.rglob("*")]
    leaks = _files_containing(results, key.encode()) + _files_containing(home, key.encode())
    leaks += [f"output of {' '.join(o.args[3:5])}" for o in outputs if key in o.stdout + o.stderr]
    outcome.secret_checks = sum(1 for p in searched if p.is_file()) + len(outputs)
    outcome.secret_leaks = len(leaks)
    outcome.detail = "; ".join(leaks)
    assert not leaks, leaks
    statuses = {r["status"] for r in summary.get("records", [])} if "records" in summary else None
    assert statuses in (None, {"ok", "failed"}), summary
    assert '"status": "ok"' in outputs[0].stdout and '"status": "failed"' in outputs[0].stdout


def test_inline_secrets_are_warned_of_and_never_written(tmp_path: Path, outcome: Outcome) -> None:
    """Secrets written inline (issue 28): an environment value named like a token and a password in the server
    URL's userinfo. ``validate`` warns with file:line and the key; the sweep measures (the server gets what the
    file says), and no file of the run directory, nor anything the CLI printed, holds either value."""
    outcome.scenario = "secrets: written inline (environment, URL userinfo)"
    outcome.kind = "secret"
    token, password = f"hf_{secrets.token_hex(10)}", f"pw-{secrets.token_hex(8)}"
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    doc: dict[str, Any] = local_experiment("inline", port, {"linear": "--algorithm linear"})
    doc["service"]["environment"] = {"HF_TOKEN": token, "TOKENIZERS_PARALLELISM": "false"}
    doc["server"]["url"] = f"http://bench:{password}@127.0.0.1:{port}"
    path = write_experiment(tmp_path / "inline.yaml", doc)
    env = cli_env(home)
    results = tmp_path / "results"
    with local_leftovers_restored(home, path):
        outputs = [run_cli("validate", str(path), env=env)]
        said = outputs[0].stdout + outputs[0].stderr
        assert outputs[0].returncode == 0, said
        assert f"{path}:" in said and "service.environment.HF_TOKEN: a secret written inline" in said, said
        assert "server.url: a URL's password written inline" in said, said
        assert "TOKENIZERS_PARALLELISM" not in said
        outputs.append(run_cli("sweep", str(path), "--results", str(results), env=env))
        assert outputs[-1].returncode == 0, outputs[-1].stderr + outputs[-1].stdout
        assert "written inline" in outputs[-1].stdout + outputs[-1].stderr
        outputs += [run_cli("plan", str(path), "--json", env=env), run_cli("sweep", str(path), "--dry-run", env=env)]
    outcome.sweeps = 1
    run_dir = only_run_dir(results, "inline")
    assert "HF_TOKEN: '[redacted]'" in (run_dir / "experiment.yaml").read_text()
    assert f"http://bench:redacted@127.0.0.1:{port}" in (run_dir / "experiment.yaml").read_text()
    leaks = []
    for value in (token, password):
        leaks += _files_containing(results, value.encode()) + _files_containing(home, value.encode())
        leaks += [f"output of {' '.join(o.args[3:5])}" for o in outputs if value in o.stdout + o.stderr]
    outcome.secret_checks = sum(1 for p in [*results.rglob("*"), *home.rglob("*")] if p.is_file()) + len(outputs)
    outcome.secret_leaks = len(leaks)
    outcome.detail = "; ".join(leaks)
    assert not leaks, leaks


@pytest.mark.parametrize("value", [pytest.param("list", id="as a list"), pytest.param("mapping", id="as a mapping")])
def test_a_mistyped_api_key_is_not_quoted_in_the_error(tmp_path: Path, value: str) -> None:
    from orchestrator.errors import ConfigError
    from orchestrator.experiment.schema import load_experiment

    key = f"sk-specsweep-{secrets.token_hex(12)}"
    doc = local_experiment("secret", 1, {"ar": "--algorithm ar"})
    doc["server"]["api_key"] = [key] if value == "list" else {"value": key}
    with pytest.raises(ConfigError) as caught:
        load_experiment(write_experiment(tmp_path / "bad.yaml", doc))
    assert "api_key" in str(caught.value)
    assert key not in str(caught.value)


# -- secrets the server needs, on the test host ----------------------------------------------------------------

TOKEN_VAR = "SPECSWEEP_TEST_HF_TOKEN"  # the controller's variable the experiment names
#: Prints digests of what it received (argument 1, $HF_TOKEN, $API_KEY), then the values themselves, as a
#: server that logs its own arguments would, and sleeps argument 2 seconds.
PRINTER = (
    "import hashlib,os,sys,time; h=lambda s: hashlib.sha256(s.encode()).hexdigest()[:16]; "
    "print('RECEIVED', h(sys.argv[1]), h(os.environ.get('HF_TOKEN', '')), h(os.environ.get('API_KEY', '')), "
    "flush=True); print('server_args api_key=' + sys.argv[1] + ' hf_token=' + os.environ.get('HF_TOKEN', ''), "
    "flush=True); time.sleep(float(sys.argv[2]))"
)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def _values() -> tuple[str, str]:
    return f"hf_{secrets.token_hex(12)}", f"sk-{secrets.token_hex(12)}"


def _environment(tmp_path: Path, key: str) -> dict[str, Any]:
    key_file = tmp_path / "api.key"
    key_file.write_text(key + "\n")
    key_file.chmod(0o600)
    return {"HF_TOKEN": {"secret_env": TOKEN_VAR}, "API_KEY": {"secret_file": str(key_file)}}


def _host_leaks(host: TestHost, unit: str | None, values: list[str], *, server_pid: str | None = None) -> list[str]:
    """Where the host shows a secret outside the one file meant for it and the server itself: specsweep's
    files (the overlay's upper layer under /etc/systemd/system and /var/lib/specsweep), ``systemctl show`` of
    the unit (every property), and the command lines of every process but the server's own."""
    out: list[str] = []
    upper = host.lab / "ovl" / "upper"
    for sub in ("etc/systemd/system", "var/lib/specsweep"):
        base = upper / sub
        if base.exists():
            out += [f"host file {p}" for v in values for p in _files_containing(base, v.encode())]
    if unit is not None:
        show = host.admin(f"systemctl show {unit}").stdout
        out += ["systemctl show" for v in values if v in show]
    processes = host.admin("ps -eo pid=,args=").stdout.splitlines()
    for line in processes:
        pid = line.split(None, 1)[0]
        if pid != server_pid and any(v in line for v in values):
            out.append(f"command line of process {pid}: {line[:60]}")
    return out


def _check_run_outputs(run_dir: Path, texts: list[str], values: list[str], outcome: Outcome) -> list[str]:
    leaks = [f for v in values for f in _files_containing(run_dir, v.encode())]
    leaks += [f"CLI output {i}" for i, text in enumerate(texts) if any(v in text for v in values)]
    outcome.secret_checks += sum(1 for p in run_dir.rglob("*") if p.is_file()) + len(texts)
    return leaks


def test_service_secrets_never_leak_from_a_systemd_sweep(sim_unit: SimUnit, tmp_path: Path, outcome: Outcome) -> None:
    outcome.scenario = "secrets: environment and arguments of a systemd unit (HF_TOKEN, $API_KEY)"
    outcome.kind = "secret"
    host = sim_unit.host
    token, key = _values()
    inline = f"db-{secrets.token_hex(10)}"
    before = host_state(host, sim_unit.unit)
    sim = f"{{python}} -m orchestrator.sim --host 0.0.0.0 --port {sim_unit.port} --profile tiny --load-seconds 0.3"
    printer = f"{{python}} -c {shlex.quote(PRINTER)} $API_KEY 0"
    doc: dict[str, Any] = {
        "name": "secrets-systemd",
        "host": ssh_host_spec(host),
        "service": {
            "kind": "systemd",
            "unit": sim_unit.unit,
            "exec_start": "{cmd}",
            # An inline secret too (issue 40): it goes to the environment file, not onto an Environment= line.
            "environment": {**_environment(tmp_path, key), "PLAIN": "visible", "DB_PASSWORD": inline},
        },
        "server": {"url": f"http://{host.guest_ip}:{sim_unit.port}", "model": "sim", "ready_timeout": "15s"},
        "engine": "sim",
        "variants": {"server": {"cmd": sim}, "printer": {"cmd": printer}},
        "baselines": ["server"],
        "load": {**SMALL_LOAD, "concurrency": [1], "warmup": 0},
        "failure_policy": {"stop_on_baseline_failure": False},
    }
    path = write_experiment(tmp_path / "secrets-systemd.yaml", doc)
    env = cli_env(tmp_path, **{TOKEN_VAR: token})
    results = tmp_path / "results"
    values = [token, key, inline]
    seen: dict[str, Any] = {}
    dropin_dir = f"/etc/systemd/system/{sim_unit.unit}.d"
    env_file = f"{SECRET_DIR}/{sim_unit.unit}.env"

    def while_applied() -> bool:
        """Once the simulator runs its configuration: look at everything the host shows."""
        pid = host.admin(f"systemctl show -p MainPID --value {sim_unit.unit}").stdout.strip()
        dropin = host.admin(f"cat {dropin_dir}/* 2>/dev/null; true").stdout
        if pid in ("", "0") or "EnvironmentFile" not in dropin or "orchestrator.sim" not in dropin:
            return False
        seen["dropin"] = dropin
        seen["modes"] = host.admin(f"stat -c '%n %a %U' {SECRET_DIR} {env_file} {dropin_dir}/*").stdout
        seen["environ"] = host.admin(f"tr '\\0' '\\n' < /proc/{int(pid)}/environ").stdout.splitlines()
        seen["leaks"] = _host_leaks(host, sim_unit.unit, values)
        return True

    with started_cli("sweep", str(path), "--results", str(results), "--json", env=env) as proc:
        watcher = threading.Thread(target=lambda: wait_until(lambda: while_applied() or proc.poll() is not None))
        watcher.start()
        out, err = proc.communicate(timeout=scaled(180))
        watcher.join(30)
    outcome.sweeps = 1
    assert proc.returncode == EXIT_POINTS_FAILED, err  # the printer exits at once: its point fails
    assert "dropin" in seen, "the simulator's configuration was never seen applied"
    # While applied: the values are in the server's environment, nowhere else.
    assert f"HF_TOKEN={token}" in seen["environ"] and f"API_KEY={key}" in seen["environ"]
    assert "PLAIN=visible" in seen["environ"] and f"DB_PASSWORD={inline}" in seen["environ"]
    assert 'Environment="PLAIN=visible"' in seen["dropin"], seen["dropin"]  # what is no secret stays there
    assert f"EnvironmentFile={env_file}" in seen["dropin"] and not any(v in seen["dropin"] for v in values)
    modes = {n: f"{m} {u}" for n, m, u in (line.rsplit(" ", 2) for line in seen["modes"].splitlines())}
    assert modes[SECRET_DIR] == "700 root" and modes[env_file] == "600 root", seen["modes"]
    leaks = list(seen["leaks"])
    outcome.secret_checks += 4  # drop-in, its directory, systemctl show, the process list
    # The printer received every value where it was meant to be, and logged it (its journal is its own).
    journal = host.admin(f"journalctl -u {sim_unit.unit} -o cat --no-pager").stdout
    received = [line.split()[1:] for line in journal.splitlines() if line.startswith("RECEIVED ")]
    assert received == [[_digest(key), _digest(token), _digest(key)]], received
    # The run directory, with the printer's failure evidence and journal window, and every CLI output.
    run_dir = only_run_dir(results, "secrets-systemd")
    texts = [out, err]
    texts += [run_cli(*a, env=env).stdout for a in (("plan", str(path), "--json"), ("sweep", str(path), "--dry-run"))]
    texts.append(run_cli("validate", str(path), env=env).stdout)
    leaks += _check_run_outputs(run_dir, texts, values, outcome)
    evidence = json.dumps([json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()])
    assert "[secret API_KEY]" in evidence or "[secret API_KEY]" in "".join(
        p.read_text() for p in (run_dir / "windows").rglob("*") if p.is_file()
    ), "the printer's own log line should be there, masked"
    # Afterwards: the environment file is gone and the host is as it was, with no value anywhere.
    leaks += _host_leaks(host, sim_unit.unit, values)
    outcome.secret_checks += 2
    outcome.secret_leaks = len(leaks)
    outcome.detail = "; ".join(leaks)
    assert not leaks, leaks
    assert not host.admin(f"ls -A {SECRET_DIR} 2>/dev/null; true").stdout.strip()
    differences = state_differences(before, host_state(host, sim_unit.unit))
    outcome.host_checks = 1
    outcome.hosts_modified = 1 if differences else 0
    assert not differences, differences


def test_service_secrets_never_leak_from_a_process_sweep(testhost: TestHost, tmp_path: Path, outcome: Outcome) -> None:
    outcome.scenario = "secrets: environment and arguments of a process over SSH (HF_TOKEN, $API_KEY)"
    outcome.kind = "secret"
    host = testhost
    token, key = _values()
    state_dir = "/tmp/specsweep-secrets-state"
    host.admin(f"rm -rf {state_dir}")
    doc: dict[str, Any] = {
        "name": "secrets-process",
        "host": ssh_host_spec(host),
        "service": {
            "kind": "process",
            "command": f"{{python}} -c {shlex.quote(PRINTER)} $API_KEY 30",
            "log_file": f"{state_dir}/server.log",
            "environment": _environment(tmp_path, key),
            "stop_timeout": "5s",
        },
        "server": {"url": f"http://{host.guest_ip}:30998", "model": "sim", "ready_timeout": "6s"},
        "engine": "sim",
        "variants": {"printer": {}},
        "load": {**SMALL_LOAD, "concurrency": [1], "warmup": 0},
    }
    path = write_experiment(tmp_path / "secrets-process.yaml", doc)
    values = [token, key]
    seen: dict[str, Any] = {}

    home_state = host.lab / "ovl" / "upper" / "root" / ".local" / "state" / "specsweep"  # root's, in the guest

    def look() -> None:
        wrapper = host.admin("cat ~/.local/state/specsweep/server-30998.pid 2>/dev/null; true").stdout.strip()
        pid = host.admin(f"pgrep -P {int(wrapper)}; true").stdout.strip() if wrapper.isdigit() else ""
        seen["environ"] = host.admin(f"tr '\\0' '\\n' < /proc/{int(pid)}/environ").stdout.splitlines() if pid else []
        seen["leaks"] = _host_leaks(host, None, values, server_pid=pid)
        files = sorted(p.name for p in home_state.iterdir()) if home_state.is_dir() else []
        seen["state_files"] = [f for f in files if f.startswith("server-30998.")]
        seen["leaks"] += [f"state file {f}" for v in values for f in _files_containing(home_state, v.encode())]

    trigger = Trigger(lambda e: isinstance(e, HealthProgress) and e.elapsed > 2.0, look)
    previous = os.environ.get(TOKEN_VAR)
    os.environ[TOKEN_VAR] = token
    try:
        run = sweep_in_process(path, tmp_path / "results", observer=trigger)
        trigger.join()
    finally:
        if previous is None:
            os.environ.pop(TOKEN_VAR, None)
        else:
            os.environ[TOKEN_VAR] = previous
        log_text = host.admin(f"cat {state_dir}/server.log 2>/dev/null; true").stdout
        left = host.admin("ls -A ~/.local/state/specsweep 2>/dev/null; true").stdout.split()
        host.admin(f"rm -rf {state_dir} ~/.local/state/specsweep/server-30998.*", check=False)
    outcome.sweeps = 1
    assert run.error is None, run.error
    assert [r["status"] for r in run.records] == ["failed"]  # the printer never serves
    assert "environ" in seen, "the server was never seen running"
    assert f"HF_TOKEN={token}" in seen["environ"] and f"API_KEY={key}" in seen["environ"], seen["environ"]
    # The launch file (the secrets, the command) was read by the wrapper and removed before the server ran.
    assert "server-30998.launch" not in seen["state_files"], seen["state_files"]
    assert not [f for f in left if f.startswith("server-30998.")], left  # restored: nothing of ours left
    received = [line.split()[1:] for line in log_text.splitlines() if line.startswith("RECEIVED ")]
    assert received == [[_digest(key), _digest(token), _digest(key)]], received
    leaks = list(seen["leaks"])
    outcome.secret_checks += 3  # specsweep's files, every command line, the state directory
    leaks += _check_run_outputs(run.run_dir, [str(run.error or "")], values, outcome)
    outcome.secret_leaks = len(leaks)
    outcome.detail = "; ".join(leaks)
    assert not leaks, leaks


def test_every_class_of_secret_is_masked_by_value_everywhere(tmp_path: Path, outcome: Outcome) -> None:
    """Issue 40, one rule: a value known to be secret anywhere is masked everywhere it is written or shown.
    A matrix value shaped like a Hugging Face token under a neutral name, rendered into the server's command
    (the simulator serves it as its model id, so it comes back in responses, log windows and records); a
    ``DB_PASS`` and a neutral-named ``hf_`` value in the environment; a password quoted in an assignment of
    the command line. No file of the run directory, nor anything the CLI printed, holds any of them."""
    outcome.scenario = "secrets: by value everywhere (token-shaped matrix value, DB_PASS, quoted, neutral names)"
    outcome.kind = "secret"
    served = f"hf_{secrets.token_hex(12)}"
    db_pass, neutral, quoted = f"db-{secrets.token_hex(8)}", f"hf_{secrets.token_hex(10)}", f"q-{secrets.token_hex(8)}"
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    doc: dict[str, Any] = local_experiment("byvalue", port, {"linear": "--algorithm linear --model {name}"})
    doc["variants"]["linear"]["matrix"] = {"name": [served]}
    doc["service"]["environment"] = {"DB_PASS": db_pass, "MODEL_REVISION": neutral}
    doc["service"]["command"] = f"env SERVICE_PASSWORD='{quoted}' " + doc["service"]["command"]
    path = write_experiment(tmp_path / "byvalue.yaml", doc)
    env = cli_env(home)
    results = tmp_path / "results"
    with local_leftovers_restored(home, path):
        outputs = [run_cli("validate", str(path), env=env)]
        outputs.append(run_cli("sweep", str(path), "--results", str(results), "--json", env=env))
        assert outputs[-1].returncode == 0, outputs[-1].stderr + outputs[-1].stdout
        outputs += [run_cli("plan", str(path), "--json", env=env), run_cli("sweep", str(path), "--dry-run", env=env)]
        run_dir = only_run_dir(results, "byvalue")
        outputs += [run_cli("report", str(run_dir), env=env), run_cli("recommend", str(run_dir), env=env)]
    outcome.sweeps = 1
    assert any(r["status"] == "ok" for r in map(json.loads, (run_dir / "records.jsonl").read_text().splitlines()))
    leaks = []
    # The server's own output (its log file on the host, as journald is a unit's) holds what the server prints:
    # the model id it serves. What specsweep copies of it (windows/) is searched with the run directory.
    # (named after the port it listens on: orchestrator/services/__init__.py)
    server_logs = {str(p) for p in (home / ".local" / "state" / "specsweep").glob("server-*.log")}
    for value in (served, db_pass, neutral, quoted):
        leaks += _files_containing(results, value.encode())
        leaks += [p for p in _files_containing(home, value.encode()) if p not in server_logs]
        leaks += [f"output of {' '.join(o.args[3:5])}" for o in outputs if value in o.stdout + o.stderr]
    outcome.secret_checks = sum(1 for p in [*results.rglob("*"), *home.rglob("*")] if p.is_file()) + len(outputs)
    outcome.secret_leaks = len(leaks)
    outcome.detail = "; ".join(leaks)
    assert not leaks, leaks


def _command_lines() -> list[tuple[int, list[str]]]:
    """Every process's argv on this machine, as ``ps`` would show it."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            out.append((int(entry.name), [w.decode("utf-8", "replace") for w in raw.split(b"\0") if w]))
    return out


def test_dash_led_and_digit_values_the_wrappers_argv_quiet_and_a_bad_url(tmp_path: Path, outcome: Outcome) -> None:
    """Issue 40, the classes left from the fourth pass, through the real CLI: an ``--api-key`` value that starts
    with a dash, and one of digits after ``=``, each in a configuration whose server fails on it (its error
    output, with the value, is the failure's evidence); a ``HF_TOKEN`` of digits in the environment, which
    reached the server wrapper's command line (``ps``) for as long as the server ran; the sweep under ``-q``,
    which hid the warning that the file holds secrets inline; and an invalid ``server.url`` whose error printed
    its password. While the sweep runs, no command line but the server's own holds a value; after it, no file of
    the run directory, nor anything the CLI printed, holds any."""
    outcome.scenario = "secrets: dash-led and digit values, the wrapper's argv, -q, an invalid URL's password"
    outcome.kind = "secret"
    dash, digits = f"-{secrets.token_hex(8)}", str(secrets.randbelow(10**12) + 10**12)
    env_digits, password = str(secrets.randbelow(10**10) + 10**10), f"pw{secrets.token_hex(8)}"
    values = [dash, digits, env_digits, password]
    home = tmp_path / "home"
    home.mkdir()
    variants = {"ar": "--algorithm ar", "dash": f"--algorithm ar --api-key {dash}", "digits": f"--api-key={digits}"}
    doc: dict[str, Any] = local_experiment("classes", free_port(), variants, load={**SMALL_LOAD, "concurrency": [1]})
    doc["service"]["environment"] = {"HF_TOKEN": env_digits, "MAX_TOKENS": "5"}
    doc["failure_policy"] = {"stop_on_baseline_failure": False}
    path = write_experiment(tmp_path / "classes.yaml", doc)
    bad_url = write_experiment(
        tmp_path / "badurl.yaml", {**doc, "server": {**doc["server"], "url": f"bench:{password}@127.0.0.1:3000"}}
    )
    env = cli_env(home)
    results = tmp_path / "results"
    seen: list[str] = []
    me = os.getpid()

    def look() -> None:
        """The command lines of every process but the servers themselves (their arguments are their own)."""
        for pid, argv in _command_lines():
            line = " ".join(argv)
            server = len(argv) > 2 and argv[1:3] == ["-m", "orchestrator.sim"]
            if pid != me and not server and any(v in line for v in values):
                seen.append(f"command line of process {pid}: {argv[:2]}")

    with local_leftovers_restored(home, path):
        with started_cli("sweep", str(path), "--results", str(results), "-q", env=env) as proc:
            done = threading.Event()
            watcher = threading.Thread(target=lambda: wait_until(lambda: look() or done.is_set(), timeout=170))
            watcher.start()
            try:
                out, err = proc.communicate(timeout=scaled(180))
            finally:
                done.set()
                watcher.join(30)
        outputs = [subprocess_result(proc, out, err)]
        outputs += [run_cli("validate", str(path), env=env), run_cli("validate", str(bad_url), env=env)]
        outputs += [run_cli("plan", str(path), "--json", env=env), run_cli("sweep", str(path), "--dry-run", env=env)]
    outcome.sweeps = 1
    assert proc.returncode == EXIT_POINTS_FAILED, err  # the two configurations with a bad option fail
    assert out.strip() == str(only_run_dir(results, "classes")), out  # -q: the run directory alone on stdout
    assert "service.environment.HF_TOKEN: a secret written inline" in err, err  # and the warning on stderr
    assert outputs[2].returncode == 2 and "server.url" in outputs[2].stderr, outputs[2].stderr
    run_dir = only_run_dir(results, "classes")
    statuses = sorted(json.loads(line)["status"] for line in (run_dir / "records.jsonl").read_text().splitlines())
    assert statuses == ["failed", "failed", "ok"], statuses
    # The server's own output file (as journald is a unit's) holds what the server printed; specsweep's copies
    # of it (windows/, the failures' evidence) are searched with the run directory.
    # (named after the port it listens on: orchestrator/services/__init__.py)
    server_logs = {str(p) for p in (home / ".local" / "state" / "specsweep").glob("server-*.log")}
    leaks = list(seen)
    for value in values:
        leaks += _files_containing(results, value.encode())
        leaks += [p for p in _files_containing(home, value.encode()) if p not in server_logs]
        leaks += [f"output of {' '.join(o.args[3:5])}" for o in outputs if value in o.stdout + o.stderr]
    outcome.secret_checks = sum(1 for p in [*results.rglob("*"), *home.rglob("*")] if p.is_file()) + len(outputs)
    outcome.secret_checks += 1  # the command lines, sampled while the sweep ran
    outcome.secret_leaks = len(leaks)
    outcome.detail = "; ".join(sorted(set(leaks)))
    assert not leaks, sorted(set(leaks))


def subprocess_result(proc: Any, out: str, err: str) -> Any:
    import subprocess

    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
