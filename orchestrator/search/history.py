"""The search's history, as data: ``search/history.jsonl`` in the run directory, one line per measured
deployment (baselines included), in the order they finished.

Each line: ``n`` (its position), ``restarts`` (restarts spent when it finished, baselines included),
``deployment_id``, ``label``, ``variant``, ``params``, ``rung`` (0: the first measurement), ``baseline``,
``strategy``, ``score`` (:meth:`orchestrator.search.objective.Score.to_dict`) and ``best`` (the best
feasible candidate so far: label and value). A resumed search appends only what it has not written yet
(a line per deployment id), so the file reads the same as if the run had never stopped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from orchestrator.errors import StoreError
from orchestrator.runs.store import read_json_lines

__all__ = ["HISTORY_FILE", "SEARCH_DIR", "SearchHistory", "read_history"]

SEARCH_DIR = "search"
HISTORY_FILE = "history.jsonl"


def read_history(run_dir: str | Path) -> list[dict[str, Any]]:
    """The lines of a run's search history ([] when the run made no search); unreadable lines are skipped."""
    try:
        return read_json_lines(Path(run_dir) / SEARCH_DIR / HISTORY_FILE)
    except StoreError:  # an unreadable file reads as no history, as a missing one does
        return []


class SearchHistory:
    """Appends history lines (fsynced), once per deployment id."""

    def __init__(self, run_dir: Path | None) -> None:
        self.path = None if run_dir is None else run_dir / SEARCH_DIR / HISTORY_FILE
        self.rows: list[dict[str, Any]] = read_history(run_dir) if run_dir is not None else []
        self._written = {str(r.get("deployment_id")) for r in self.rows}

    def known(self, deployment_id: str) -> bool:
        return deployment_id in self._written

    def append(self, row: dict[str, Any]) -> None:
        if str(row.get("deployment_id")) in self._written:
            return
        self._written.add(str(row.get("deployment_id")))
        row = {"n": len(self.rows) + 1, **row}
        self.rows.append(row)
        if self.path is None:
            return
        from orchestrator.errors import StoreError

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row, default=str, separators=(",", ":")) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise StoreError(f"cannot write {self.path}: {exc.strerror or exc}") from exc
