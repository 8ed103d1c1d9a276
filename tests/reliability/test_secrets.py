"""An API key in an experiment never appears in a run directory, a report, a log, the CLI's output or an error.

The key is used for real (every request and scrape carries it), the sweep has a deployment that fails to
start and one whose requests fail (so error paths and their evidence are written too), and the report is
built. Then every byte the run left is searched for the key, and so are the CLI's outputs of ``sweep``,
``validate``, ``plan --json``, ``sweep --dry-run`` and of experiments that are invalid around the key.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.conftest import Outcome
from tests.reliability.harness import (
    SMALL_LOAD,
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    only_run_dir,
    run_cli,
    write_experiment,
)

pytestmark = pytest.mark.timeout(240)


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
    assert outputs[0].returncode == 0, outputs[0].stderr
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
    leaks = _files_containing(results, key.encode()) + _files_containing(home, key.encode())
    leaks += [f"output of {' '.join(o.args[3:5])}" for o in outputs if key in o.stdout + o.stderr]
    outcome.detail = "; ".join(leaks)
    assert not leaks, leaks
    assert '"status": "ok"' in outputs[0].stdout and '"status": "failed"' in outputs[0].stdout


@pytest.mark.parametrize("value", [pytest.param("list", id="as a list"), pytest.param("mapping", id="as a mapping")])
def test_a_mistyped_api_key_is_not_quoted_in_the_error(tmp_path: Path, value: str) -> None:
    from orchestrator.errors import ConfigError
    from orchestrator.experiment import load_experiment

    key = f"sk-specsweep-{secrets.token_hex(12)}"
    doc = local_experiment("secret", 1, {"ar": "--algorithm ar"})
    doc["server"]["api_key"] = [key] if value == "list" else {"value": key}
    with pytest.raises(ConfigError) as caught:
        load_experiment(write_experiment(tmp_path / "bad.yaml", doc))
    assert "api_key" in str(caught.value)
    assert key not in str(caught.value)
