"""The table a sweep ends with: each configuration's accept length and tok/s beside its baselines."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.table import Table

__all__ = ["summary_table"]


def _fmt(value: Any, pattern: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return pattern.format(value)


def summary_table(run_dir: Path) -> Table:
    """One row per measured point: host, configuration, load, status, tok/s, accept length, speedups."""
    from orchestrator.analysis import analyse

    analysis = analyse(run_dir)
    frame = analysis.frame
    frame = frame[frame["alias_of"].isna()] if "alias_of" in frame else frame
    pooled = frame["host"].nunique() > 1 if len(frame) else False
    counts = analysis.counts()
    table = Table(
        title=f"{analysis.experiment_name} ({analysis.run_id})",
        title_justify="left",
        caption=f"findings: {counts['error']} errors, {counts['warning']} warnings, {counts['info']} notes "
        f"(see report.md / checks.json)",
        caption_justify="left",
    )
    if pooled:
        table.add_column("host")
    for name, justify in (
        ("configuration", "left"),
        ("load", "right"),
        ("status", "left"),
        ("tok/s", "right"),
        ("accept", "right"),
        ("×AR", "right"),
        ("×linear", "right"),
        ("TTFT ms", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in frame.to_dict("records"):
        status = str(row.get("status"))
        cells = [
            str(row.get("label")) + (" *" if row.get("baseline") else ""),
            str(row.get("load_label")),
            status if status == "ok" else f"[red]{status}[/red]",
            _fmt(row.get("output_tok_s"), "{:,.1f}"),
            _fmt(row.get("accept_len"), "{:.2f}"),
            _fmt(row.get("speedup_vs_ar"), "{:.2f}x"),
            _fmt(row.get("speedup_vs_linear"), "{:.2f}x"),
            _fmt(row.get("ttft_ms_p50"), "{:,.0f}"),
        ]
        table.add_row(*([str(row.get("host"))] if pooled else []), *cells)
    return table
