"""The report's table of accept length by source: each point's figure from the log, ``/metrics`` and the
responses, as the answer carries them (``Answer.accept_len_sources``: orchestrator/analysis/agreement.py).
It lays out the answer's figures and computes none."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from orchestrator.analysis.agreement import ACCEPT_SOURCES, SOURCE_NAMES
from orchestrator.report.render import Block, Heading, Paragraph, Table

if TYPE_CHECKING:
    from orchestrator.analysis.answer import Answer

__all__ = ["accept_sources_blocks", "accept_sources_table"]


def accept_sources_table(made: Answer) -> pd.DataFrame:
    """One row per point: its accept length from each source (``-`` where a source has none), the source the
    report uses (marked ``*``) and the largest difference between them."""
    rows = made.accept_len_sources
    hosts = {r.host for r in rows}
    workloads = {r.workload for r in rows}
    shown = [s for s in ACCEPT_SOURCES if any(s in r.values for r in rows)]
    out = []
    for r in rows:
        row: dict[str, str] = {}
        if len(hosts) > 1:
            row["host"] = r.host
        if workloads != {""}:
            row["workload"] = r.workload or "-"
        row["configuration"] = r.label
        row["load"] = r.load_label
        for source in shown:
            value = r.values.get(source)
            mark = "*" if source == r.used else ""
            row[SOURCE_NAMES[source]] = "-" if value is None else f"{value:.3f}{mark}"
        row["spread"] = "-" if r.spread is None else f"{r.spread:.1%}"
        out.append(row)
    return pd.DataFrame(out)


def accept_sources_blocks(made: Answer) -> list[Block]:
    """A heading, a sentence and the table; nothing for a run without accept lengths."""
    if not made.accept_len_sources:
        return []
    agree = sum(1 for r in made.accept_len_sources if r.spread is not None and r.spread == 0)
    several = sum(1 for r in made.accept_len_sources if r.spread is not None)
    said = f" The sources agree exactly at {agree} of the {several} points that have more than one." if several else ""
    return [
        Heading("Accept length by source"),
        Paragraph(
            "Each point's accept length (tokens per verify step, bonus included) from each source that gives one: "
            "the log's window, the /metrics counters' difference and the responses' own figures; * marks the one "
            "the report uses (the most exact), spread is the largest difference between them." + said,
            "muted",
        ),
        Table(accept_sources_table(made), "Accept length by source"),
    ]
