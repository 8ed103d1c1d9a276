"""notebooks/sweep-results.ipynb runs headless (nbclient, a real kernel on loopback) against a run directory,
and is committed with its outputs cleared."""

from __future__ import annotations

import shutil
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


def run_notebook(run_dir: Path, workdir: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
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
    assert len(images) == 6
    text = "\n".join(str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", "")) for o in outputs)
    assert "depth_vs_commit" in text and "topk1_vs_chain" in text
    assert "is fastest at" in text
    assert not (run / "report.html").exists(), "the notebook reads the run directory, it does not write to it"
