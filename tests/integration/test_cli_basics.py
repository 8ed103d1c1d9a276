"""The CLI as a user runs it: a real subprocess, exit codes, one-line errors, the JSON shape scripts rely on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from orchestrator import __version__
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, cwd=ROOT, timeout=scaled(120)
    )


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"specsweep {__version__}"


def test_plan_json_shape() -> None:
    result = run("plan", "sweeps/k26-ddtree.yaml", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["totals"]["deployments"] == 11
    assert data["totals"]["load_points"] == 44 * 3  # load.repeats: 3
    assert data["totals"]["restarts"] == 11
    assert data["totals"]["eta_seconds"] > 0
    first = data["deployments"][0]
    assert {"id", "variant", "params", "load_points"} <= set(first)
    assert first["load_points"][0]["concurrency"] == 1


def test_plan_table_lists_totals() -> None:
    result = run("plan", "sweeps/demo.yaml")
    assert result.returncode == 0, result.stderr
    assert "6 deployments, 18 load points, 6 restarts" in result.stdout


def test_typo_is_one_line_with_suggestion_and_exit_2(tmp_path: Path) -> None:
    text = (ROOT / "sweeps" / "k26-ddtree.yaml").read_text().replace("budget: [7", "budegt: [7")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    for command in (["validate", str(bad)], ["plan", str(bad)]):
        result = run(*command)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        assert "did you mean 'budget'" in result.stderr
        assert f"{bad}:24:" in result.stderr


def test_validate_reports_every_file(tmp_path: Path) -> None:
    bad = tmp_path / "empty.yaml"
    bad.write_text("")
    result = run("validate", "sweeps/demo.yaml", str(bad))
    assert result.returncode == 2
    assert "ok sweeps/demo.yaml" in result.stdout
    assert "empty" in result.stderr


def test_missing_file() -> None:
    result = run("plan", "sweeps/nope.yaml")
    assert result.returncode == 2
    assert "no such file" in result.stderr and "Traceback" not in result.stderr


def test_validate_counts_points_as_plan_does() -> None:
    """With repeats, ``validate`` counted every measurement as a load point (132) where ``plan`` says 44 load
    points and 132 measurements (issue 59, item 7): both now say the same."""
    validated = run("validate", "sweeps/k26-ddtree.yaml")
    planned = run("plan", "sweeps/k26-ddtree.yaml")
    assert validated.returncode == 0 and planned.returncode == 0, validated.stderr + planned.stderr
    said = "44 load points (132 measurements with their repeats and restarts)"
    assert f"11 deployments, {said}, 11 restarts" in validated.stdout, validated.stdout
    assert said in " ".join(planned.stdout.split()), planned.stdout
