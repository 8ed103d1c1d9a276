"""A secret given through ``vars`` or a matrix value never lands in clear in the run (issue 49, "still open"),
through the real CLI: the plan renders it where it is a secret (``HF_TOKEN={tok}``, ``OPENAI_API_KEY={key}``),
and the run's experiment.yaml, where it stands as a bare value of ``vars`` or ``matrix``, holds ``[redacted]``
in its place (it held it in clear); ``--resume latest`` of that run sees no change in the experiment."""

from __future__ import annotations

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

pytestmark = [pytest.mark.timeout(400), pytest.mark.xdist_group("secret_values_cli")]

MATRIX_SECRET = "hfmatrix-0123456789-secret"
VARS_SECRET = "varskey-abcdefghij-secret"


def test_a_secret_in_vars_or_a_matrix_value_is_redacted_in_the_runs_experiment(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    load = {"concurrency": [1], "requests": 2, "warmup": 0, "max_tokens": 8}
    doc = local_experiment("sv", free_port(), {"autoregressive": "--algorithm ar"}, load=load)
    doc["variants"]["autoregressive"]["matrix"] = {"tok": [MATRIX_SECRET]}
    doc["vars"] = {"key": VARS_SECRET}
    doc["service"]["environment"] = {"HF_TOKEN": "{tok}", "OPENAI_API_KEY": "{key}"}
    doc["lossless"] = {"enabled": False}
    path = write_experiment(tmp_path / "sv.yaml", doc)
    env = cli_env(home)
    results = tmp_path / "results"
    with local_leftovers_restored(home, path):
        proc = run_cli("sweep", str(path), "--results", str(results), "--no-report", env=env, timeout=300)
        assert proc.returncode in (0, 3), proc.stderr
        (run,) = run_dirs(results, "sv")
        for file in sorted(p for p in run.rglob("*") if p.is_file()):
            text = file.read_bytes().decode("utf-8", "replace")
            assert MATRIX_SECRET not in text and VARS_SECRET not in text, f"a secret in clear in {file}"
        assert "[redacted]" in (run / "experiment.yaml").read_text()
        resumed = run_cli("sweep", str(path), "--results", str(results), "--resume", "latest", env=env, timeout=300)
        assert resumed.returncode in (0, 3), resumed.stderr
        assert "changed" not in resumed.stderr.lower(), resumed.stderr
        assert MATRIX_SECRET not in resumed.stdout + resumed.stderr
