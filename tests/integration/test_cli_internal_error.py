"""The CLI's last line of defence: a bug (an exception that is not a SpecsweepError) mid-sweep becomes one line
naming the run directory and the saved traceback, the host is restored, and the exit code is 1.

The bug is injected into a real CLI process: the process service's apply starts the simulator, then raises.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.harness import (
    ROOT,
    SMALL_LOAD,
    cli_env,
    events,
    free_port,
    local_experiment,
    local_leftovers_restored,
    only_run_dir,
    wait_until,
    write_experiment,
)
from tests.timing import scaled

pytestmark = pytest.mark.timeout(120)

INJECT = """
import sys
import orchestrator.services.process as process
from orchestrator.cli.app import main

original = process.ProcessService.apply

def apply(self, deployment):
    original(self, deployment)  # the server really starts: the host is changed
    raise {error}

process.ProcessService.apply = apply
sys.argv[0] = "specsweep"
main()
"""


def _cli(code: str, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=cli_env(home, XDG_CACHE_HOME=str(home / ".cache")),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(100),
    )


def _port_closed(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize(
    "error", ['RuntimeError("boom\\nsecond line")', "UnicodeEncodeError('utf-8', '\\udc80', 0, 1, 'surrogates')"]
)
def test_a_bug_mid_sweep_is_one_line_the_traceback_is_saved_and_the_host_restored(tmp_path: Path, error: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    path = write_experiment(
        tmp_path / "bug.yaml", local_experiment("bug", port, {"ar": "--algorithm ar"}, load=SMALL_LOAD)
    )
    results = tmp_path / "results"
    with local_leftovers_restored(home, path):
        proc = _cli(INJECT.format(error=error), "sweep", str(path), "--results", str(results), home=home)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    run_dir = only_run_dir(results, "bug")
    lines = [ln for ln in proc.stderr.splitlines() if "internal error" in ln]
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert "a bug in specsweep" in line and error.split("(")[0] in line
    assert f"run directory: {run_dir} (hosts restored)" in line
    assert f"traceback saved to {run_dir / 'traceback.txt'}" in line
    saved = (run_dir / "traceback.txt").read_text()
    assert "Traceback (most recent call last)" in saved and "in apply" in saved
    # The runner's own restore ran before the error reached the CLI: no server left, the run marked failed.
    kinds = [e["kind"] for e in events(run_dir)]
    assert "deploy" in kinds and "restore" in kinds and kinds[-1] == "end"
    assert json.loads((run_dir / "run.json").read_text())["state"] == "failed"
    assert wait_until(lambda: _port_closed(port), timeout=30)


def test_a_bug_outside_a_run_saves_the_traceback_in_the_cache(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    code = (
        "import sys\nimport orchestrator.cli.commands.validate as v\n"
        "def boom(path):\n    raise KeyError('no such thing')\n"
        "v.load_experiment = boom\nfrom orchestrator.cli.app import main\nmain()\n"
    )
    proc = _cli(code, "validate", str(ROOT / "sweeps" / "demo.yaml"), home=home)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "internal error" in proc.stderr and "run directory" not in proc.stderr
    saved = list((home / ".cache" / "specsweep" / "tracebacks").glob("*.txt"))
    assert len(saved) == 1 and f"traceback saved to {saved[0]}" in proc.stderr
    assert "KeyError" in saved[0].read_text()


def test_an_exception_that_ends_a_thread_is_one_line_too(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    code = (
        "import threading\nimport orchestrator.cli.commands.validate as v\n"
        "real = v.load_experiment\n"
        "def load(path):\n"
        "    def work():\n        raise RuntimeError('a worker died')\n"
        "    t = threading.Thread(target=work, name='host-gpu1')\n    t.start()\n    t.join()\n"
        "    return real(path)\n"
        "v.load_experiment = load\nfrom orchestrator.cli.app import main\nmain()\n"
    )
    proc = _cli(code, "validate", str(ROOT / "sweeps" / "demo.yaml"), home=home)
    assert "Traceback" not in proc.stderr
    [line] = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "internal error" in line and "RuntimeError: a worker died" in line and line.endswith("(in host-gpu1)")
