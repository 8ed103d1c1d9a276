"""notebooks/sweep-results.ipynb runs headless (nbclient, a real kernel on loopback) against a run directory,
and is committed with its outputs cleared."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "sweep-results.ipynb"
RUNS = ROOT / "tests" / "data" / "runs"


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
        timeout=300,
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
    # Two decimals in every table: no figure shows three or more (0.5.23-like versions have two).
    assert "output_tok_s" in text and not re.findall(r"\b\d+\.\d{3,}\b", text), re.findall(r"\b\d+\.\d{3,}\b", text)


def test_without_runs_the_bundled_example_is_read(tmp_path: Path, environment: dict[str, str]) -> None:
    environment["SPECSWEEP_RESULTS"] = str(tmp_path / "none")
    text = _text(run_notebook(None, tmp_path))  # no results/ here nor above: the checkout's example
    assert "field-report" in text and "is fastest at" in text
