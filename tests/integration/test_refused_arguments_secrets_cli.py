"""A server that refuses its arguments echoes them (argparse's ``unrecognized arguments``, vLLM's ``non-default
args``): the console masked the ``--api-key`` and ``--token`` values, but run.json's stop reason and the server's
log in the state directory (mode 0644) held them in clear (issue 58, S2). Every text a run stores passes the
console's redaction, and the log a server's output goes to is its user's alone, through the real CLI."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.reliability.harness import (
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    run_cli,
    run_dirs,
    write_experiment,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("refused_arguments_cli")]

API_KEY = "apikey-0123456789-refused"
TOKEN = "tokenvalue-abcdefghij-refused"


def test_a_server_echoing_refused_secret_arguments_leaves_them_in_no_stored_text(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # The simulator refuses both options (argparse) and prints them back with its usage, as real engines do.
    doc = local_experiment("refused", free_port(), {"autoregressive": f"--api-key {API_KEY} --token {TOKEN}"})
    doc["server"]["ready_timeout"] = "10s"
    doc["lossless"] = {"enabled": False}
    path = write_experiment(tmp_path / "refused.yaml", doc)
    results = tmp_path / "results"
    with local_leftovers_restored(home, path):
        proc = run_cli("sweep", str(path), "--results", str(results), "--no-report", env=cli_env(home), timeout=240)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert API_KEY not in proc.stdout + proc.stderr and TOKEN not in proc.stdout + proc.stderr
    (run,) = run_dirs(results, "refused")
    info = (run / "run.json").read_text()
    assert "unrecognized arguments" in info and "[redacted]" in info, info  # the reason is kept, masked
    for file in sorted(p for p in run.rglob("*") if p.is_file()):
        text = file.read_bytes().decode("utf-8", "replace")
        assert API_KEY not in text and TOKEN not in text, f"a secret in clear in {file.relative_to(run)}"
    state = home / ".local" / "state" / "specsweep"
    logs = sorted(state.glob("*.log"))
    assert logs, sorted(state.iterdir())
    for log in logs:  # the server's own output, as it wrote it: its user's alone
        assert API_KEY in log.read_text()
        assert stat.S_IMODE(log.stat().st_mode) & 0o077 == 0, oct(log.stat().st_mode)
