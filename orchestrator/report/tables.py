"""The report's tables and sentences, from an ``Analysis``: what a reader wants before any figure.

Tables come back as pandas frames (a notebook shows them as they are); ``formatted`` turns one into text
cells for Markdown and HTML. Findings repeated at several loads of one configuration are grouped, so the
field report's bug reads as one line naming four loads, not four lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from orchestrator.analysis.checks import Finding
from orchestrator.analysis.result import Analysis

__all__ = [
    "FindingGroup",
    "accept_table",
    "failed_points",
    "findings_by_check",
    "findings_table",
    "formatted",
    "group_findings",
    "headline",
    "latency_table",
    "run_overview",
    "speedup_table",
    "summary_table",
    "throughput_table",
    "winners_table",
]


@dataclass
class FindingGroup:
    """One check's finding on one configuration (and host), at every load where it holds."""

    check: str
    severity: str
    config: str | None
    host: str | None
    loads: list[str]
    message: str
    evidence: list[str] = field(default_factory=list)
    points: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        parts = []
        if self.config:
            parts.append(self.config)
        if self.loads:
            parts.append("at " + ", ".join(self.loads))
        if self.host:
            parts.append(f"on {self.host}")
        return " ".join(parts) if parts else "whole run"


def group_findings(findings: list[Finding]) -> list[FindingGroup]:
    """Group findings by (severity, check, configuration, host), keeping the first message and evidence."""
    groups: dict[tuple[Any, ...], FindingGroup] = {}
    for finding in findings:
        if finding.config is None and finding.point is None and finding.load is None:
            key: tuple[Any, ...] = (finding.severity, finding.check, None, finding.host, finding.message)
        else:
            key = (finding.severity, finding.check, finding.config, finding.host, None)
        group = groups.get(key)
        if group is None:
            group = groups[key] = FindingGroup(
                check=finding.check,
                severity=finding.severity,
                config=finding.config,
                host=finding.host,
                loads=[],
                message=finding.message,
                evidence=list(finding.evidence),
            )
        if finding.load and finding.load not in group.loads:
            group.loads.append(finding.load)
        if finding.point:
            group.points.append(finding.point)
    return list(groups.values())


def findings_by_check(findings: list[Finding]) -> pd.DataFrame:
    """One row per (check, severity): how many points and which configurations it concerns."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for finding in findings:
        row = rows.setdefault(
            (finding.severity, finding.check),
            {"severity": finding.severity, "check": finding.check, "points": 0, "configurations": []},
        )
        if finding.point:
            row["points"] += 1
        if finding.config and finding.config not in row["configurations"]:
            row["configurations"].append(finding.config)
    out = []
    for row in rows.values():
        configs = row["configurations"]
        shown = ", ".join(configs[:4]) + (f", … ({len(configs)} in all)" if len(configs) > 4 else "")
        out.append({**row, "configurations": shown or "(whole run)"})
    return pd.DataFrame(out, columns=["severity", "check", "points", "configurations"])


def findings_table(findings: list[Finding]) -> pd.DataFrame:
    """Grouped findings (one row per check and configuration) with the loads they hold at."""
    rows = [
        {
            "severity": g.severity,
            "check": g.check,
            "configuration": g.config or "",
            "loads": ", ".join(g.loads),
            "host": g.host or "",
            "message": g.message,
            "evidence": "\n".join(g.evidence),
        }
        for g in group_findings(findings)
    ]
    return pd.DataFrame(rows, columns=["severity", "check", "configuration", "loads", "host", "message", "evidence"])


def run_overview(analysis: Analysis) -> pd.DataFrame:
    """What the run was: id, experiment, engine, state, times, hosts, baselines, point counts, findings."""
    info = analysis.run.info
    statuses = analysis.status_counts()
    counts = analysis.counts()
    items = [
        ("run", info.run_id),
        ("experiment", info.experiment),
        ("engine", str(analysis.run.experiment.get("engine", "?"))),
        ("state", info.state),
        ("started", info.started_at),
        ("ended", info.ended_at or "(not ended)"),
        ("hosts", ", ".join(_hosts(analysis))),
        ("baselines", f"AR = {analysis.roles.ar or 'none'}, linear = {analysis.roles.linear or 'none'}"),
        (
            "points",
            f"{statuses['ok']} ok, {statuses['failed']} failed, {statuses['skipped']} skipped "
            f"({analysis.run.planned_points} planned per host)",
        ),
        ("findings", f"{counts['error']} errors, {counts['warning']} warnings, {counts['info']} notes"),
        ("throughput figure", analysis.metric),
    ]
    return pd.DataFrame(items, columns=["", "value"]).set_index("")


def _hosts(analysis: Analysis) -> list[str]:
    return sorted(set(analysis.frame["host"]))


def headline(analysis: Analysis) -> list[str]:
    """One sentence per load level: who wins, by how much against AR and linear, and over whom."""
    sentences = []
    several_hosts = len(_hosts(analysis)) > 1
    unit = "tok/s"
    for row in analysis.best.to_dict("records"):
        parts = [f"{row['load_label']}" + (f" on {row['host']}" if several_hosts else "") + ":"]
        parts.append(f"{row['label']} is fastest at {row[analysis.metric]:.1f} {unit}")
        ratios = []
        for column, name in (("speedup_vs_ar", "AR"), ("speedup_vs_linear", "linear")):
            value = row.get(column)
            if isinstance(value, float) and not math.isnan(value) and row["label"] != _baseline_name(analysis, name):
                ratios.append(f"{value:.2f}× {name}")
        if ratios:
            parts.append("(" + ", ".join(ratios) + ")")
        margin = row.get("margin")
        if row.get("runner_up") and isinstance(margin, float) and not math.isnan(margin):
            parts.append(f"ahead of {row['runner_up']} by {margin:.0%}")
        flagged = sorted(
            {
                f.check
                for f in analysis.findings
                if f.severity == "error"
                and f.config == row["label"]
                and f.load == row["load_label"]
                and f.host == row["host"]
            }
        )
        if flagged:
            parts.append(f"— but its figures fail checks: {', '.join(flagged)}")
        sentences.append(" ".join(parts) + ".")
    return sentences


def _baseline_name(analysis: Analysis, role: str) -> str | None:
    return analysis.roles.ar if role == "AR" else analysis.roles.linear


def winners_table(analysis: Analysis) -> pd.DataFrame:
    best = analysis.best
    columns = {
        "load_label": "load",
        "label": "best configuration",
        analysis.metric: "tok/s",
        "per_user_tok_s": "tok/s per user",
        "accept_len": "accept len",
        "speedup_vs_ar": "× AR",
        "speedup_vs_linear": "× linear",
        "runner_up": "runner-up",
        "margin": "margin",
    }
    if len(_hosts(analysis)) > 1:
        columns = {"host": "host", **columns}
    return best[[c for c in columns if c in best.columns]].rename(columns=columns)


def _measured(analysis: Analysis) -> pd.DataFrame:
    frame = analysis.frame
    return frame[frame["alias_of"].isna()]


def _pivot(analysis: Analysis, value: str, *, ok_only: bool = True) -> pd.DataFrame:
    rows = _measured(analysis)
    if ok_only:
        rows = rows[rows["status"] == "ok"]
    if value not in rows.columns or rows.empty:
        return pd.DataFrame()
    rows = rows.assign(_v=pd.to_numeric(rows[value], errors="coerce"))
    index = ["host", "label"] if len(_hosts(analysis)) > 1 else ["label"]
    loads = rows.sort_values(["mode", "load"])["load_label"].drop_duplicates().tolist()
    table = rows.pivot_table(index=index, columns="load_label", values="_v", aggfunc="last", sort=False)
    order = [label for label in dict.fromkeys(_measured(analysis)["label"])]
    if index == ["label"]:
        table = table.reindex([label for label in order if label in table.index])
    table = table.reindex(columns=[c for c in loads if c in table.columns])
    table.columns.name = None
    return table


def throughput_table(analysis: Analysis) -> pd.DataFrame:
    """Output tok/s: a row per configuration, a column per load."""
    return _pivot(analysis, analysis.metric)


def speedup_table(analysis: Analysis, against: str = "ar") -> pd.DataFrame:
    """Speedup over the AR (``ar``) or linear (``linear``) baseline: a row per configuration, a column per load."""
    return _pivot(analysis, f"speedup_vs_{against}")


def accept_table(analysis: Analysis) -> pd.DataFrame:
    """Accept length (tokens per verify step, bonus included): a row per configuration, a column per load."""
    return _pivot(analysis, "accept_len")


def latency_table(analysis: Analysis, metric: str = "ttft_ms_p50") -> pd.DataFrame:
    return _pivot(analysis, metric)


SUMMARY_COLUMNS = [
    "host",
    "variant",
    "label",
    "baseline",
    "mode",
    "load",
    "load_label",
    "status",
    "requests",
    "errors",
    "output_tok_s",
    "steady_output_tok_s",
    "per_user_tok_s",
    "accept_len",
    "accept_len_source",
    "speedup_vs_ar",
    "speedup_vs_linear",
    "accept_len_vs_linear",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "server_gen_throughput",
    "ddtree_avg_commit_len",
    "ddtree_avg_accepted_depth",
    "error_kind",
    "error_message",
    "point_id",
    "deployment_id",
]


def summary_table(analysis: Analysis) -> pd.DataFrame:
    """One row per configuration and load (summary.csv): parameters, figures, ratios, status."""
    rows = _measured(analysis)
    columns = [c for c in SUMMARY_COLUMNS[:3] if c in rows.columns]
    columns += [c for c in analysis.param_columns if c in rows.columns]
    columns += [c for c in SUMMARY_COLUMNS[3:] if c in rows.columns]
    return rows[columns].reset_index(drop=True)


def failed_points(analysis: Analysis) -> pd.DataFrame:
    """Points that failed or were skipped, with their reason and evidence lines."""
    rows = _measured(analysis)
    rows = rows[rows["status"] != "ok"]
    columns = [
        "label",
        "load_label",
        "host",
        "status",
        "error_kind",
        "error_message",
        "error_evidence",
        "window_file",
        "point_id",
    ]
    return rows[[c for c in columns if c in rows.columns]].reset_index(drop=True)


def _cell(value: Any, column: str) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if column.startswith(("speedup", "×")) or column.endswith("_vs_linear"):
            return f"{value:.2f}×"
        if column in ("margin",):
            return f"{value:.0%}"
        if "accept" in column:
            return f"{value:.2f}"
        return f"{value:,.1f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, list):
        return f"{len(value)} lines"
    return str(value)


def formatted(table: pd.DataFrame, *, kind: str = "") -> pd.DataFrame:
    """Text cells for Markdown/HTML: ratios as ``1.12×``, accept lengths with two decimals, the rest one.

    ``kind`` names what a pivot table's cells are (``speedup``, ``accept``) when its columns are loads."""
    out = table.copy()
    if out.index.name is not None or not isinstance(out.index, pd.RangeIndex):
        out = out.reset_index()
    for column in out.columns:
        name = str(column)
        if kind and name not in ("label", "host"):
            name = f"{kind}_{name}"
        out[column] = [_cell(v, name) for v in out[column]]
    return out
