"""notebooks/sweep-results.ipynb runs headless (nbclient, a real kernel on loopback) against a run directory,
and is committed with its outputs cleared; and it runs as the README says a user runs it, with the tools of the
``[notebooks]`` extra: ``papermill NOTEBOOK OUT -p RUN_DIR latest`` and ``jupyter nbconvert --execute`` (whose
kernel starts in notebooks/), against a project's results/ holding a sweep and a newer playbook run; an empty run
is one line, not a traceback."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.timing import scaled

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "sweep-results.ipynb"
RUNS = ROOT / "tests" / "data" / "runs"
BIN = Path(sys.executable).parent


def _parameter_cell(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    cells = [c for c in notebook.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, "the notebook needs exactly one cell tagged 'parameters'"
    return cells[0]


def test_notebook_is_committed_with_outputs_cleared() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    assert "RUN_DIR" in _parameter_cell(notebook).source


def test_notebook_cells_only_call_the_library() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        for line in cell.source.splitlines():
            stripped = line.strip()
            # No logic of its own: no definitions, loops or branches, only calls and names.
            assert not stripped.startswith(("def ", "class ", "for ", "while ", "if ", "lambda")), line


def run_notebook(run_dir: Path | None, workdir: Path, *, papermill: bool = False) -> nbformat.NotebookNode:
    """Run the notebook headless; ``run_dir`` set as papermill does (a cell after the parameters cell) or in
    the parameters cell itself; None leaves the parameters cell as committed (RUN_DIR = None)."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    if run_dir is not None and papermill:
        cell = nbformat.v4.new_code_cell(f"RUN_DIR = {str(run_dir)!r}", metadata={"tags": ["injected-parameters"]})
        notebook.cells.insert(notebook.cells.index(_parameter_cell(notebook)) + 1, cell)
    elif run_dir is not None:
        _parameter_cell(notebook).source = f"RUN_DIR = {str(run_dir)!r}"
    client = nbclient.NotebookClient(
        notebook,
        timeout=round(scaled(300)),  # nbclient takes whole seconds
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()
    return notebook


def test_notebook_runs_headless_against_a_simulator_run(tmp_path: Path) -> None:
    # A run the simulator produced (with its commit-bug fault), imported by tests/data/runs/import_run.py.
    run = shutil.copytree(RUNS / "sim-commit-bug", tmp_path / "sim-commit-bug")
    notebook = run_notebook(run, tmp_path)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 7  # the run has no workloads: the workload heatmap and the CDFs draw nothing
    text = "\n".join(str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", "")) for o in outputs)
    assert "depth_vs_commit" in text and "topk1_vs_chain" in text
    assert "is fastest at" in text
    assert not (run / "report.html").exists(), "the notebook reads the run directory, it does not write to it"


def _text(notebook: nbformat.NotebookNode) -> str:
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"], [o for o in outputs if o.output_type == "error"]
    return "\n".join(str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", "")) for o in outputs)


@pytest.fixture
def environment() -> Iterator[dict[str, str]]:
    """The kernel's environment (it inherits this process's): set for one test, then put back."""
    saved = dict(os.environ)
    for name in ("SPECSWEEP_RUN", "SPECSWEEP_RESULTS"):
        os.environ.pop(name, None)
    try:
        yield os.environ  # type: ignore[misc]
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_the_run_comes_from_the_environment_and_papermill_overrides_it(
    tmp_path: Path, environment: dict[str, str]
) -> None:
    demo = shutil.copytree(RUNS / "sim-demo", tmp_path / "sim-demo")
    bug = shutil.copytree(RUNS / "sim-commit-bug", tmp_path / "sim-commit-bug")
    environment["SPECSWEEP_RUN"] = str(demo)
    assert f"run directory: {demo}" in _text(run_notebook(None, tmp_path))
    assert f"run directory: {bug}" in _text(run_notebook(bug, tmp_path, papermill=True))


def test_the_default_is_the_newest_run_and_tables_are_rounded(tmp_path: Path, environment: dict[str, str]) -> None:
    results = tmp_path / "results"
    older = shutil.copytree(RUNS / "sim-commit-bug", results / "sim" / "20250101T000000Z-000001")
    newer = shutil.copytree(RUNS / "sim-demo", results / "sim" / "20260101T000000Z-000002")
    assert older.name < newer.name
    environment["SPECSWEEP_RESULTS"] = str(results)
    text = _text(run_notebook(None, tmp_path))
    assert f"run directory: {newer}" in text
    # Two decimals in every table: no figure shows three or more (0.5.23-like versions have two). The findings'
    # messages and evidence are prose shown whole (notebook.whole), with the figures they quote as the finding says.
    from orchestrator.analysis.answer import answer

    for finding in answer(newer).findings:
        for prose in (finding.message, *finding.evidence):  # the evidence quotes its figures as the sources gave them
            text = text.replace(prose, "")
    assert "output_tok_s" in text and not re.findall(r"\b\d+\.\d{3,}\b", text), re.findall(r"\b\d+\.\d{3,}\b", text)


def test_without_runs_the_bundled_example_is_read(tmp_path: Path, environment: dict[str, str]) -> None:
    environment["SPECSWEEP_RESULTS"] = str(tmp_path / "none")
    text = _text(run_notebook(None, tmp_path))  # no results/ here nor above: the checkout's example
    assert "field-report" in text and "is fastest at" in text


# -- as a user runs it: the [notebooks] extra's tools, a project's results/ -----------------------------------


def _tool(name: str) -> Path:
    path = BIN / name
    assert path.exists(), f"{name} is not installed: pip install -e '.[notebooks]' (scripts/test.sh does)"
    return path


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A project as a clone has it after a sweep and then a playbook (whose checks failed): pyproject.toml,
    notebooks/sweep-results.ipynb, results/ with the sweep's run and, newer, the playbook's."""
    from tests.reliability.harness import cli_env, free_port, local_leftovers_restored, run_cli

    base = tmp_path_factory.mktemp("project")
    (base / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    (base / "notebooks").mkdir()
    shutil.copy(NOTEBOOK, base / "notebooks" / NOTEBOOK.name)
    results = base / "results"
    sweep = shutil.copytree(RUNS / "sim-demo", results / "demo" / "20260101T000000Z-000001")
    home = base / "home"
    home.mkdir()
    experiment = base / "sim-chain.yaml"
    port = free_port()
    experiment.write_text(
        (ROOT / "playbooks" / "experiments" / "sim-chain.yaml").read_text().replace("18182", str(port))
    )
    with local_leftovers_restored(home, experiment):
        proc = run_cli(
            "playbook", str(ROOT / "playbooks" / "single-chain-check.yaml"), "--experiment", str(experiment),
            "--var", "profile=tiny", "--var", "faults=--fault commit-bug", "--results", str(results),
            env=cli_env(home),
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    (playbook,) = (results / "single-chain-check").iterdir()
    return {"base": base, "notebook": base / "notebooks" / NOTEBOOK.name, "sweep": sweep, "playbook": playbook}


def _user_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPECSWEEP_RUN", "SPECSWEEP_RESULTS")}
    return {**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", **extra}


def _outputs_text(path: Path) -> tuple[str, list[dict[str, Any]]]:
    notebook = json.loads(path.read_text())
    outputs = [o for c in notebook["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    errors = [o for o in outputs if o["output_type"] == "error"]
    text = "\n".join("".join(o.get("data", {}).get("text/plain", "")) + "".join(o.get("text", "")) for o in outputs)
    return text, errors


def test_papermill_with_a_parameter_reads_the_latest_sweep_wherever_the_kernel_starts(
    project: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out.ipynb"
    # As the README says, from the project's root; and with the kernel in notebooks/, as nbconvert puts it.
    for cwd in (project["base"], project["base"] / "notebooks"):
        proc = subprocess.run(
            [_tool("papermill"), project["notebook"], out, "-p", "RUN_DIR", "latest", "--cwd", cwd],
            cwd=project["base"], env=_user_env(), capture_output=True, text=True, timeout=scaled(400),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        text, errors = _outputs_text(out)
        assert not errors
        # latest is the sweep, not the newer playbook run.
        assert f"run directory: {project['base'] / 'results' / 'demo' / project['sweep'].name}" in text, text[:800]


def test_plain_nbconvert_execute_runs_the_notebook_as_shipped(project: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "executed.ipynb"
    proc = subprocess.run(
        [_tool("jupyter"), "nbconvert", "--to", "notebook", "--execute", project["notebook"], "--output", out],
        cwd=project["base"], env=_user_env(), capture_output=True, text=True, timeout=scaled(400),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    text, errors = _outputs_text(out)
    assert not errors
    # The kernel sat in notebooks/: the default is still the project's newest sweep, not the bundled example.
    assert "run directory: " in text and project["sweep"].name in text and "field-report" not in text
    # latest through the environment, resolved against the project's results/ too.
    proc = subprocess.run(
        [_tool("jupyter"), "nbconvert", "--to", "notebook", "--execute", project["notebook"], "--output", out],
        cwd=project["base"], env=_user_env(SPECSWEEP_RUN="latest-playbook"), capture_output=True, text=True,
        timeout=scaled(400),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    text, errors = _outputs_text(out)
    assert not errors and project["playbook"].name in text
    assert "playbook, FAIL: 2 of 2 check(s) failed" in text  # the overview says what the run is


def test_an_empty_run_is_one_clear_line_not_a_traceback(project: dict[str, Path], tmp_path: Path) -> None:
    from orchestrator.runs.store import RunStore

    empty = RunStore.create(tmp_path / "results", "demo", {"name": "demo"}, {})
    empty.set_state("interrupted")
    out = tmp_path / "out.ipynb"
    proc = subprocess.run(
        [_tool("papermill"), project["notebook"], out, "-p", "RUN_DIR", str(empty.path)],
        cwd=tmp_path, env=_user_env(), capture_output=True, text=True, timeout=scaled(400),
    )  # fmt: skip
    assert proc.returncode != 0
    _text, errors = _outputs_text(out)
    assert len(errors) == 1
    (line,) = errors[0]["traceback"]
    assert line.startswith(f"specsweep: {empty.path}: nothing to show: this sweep run has no records"), line
    assert "IndexError" not in proc.stderr and "set RUN_DIR in the parameters cell" in line
