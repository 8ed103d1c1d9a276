"""Shared by the real-engine table scripts (sglang_cpu_table.py, sglang_tree_table.py, vllm_cpu_table.py): a run's
analysis and records, a figure as a table cell, and the findings printed under the table."""

from __future__ import annotations

import math
from typing import Any

from orchestrator.analysis import analyse
from orchestrator.analysis.result import Analysis
from orchestrator.runs.store import Record, RunStore


def cell(value: Any, digits: int = 2) -> str:
    """A figure with ``digits`` decimals; ``-`` for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{float(value):.{digits}f}"


def open_run(run_dir: str) -> tuple[Analysis, dict[str, Record]]:
    """The run's analysis and its records by point id."""
    return analyse(run_dir), {r.point_id: r for r in RunStore.open(run_dir).records()}


def print_findings(analysis: Analysis) -> None:
    """Every error and warning of the run, one line each, after a blank line."""
    print()
    for finding in analysis.findings:
        if finding.severity != "info":
            print(f"- {finding.check} ({finding.severity}): {finding.message}")
