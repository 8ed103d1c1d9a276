"""What ``notebooks/sweep-results.ipynb`` calls before anything else: which run to read, and tables rounded.

The run directory, first match wins:

1. ``RUN_DIR`` set in the notebook's ``parameters`` cell (papermill: ``-p RUN_DIR latest``), any form
   ``specsweep report`` takes (a run directory, ``latest``, ``latest-playbook``, ``EXPERIMENT/latest``, an
   experiment file);
2. ``$SPECSWEEP_RUN``, the same forms;
3. the newest sweep or search under the project's results directory (:func:`project_results`);
4. the bundled example (``tests/data/runs/field-report``, the field report's numbers), so a fresh clone works.

References resolve against the project's results directory wherever the kernel starts: ``jupyter nbconvert
--execute`` starts it in ``notebooks/``, papermill and JupyterLab where they were started. That directory is
``$SPECSWEEP_RESULTS``; else the nearest ``results/`` from the kernel's directory up to the project's root (the
first directory with a ``pyproject.toml`` or ``.git``); else the checkout's own ``results/`` (an editable
install), where ``sweeps/demo.yaml`` puts its runs. A relative run directory is tried from the kernel's directory,
then from the project's root.

A run without records (killed before its first point, a playbook of checks only) is refused with one line
(:class:`NotebookRunError`: the notebook shows its message, not a traceback), as ``specsweep report`` refuses it.

Tables show two decimals (``pandas`` display precision), which is what the figures are good for; the tables of
prose (findings, what a winner is tied with) are shown whole (:func:`whole`: they were cut at 50 characters).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from orchestrator.errors import StoreError

__all__ = ["RUN_ENV", "Note", "NotebookRunError", "Whole", "choose_run", "or_note", "project_results", "setup", "whole"]

RUN_ENV = "SPECSWEEP_RUN"
_EXAMPLE = Path("tests") / "data" / "runs" / "field-report"
_CHECKOUT = Path(__file__).resolve().parents[2]


class NotebookRunError(StoreError):
    """No run the notebook can show. IPython renders ``_render_traceback_`` in place of a traceback, so the
    cell's output is this one line (and papermill and nbconvert still fail on it)."""

    def _render_traceback_(self) -> list[str]:
        return [f"specsweep: {self}"]


def project_results() -> Path:
    """The project's results directory (module docstring): the CLI's rule for a command without an experiment
    file (``$SPECSWEEP_RESULTS``, else the nearest ``results/`` up to the project's root:
    ``orchestrator.runs.runref.nearest_results``), else the checkout's own; it may not exist yet."""
    from orchestrator.runs.runref import RESULTS_ENV, nearest_results

    if os.environ.get(RESULTS_ENV):
        return Path(os.environ[RESULTS_ENV]).expanduser()
    found = nearest_results()
    return found.resolve() if found is not None else _CHECKOUT / "results"


def _reference(text: str, root: Path) -> str:
    """A relative run directory that is not one from here, but is from the project's root, made absolute."""
    path = Path(text).expanduser()
    if path.is_absolute() or (path / "run.json").is_file():
        return text
    beside = root.parent / path
    return str(beside) if (beside / "run.json").is_file() else text


def choose_run(run_dir: str | Path | None = None) -> Path:
    """The run directory the notebook reads (module docstring); a :class:`NotebookRunError` when there is none
    to show."""
    from orchestrator.runs.identity import DEFAULT_KINDS, require_points
    from orchestrator.runs.runref import all_runs, of_kinds, resolve_run

    root = project_results()
    chosen: Path | None = None
    try:
        for ref in (run_dir, os.environ.get(RUN_ENV)):
            if ref is not None and str(ref) != "":
                chosen = resolve_run(_reference(str(ref), root), root)
                break
        else:
            runs = of_kinds(all_runs(root), DEFAULT_KINDS)
            chosen = runs[-1] if runs else _example()
        require_points(chosen, "show")
    except StoreError as exc:
        raise NotebookRunError(
            f"{exc}; set RUN_DIR in the parameters cell (papermill -p RUN_DIR ...) or ${RUN_ENV} to read another run"
        ) from exc
    return chosen


def _example() -> Path:
    # A checkout's example, seen from here, from notebooks/, or from the package (an editable install).
    for base in (Path("."), Path(".."), _CHECKOUT):
        if (base / _EXAMPLE / "run.json").is_file():
            return base / _EXAMPLE
    raise StoreError(f"no run to show under {project_results()}")


def setup(run_dir: str | Path | None = None, *, precision: int = 2) -> Path:
    """Round the tables the notebook shows and return the run directory it reads (:func:`choose_run`)."""
    import pandas as pd

    pd.set_option("display.precision", precision)
    pd.set_option("display.max_columns", 200)
    return choose_run(run_dir)


class Note(str):
    """A sentence a notebook cell shows in place of an empty table (plain text, and as Markdown in Jupyter)."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_markdown_(self) -> str:
        return f"*{self}*"


def or_note(table: Any, note: str) -> Any:
    """``table`` (a DataFrame), or ``note`` when it has no rows: a cell of a run without, say, workloads shows
    a sentence, not ``Empty DataFrame``."""
    return Note(note) if getattr(table, "empty", False) or table is None else table


class Whole:
    """A table shown with every cell whole (pandas cuts a cell at ``display.max_colwidth``, 50 characters: a
    finding's advice, the configurations a winner is tied with); the raw frame's cells stay cut."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def __repr__(self) -> str:
        import pandas as pd

        with pd.option_context("display.max_colwidth", None):
            return repr(self.table)

    def _repr_html_(self) -> str | None:
        import pandas as pd

        with pd.option_context("display.max_colwidth", None):
            show = getattr(self.table, "_repr_html_", None)
            return show() if show is not None else None


def whole(table: Any) -> Any:
    """``table`` shown with every cell whole (:class:`Whole`); a :class:`Note` as it is."""
    return table if isinstance(table, Note) else Whole(table)
