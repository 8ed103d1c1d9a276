"""Runs have a kind (sweep, search, playbook), and the commands that take a run say which they mean: the real CLI
as a subprocess on runs the simulator made (a playbook through ``specsweep playbook``, failing sweeps through
``specsweep sweep``) and on the bundled sweep runs made before run.json kept a kind.

- ``latest`` and ``ls`` mean the sweeps and searches; ``latest-playbook`` and ``ls --kind playbook`` the others;
- ``ls`` and ``report`` show a playbook's PASS or FAIL, never ``done`` / ``no findings: every check passed``;
- an empty run is refused by report, recommend and compare, and a run without a point that succeeded by
  recommend: one line naming the run, a non-zero exit, no traceback.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.runs.identity import run_kind
from orchestrator.runs.store import RunStore
from tests.reliability.harness import (
    ROOT,
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    run_cli,
    write_experiment,
)

pytestmark = pytest.mark.timeout(240)

RUNS = ROOT / "tests" / "data" / "runs"


@dataclass
class Results:
    root: Path
    sweep: Path  # the bundled demo run: a sweep made before run.json kept a kind
    playbook: Path  # the single-chain check on the commit bug, made after it: FAIL
    env: dict[str, str]


def _cli(results: Results | Path, *args: str, env: dict[str, str] | None = None) -> Any:
    root = results.root if isinstance(results, Results) else results
    environment = results.env if isinstance(results, Results) else env
    assert environment is not None
    return run_cli(*args, "--results", str(root), env=environment)


def _refused(proc: Any, *words: str) -> str:
    """The one line a refused command prints: non-zero, no traceback, naming what it says."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Results]:
    base = tmp_path_factory.mktemp("kinds")
    home = base / "home"
    home.mkdir()
    root = base / "results"
    sweep = shutil.copytree(RUNS / "sim-demo", root / "sim-demo" / "20260101T000000Z-000001")
    port = free_port()
    experiment = base / "sim-chain.yaml"
    experiment.write_text(
        (ROOT / "playbooks" / "experiments" / "sim-chain.yaml").read_text().replace("18182", str(port))
    )
    env = cli_env(home)
    with local_leftovers_restored(home, experiment):
        proc = run_cli(
            "playbook", str(ROOT / "playbooks" / "single-chain-check.yaml"), "--experiment", str(experiment),
            "--var", "profile=tiny", "--var", "faults=--fault commit-bug", "--results", str(root), env=env,
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # the commit bug fails both checks
    (playbook,) = (root / "single-chain-check").iterdir()
    yield Results(root, sweep, playbook, env)


def test_a_playbook_run_says_its_kind_in_run_json_and_older_runs_are_known_by_their_files(results: Results) -> None:
    assert json.loads((results.playbook / "run.json").read_text())["kind"] == "playbook"
    assert "kind" not in json.loads((results.sweep / "run.json").read_text())
    assert run_kind(results.sweep) == "sweep"
    # A playbook run made before run.json kept its kind is one all the same: its playbook.json says so.
    old = shutil.copytree(results.playbook, results.root.parent / "old-playbook" / results.playbook.name)
    info = json.loads((old / "run.json").read_text())
    del info["kind"]
    (old / "run.json").write_text(json.dumps(info))
    assert run_kind(old) == "playbook"
    # A search is known by its experiment's search section.
    search = RunStore.create(results.root.parent / "old-search", "s", {"name": "s", "search": {"strategy": "grid"}}, {})
    assert run_kind(search.path) == "search"


def test_latest_means_the_newest_sweep_not_a_newer_playbook(results: Results) -> None:
    report = _cli(results, "report", "latest", "--quiet")
    assert report.returncode == 0, report.stderr
    assert report.stdout.strip() == str(results.sweep / "report.html")
    recommend = _cli(results, "recommend", "latest")
    assert recommend.returncode == 0, recommend.stderr
    # the sweep's recommendations: a best per load (its points have no interval, so none is advised: issue 59)
    first = recommend.stdout.splitlines()[0]
    assert first.startswith("# specsweep recommend: ") and first.endswith("(grid)"), recommend.stdout
    assert "# C=1: best " in recommend.stdout, recommend.stdout
    # The playbook's run by its kind's name, and within its own name.
    named = _cli(results, "report", "latest-playbook", "--quiet")
    assert named.stdout.strip() == str(results.playbook / "report.html"), named.stderr
    within = _cli(results, "report", "single-chain-check/latest", "--quiet")
    assert within.stdout.strip() == str(results.playbook / "report.html"), within.stderr


def test_latest_without_a_sweep_says_which_kinds_there_are(results: Results, tmp_path: Path) -> None:
    root = tmp_path / "only-playbooks"
    shutil.copytree(results.playbook, root / "single-chain-check" / results.playbook.name)
    line = _refused(_cli(root, "report", "latest", env=results.env), "no sweep or search runs under")
    assert "1 playbook run there: latest-playbook names the newest" in line


def test_ls_lists_sweeps_by_default_and_playbooks_with_their_verdict_by_name(results: Results) -> None:
    default = _cli(results, "ls")
    assert default.returncode == 0, default.stderr
    sweep_id = json.loads((results.sweep / "run.json").read_text())["run_id"]
    assert sweep_id in default.stdout and "single-chain-check" not in default.stdout
    assert "1 playbook run not shown (--kind playbook)" in default.stdout
    playbooks = _cli(results, "ls", "--kind", "playbook")
    assert playbooks.returncode == 0, playbooks.stderr
    row = next(line for line in playbooks.stdout.splitlines() if "single-chain-check" in line)
    assert "FAIL" in row.split() and "done" not in row.split()
    assert sweep_id not in playbooks.stdout
    every = json.loads(_cli(results, "ls", "--kind", "all", "--json").stdout)
    kinds = {run["experiment"]: (run["kind"], run["state"]) for run in every["runs"]}
    assert kinds == {"demo": ("sweep", "done"), "single-chain-check": ("playbook", "FAIL")}
    verdict = next(run["verdict"] for run in every["runs"] if run["kind"] == "playbook")
    assert verdict["passed"] is False and verdict["counts"]["fail"] == 2
    table = _cli(results, "ls", "--kind", "all")
    assert "kind" in table.stdout and "playbook" in table.stdout
    _refused(_cli(results, "ls", "--kind", "bogus"), "--kind bogus: not a kind of run", "playbook")


def test_report_of_a_failed_playbook_leads_with_its_verdict(results: Results) -> None:
    proc = _cli(results, "report", "latest-playbook")
    assert proc.returncode == 0, proc.stderr
    assert "no findings: every check passed" not in proc.stdout
    first = proc.stdout.splitlines()[0]
    assert first.startswith("playbook single-chain-check: FAIL: 2 of 2 check(s) failed"), first
    markdown = (results.playbook / "report.md").read_text()
    assert "## Playbook verdict" in markdown and "FAIL: 2 of 2 check(s) failed" in markdown
    assert _cli(results, "report", "latest-playbook", "--strict", "--quiet").returncode == 1
    payload = json.loads(_cli(results, "report", "latest-playbook", "--json").stdout)
    assert payload["playbook"]["verdict"] == "FAIL"


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path, dict[str, str]]]:
    """An empty run (killed before its first point), and a sweep whose every request got HTTP 500."""
    base = tmp_path_factory.mktemp("failing")
    home = base / "home"
    home.mkdir()
    root = base / "results"
    env = cli_env(home)
    port = free_port()
    doc = local_experiment("allfail", port, {"errors": "--fault http-500-rate=1"}, baselines=[])
    path = write_experiment(base / "allfail.yaml", doc)
    with local_leftovers_restored(home, path):
        proc = run_cli("sweep", str(path), "--results", str(root), "--no-report", env=env)
    assert proc.returncode == 3, proc.stderr
    (all_failed,) = (root / "allfail").iterdir()
    empty = RunStore.create(root, "allfail", yaml_experiment(path), {"deployments": []})
    empty.set_state("interrupted")
    yield root, empty.path, all_failed, env


def yaml_experiment(path: Path) -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load(path.read_text()))


def test_an_empty_run_is_refused_by_report_recommend_and_compare(
    failing: tuple[Path, Path, Path, dict[str, str]],
) -> None:
    root, empty, all_failed, env = failing
    for command in (["report", str(empty)], ["recommend", str(empty)], ["compare", str(all_failed), str(empty)]):
        line = _refused(_cli(root, *command, env=env), str(empty), "has no records", "state interrupted")
        assert f"nothing to {command[0]}" in line
    assert not (empty / "report.html").exists()


def test_a_run_without_a_point_that_succeeded_is_refused_by_recommend(
    failing: tuple[Path, Path, Path, dict[str, str]],
) -> None:
    root, _empty, all_failed, env = failing
    line = _refused(_cli(root, "recommend", str(all_failed), env=env), "nothing to recommend", "succeeded")
    assert "(all_requests_failed/http_500: 2)" in line, line
    # Its report is still the place to read why each point failed.
    report = _cli(root, "report", str(all_failed), env=env)
    assert report.returncode == 0, report.stderr
