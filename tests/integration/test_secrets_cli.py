"""Issue 40, secrets through the real CLI as a subprocess: the warning of a secret written inline under ``-q`` and
``--json``, an invalid ``server.url`` whose error never prints the password it holds, and a terminal's output
(the live display in a pseudo-terminal) redacted as piped output is."""

from __future__ import annotations

import json
import os
import pty
import secrets
import select
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import (
    SMALL_LOAD,
    cli_command,
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    only_run_dir,
    run_cli,
    write_experiment,
)
from tests.timing import scaled

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("flag", ["-q", "--json"])
def test_the_inline_secret_warning_shows_under_quiet_and_json(tmp_path: Path, flag: str) -> None:
    """``-q`` (and ``--json``) hide progress, and the warning came only as progress: a user who asked for quiet
    output was never told their file holds a token in clear. The warning goes to stderr with file:line and the
    key, never the value; stdout stays the run directory alone (or the JSON)."""
    token = f"hf_{secrets.token_hex(12)}"
    home = tmp_path / "home"
    home.mkdir()
    doc: dict[str, Any] = local_experiment("quiet", free_port(), {"ar": "--algorithm ar"})
    doc["load"] = {**SMALL_LOAD, "concurrency": [1]}
    doc["service"]["environment"] = {"HF_TOKEN": token}
    path = write_experiment(tmp_path / "quiet.yaml", doc)
    results = tmp_path / "results"
    with local_leftovers_restored(home, path):
        proc = run_cli("sweep", str(path), "--results", str(results), flag, "--no-report", env=cli_env(home))
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run_dir(results, "quiet")
    if flag == "-q":
        assert proc.stdout.strip() == str(run_dir), proc.stdout
    else:
        assert json.loads(proc.stdout)["exit_code"] == 0
    warnings = [line for line in proc.stderr.splitlines() if "written inline" in line]
    assert len(warnings) == 1, proc.stderr
    assert warnings[0].startswith(f"warning {path}:") and "service.environment.HF_TOKEN" in warnings[0]
    assert token not in proc.stdout + proc.stderr


URLS = [
    pytest.param("http://bob:{pw}@127.0.0.1:99999", "Port out of range", id="port-out-of-range"),
    pytest.param("http://bob:{pw}@127.0.0.1:30x1", "could not be cast", id="port-not-a-number"),
    pytest.param("http://bob:{pw}@[::1", "Invalid IPv6 URL", id="unclosed-ipv6"),
    pytest.param("bob:{pw}@127.0.0.1:3000", "expected an http://", id="no-scheme"),
    pytest.param("http://bob:{pw}@exa mple.com", "expected an http://", id="a-space"),
    pytest.param("http://bob:{pw}@127.0.0.1:0", "port 0", id="port-zero"),
    pytest.param("http://{pw}@exa mple.com", "expected an http://", id="token-as-user"),
    pytest.param("http://bob:p@{pw}@[::1", "Invalid IPv6 URL", id="at-in-password"),
]


@pytest.mark.parametrize(("url", "said"), URLS)
def test_an_invalid_server_url_never_prints_its_password(tmp_path: Path, url: str, said: str) -> None:
    password = f"pw{secrets.token_hex(8)}"
    doc = local_experiment("badurl", 30001, {"ar": "--algorithm ar"})
    doc["server"]["url"] = url.format(pw=password)
    path = write_experiment(tmp_path / "badurl.yaml", doc)
    env = cli_env(tmp_path)
    for args in (("validate", str(path)), ("sweep", str(path), "--dry-run"), ("plan", str(path), "--json")):
        proc = run_cli(*args, env=env)
        said_all = proc.stdout + proc.stderr
        assert proc.returncode == 2, (args, said_all)
        assert f"{path}:" in said_all and "server.url" in said_all and said in said_all, (args, said_all)
        assert password not in said_all, (args, said_all)
        assert "Traceback" not in said_all


def _in_a_terminal(argv: list[str], env: dict[str, str], limit: float = 200) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal as its stdin, stdout and stderr; its exit code and all it wrote. The
    child is killed (its process group) if it has not ended within ``limit`` seconds, or the test fails."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI, its streams the terminal
        try:
            os.chdir(Path(__file__).resolve().parents[2])
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    out = bytearray()
    deadline = time.monotonic() + scaled(limit)
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if fd in ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                out += data
        else:
            os.killpg(pid, signal.SIGKILL)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


def test_a_terminals_output_is_redacted_too(tmp_path: Path) -> None:
    """The live display wrote a failing server's error line, with the ``--api-key`` value it was given, to a
    terminal as it was (only piped output passed the redactor). Now the consoles redact what they render: the
    progress in a pseudo-terminal says the configuration did not start, masked, and the sweep ends normally."""
    value = f"-{secrets.token_hex(10)}"
    home = tmp_path / "home"
    home.mkdir()
    variants = {"ar": "--algorithm ar", "dash": f"--algorithm ar --api-key {value}"}
    doc: dict[str, Any] = local_experiment("tty", free_port(), variants, load={**SMALL_LOAD, "concurrency": [1]})
    doc["failure_policy"] = {"stop_on_baseline_failure": False}
    path = write_experiment(tmp_path / "tty.yaml", doc)
    env = {**cli_env(home), "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    with local_leftovers_restored(home, path):
        argv = cli_command("sweep", str(path), "--results", str(tmp_path / "results"), "--no-report")
        code, said = _in_a_terminal(argv, env)
    assert code == 3, said  # one configuration failed: the sweep ran to its end
    assert "\x1b[" in said and "points" in said, said  # a terminal's live display, colours and all
    assert "dash: did not start" in said and "--api-key [redacted]" in said, said
    assert value not in said, said


@pytest.mark.parametrize("flag", ["-q", "--json"])
def test_a_playbook_under_quiet_and_json_warns_of_an_inline_secret_too(tmp_path: Path, flag: str) -> None:
    token = f"hf_{secrets.token_hex(12)}"
    home = tmp_path / "home"
    home.mkdir()
    doc: dict[str, Any] = local_experiment("pbquiet", free_port(), {"ar": "--algorithm ar"})
    doc["service"]["environment"] = {"HF_TOKEN": token}
    path = write_experiment(tmp_path / "pbquiet.yaml", doc)
    playbook = Path(__file__).resolve().parents[2] / "playbooks" / "host-check.yaml"
    with local_leftovers_restored(home, path):
        proc = run_cli(
            "playbook", str(playbook), "-e", str(path), "--results", str(tmp_path / "r"), flag, env=cli_env(home)
        )
    assert proc.returncode == 1, proc.stderr  # nothing serves: the smoke test fails, as it should
    warnings = [line for line in proc.stderr.splitlines() if "written inline" in line]
    assert len(warnings) == 1 and "service.environment.HF_TOKEN" in warnings[0], proc.stderr
    assert token not in proc.stdout + proc.stderr
