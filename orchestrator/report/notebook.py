"""What ``notebooks/sweep-results.ipynb`` calls before anything else: which run to read, and tables rounded.

The run directory, first match wins:

1. ``RUN_DIR`` set in the notebook's ``parameters`` cell (papermill: ``-p RUN_DIR results/demo/<run id>``), any
   form ``specsweep report`` takes (a run directory, ``latest``, ``EXPERIMENT/latest``, an experiment file);
2. ``$SPECSWEEP_RUN``, the same forms;
3. the newest run under ``$SPECSWEEP_RESULTS``, ``./results`` or ``../results`` (the repository's, seen from
   ``notebooks/``);
4. the bundled example (``tests/data/runs/field-report``, the field report's numbers), so a fresh clone works.

Tables show two decimals (``pandas`` display precision), which is what the figures are good for.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.errors import StoreError

__all__ = ["RUN_ENV", "choose_run", "setup"]

RUN_ENV = "SPECSWEEP_RUN"
_EXAMPLE = Path("tests") / "data" / "runs" / "field-report"


def _roots() -> list[Path]:
    from orchestrator.runs.runref import RESULTS_ENV

    roots = [Path(os.environ[RESULTS_ENV]).expanduser()] if os.environ.get(RESULTS_ENV) else []
    return [*roots, Path("results"), Path("..") / "results"]


def choose_run(run_dir: str | Path | None = None) -> Path:
    """The run directory the notebook reads (module docstring)."""
    from orchestrator.runs.runref import all_runs, resolve_run

    for chosen in (run_dir, os.environ.get(RUN_ENV)):
        if chosen is not None and str(chosen) != "":
            return resolve_run(chosen)
    for root in _roots():
        runs = all_runs(root)
        if runs:
            return runs[-1]
    # A checkout's example, seen from here, from notebooks/, or from the package (an editable install).
    for base in (Path("."), Path(".."), Path(__file__).resolve().parents[2]):
        if (base / _EXAMPLE / "run.json").is_file():
            return base / _EXAMPLE
    raise StoreError(f"no run to show: set RUN_DIR in the parameters cell or ${RUN_ENV}")


def setup(run_dir: str | Path | None = None, *, precision: int = 2) -> Path:
    """Round the tables the notebook shows and return the run directory it reads (:func:`choose_run`)."""
    import pandas as pd

    pd.set_option("display.precision", precision)
    pd.set_option("display.max_columns", 200)
    return choose_run(run_dir)
