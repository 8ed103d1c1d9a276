"""Reports built from a run directory alone: figures (matplotlib, Agg), tables, Markdown and self-contained
HTML, summary.csv, records.parquet and checks.json.

    build_report(run_dir) -> ReportResult     what ``specsweep report`` and the end of a sweep call
    figures.*   one function per figure, each returning a matplotlib Figure (or None: nothing to draw)
    tables.*    the report's tables as pandas frames, grouped findings, the headline sentences
"""

from orchestrator.report import figures, tables
from orchestrator.report.build import ReportResult, build_report, report_blocks, write_figures

__all__ = ["ReportResult", "build_report", "figures", "report_blocks", "tables", "write_figures"]
