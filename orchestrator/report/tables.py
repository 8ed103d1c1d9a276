"""The report's tables and sentences: what a reader wants before any figure.

What they say of points, loads and counts is the run's answer (``orchestrator/analysis/answer.py``): the
overview's counts, the headline sentences and the winners table (``Answer.loads``, the winner's own point for
its ratios), and every table of a figure per configuration and load (``Answer.points``, each figure with its
interval; a figure the answer does not carry is read from its analysis's frame). The findings' tables take the
answer's findings; summary.csv, the failed points' evidence and how the run was made read the analysis the
answer was made from (its frame's columns, the plan, the experiment).

Tables come back as pandas frames (a notebook shows them as they are); ``formatted`` turns one into text
cells for Markdown and HTML. Findings repeated word for word at several loads of one configuration are grouped,
so the field report's bug reads as one line naming four loads, not four lines; a finding whose message differs
from one load to the next keeps a line of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from orchestrator.analysis.answer import FIGURES, Answer, findings_text
from orchestrator.analysis.checks import Finding
from orchestrator.analysis.result import Analysis
from orchestrator.analysis.statuses import MEASURED
from orchestrator.experiment.slots import as_fields
from orchestrator.quoting import visible

__all__ = [
    "FindingGroup",
    "HowMade",
    "accept_table",
    "command_differences",
    "commands_table",
    "failed_points",
    "findings_by_check",
    "findings_table",
    "formatted",
    "group_findings",
    "headline",
    "how_made",
    "interval_table",
    "latency_table",
    "run_overview",
    "speedup_table",
    "summary_table",
    "throughput_table",
    "winners_table",
    "workload_table",
    "workload_text",
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
    """Group findings by (severity, check, configuration, host, message), keeping the first one's evidence: a
    finding that says the same at several loads is one group naming them all, and one whose message differs
    at another load (a degraded point's own count of lost requests) is a group of its own, never hidden
    behind the first load's message. A configuration's findings that name no load keep the first message."""
    groups: dict[tuple[Any, ...], FindingGroup] = {}
    for finding in findings:
        # A configuration's finding that names no load (lossless, per prompt) stays one group, as before.
        per_config = finding.config is not None and finding.load is None
        message = None if per_config else finding.message
        key: tuple[Any, ...] = (finding.severity, finding.check, finding.config, finding.host, message)
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
    """One row per (check, severity): how many points and which configurations it concerns. A point is a
    (host, configuration, load) a finding names (with or without its point id); a finding about the whole run
    names none, and its row says ``-``, not 0 beside a message that counts points itself."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for finding in findings:
        row = rows.setdefault(
            (finding.severity, finding.check),
            {"severity": finding.severity, "check": finding.check, "points": set(), "configurations": []},
        )
        if finding.point or (finding.config and finding.load):
            row["points"].add((finding.host, finding.config, finding.load, finding.point if not finding.load else None))
        if finding.config and finding.config not in row["configurations"]:
            row["configurations"].append(finding.config)
    out = []
    for row in rows.values():
        configs = row["configurations"]
        shown = ", ".join(configs[:4]) + (f", … ({len(configs)} in all)" if len(configs) > 4 else "")
        out.append({**row, "points": len(row["points"]) or "-", "configurations": shown or "(whole run)"})
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


def run_overview(made: Answer) -> pd.DataFrame:
    """What the run was: id, experiment, engine, state, times, hosts, baselines, and the answer's counts of points
    and findings."""
    analysis = made.analysis
    info = analysis.run.info
    statuses = made.counts
    counts = made.finding_counts()
    from orchestrator.runs.identity import playbook_verdict, run_kind

    verdict = playbook_verdict(analysis.path)
    items = [
        ("run", info.run_id),
        ("kind", run_kind(analysis.path) + (f", {verdict.sentence()}" if verdict is not None else "")),
        ("experiment", info.experiment),
        ("engine", str(analysis.run.experiment.get("engine", "?"))),
        ("state", info.state),
        ("started", info.started_at),
        ("ended", info.ended_at or "(not ended)"),
        ("hosts", ", ".join(_hosts(analysis))),
        ("baselines", f"AR = {analysis.roles.ar or 'none'}, linear = {analysis.roles.linear or 'none'}"),
        (
            "points",
            f"{statuses.ok} ok, {statuses.degraded} degraded, {statuses.failed} failed, {statuses.skipped} skipped "
            f"({statuses.planned} planned per host)",
        ),
        ("findings", findings_text(counts)),
        ("throughput figure", made.metric),
    ]
    return pd.DataFrame(items, columns=["", "value"]).set_index("")


def _hosts(analysis: Analysis) -> list[str]:
    return sorted(set(analysis.frame["host"]))


def _tied_text(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def headline(made: Answer) -> list[str]:
    """One sentence per load level of the answer: who wins, by how much against AR and linear, and over whom; or,
    when the best is within noise of others (the interval of the difference includes zero), that they are
    indistinguishable at that load, with the interval."""
    sentences = []
    analysis = made.analysis
    several_hosts = len(_hosts(analysis)) > 1
    unit = "tok/s"
    for lv in made.loads:
        parts = [f"{lv.load_label}" + (f" on {lv.host}" if several_hosts else "") + ":"]
        tied = lv.tied
        low, high = lv.margin_lo, lv.margin_hi
        interval = f"{low:+.1%} … {high:+.1%}" if low is not None and high is not None else None
        value = "?" if lv.value is None else f"{lv.value:.1f}"
        if lv.decided is False and tied:
            parts.append(
                f"{_tied_text([lv.winner, *tied])} are indistinguishable at this load "
                f"({lv.winner} {value} {unit}; difference to {lv.runner_up} {interval or '?'} "
                f"at {made.confidence:.0%})"
            )
            flagged_tie = sorted(
                {
                    f.check
                    for f in made.findings
                    if f.severity == "error"
                    and f.config in (lv.winner, *tied)
                    and (f.load == lv.load_label or (f.load is None and f.point is None))
                }
            )
            if flagged_tie:
                parts.append(f"— and some fail checks: {', '.join(flagged_tie)}")
            sentences.append(" ".join(parts) + ".")
            continue
        spread = f" ± {(lv.hi - lv.lo) / 2:.1f}" if lv.lo is not None and lv.hi is not None else ""
        parts.append(f"{lv.winner} is fastest at {value}{spread} {unit}")
        winner = made.point(lv.host, lv.workload, lv.winner, lv.load_label)
        ratios = []
        for figure, name in (("speedup_vs_ar", "AR"), ("speedup_vs_linear", "linear")):
            ratio = winner.value(figure) if winner is not None else None
            if ratio is not None and lv.winner != _baseline_name(analysis, name):
                ratios.append(f"{ratio:.2f}× {name}")
        if ratios:
            parts.append("(" + ", ".join(ratios) + ")")
        margin = lv.margin
        if lv.runner_up and margin is not None:
            if lv.decided is False:
                parts.append(f"but not told apart from {lv.runner_up} ({margin:+.1%}; {lv.basis})")
            elif lv.decided is True and interval:
                parts.append(f"ahead of {lv.runner_up} by {_percent(margin)} ({interval}, {lv.basis})")
            else:
                parts.append(f"ahead of {lv.runner_up} by {_percent(margin)}")
        flagged = sorted(
            {
                f.check
                for f in made.findings
                if f.severity == "error"
                and f.config == lv.winner
                and (f.load == lv.load_label or (f.load is None and f.point is None))
                and f.host in (lv.host, None)
            }
        )
        if flagged:
            parts.append(f"— but its figures fail checks: {', '.join(flagged)}")
        sentences.append(" ".join(parts) + ".")
    return sentences


def _percent(value: float) -> str:
    """``12%``, or with a decimal under 10% (``1.3%``, ``0.4%``): a small margin never reads as ``0%``."""
    return f"{value:.0%}" if abs(value) >= 0.1 else f"{value:.1%}"


def _baseline_name(analysis: Analysis, role: str) -> str | None:
    return analysis.roles.ar if role == "AR" else analysis.roles.linear


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


#: The winner's own figures the winners table shows beside the answer's load.
_WINNER_FIGURES = ("per_user_tok_s", "accept_len", "speedup_vs_ar", "speedup_vs_linear")


def winners_table(made: Answer) -> pd.DataFrame:
    """The answer's winner at each load: its figure and interval, its own point's per-user throughput, accept
    length and ratios, the runner-up, the margin with its interval, the verdict and those it is tied with."""
    metric = made.metric
    rows = []
    for lv in made.loads:
        winner = made.point(lv.host, lv.workload, lv.winner, lv.load_label)
        mine = {name: _nan(winner.value(name) if winner is not None else None) for name in _WINNER_FIGURES}
        rows.append(
            {
                "host": lv.host,
                "load_label": lv.load_label,
                "label": lv.winner,
                metric: _nan(lv.value),
                "interval": f"{lv.lo:,.1f} … {lv.hi:,.1f}" if lv.lo is not None and lv.hi is not None else "",
                "per_user_tok_s": mine["per_user_tok_s"],
                "accept_len": mine["accept_len"],
                "speedup_vs_ar": mine["speedup_vs_ar"],
                "speedup_vs_linear": mine["speedup_vs_linear"],
                "runner_up": lv.runner_up,
                # A percentage, as its interval beside it (a float column showed 1.31e-02 in the notebook).
                "margin": "" if lv.margin is None else f"{lv.margin:+.1%}",
                "margin interval": f"{lv.margin_lo:+.1%} … {lv.margin_hi:+.1%}"
                if lv.margin_lo is not None and lv.margin_hi is not None
                else "",
                "verdict": "ahead"
                if lv.decided is True
                else ("indistinguishable" if lv.decided is False else "not judged"),
                "tied with": ", ".join(lv.tied),
            }
        )
    best = pd.DataFrame(rows)
    columns = {
        "load_label": "load",
        "label": "best configuration",
        metric: "tok/s",
        "interval": f"tok/s {made.confidence:.0%} interval",
        "per_user_tok_s": "tok/s per user",
        "accept_len": "accept len",
        "speedup_vs_ar": "× AR",
        "speedup_vs_linear": "× linear",
        "runner_up": "runner-up",
        "margin": "margin",
        "margin interval": "margin interval",
        "verdict": "verdict",
        "tied with": "indistinguishable from",
    }
    if len(_hosts(made.analysis)) > 1:
        columns = {"host": "host", **columns}
    # A ratio no winner has (× linear in a run without a linear baseline) is left out, not a column of NaN.
    empty = {c for c in _WINNER_FIGURES if c in best.columns and best[c].isna().all()}
    return best[[c for c in columns if c in best.columns and c not in empty]].rename(columns=columns)


def interval_table(made: Answer, figure: str) -> pd.DataFrame:
    """``value ± half-width`` text cells of the answer's ``figure``: a row per configuration, a column per load
    (empty when no point has an interval)."""
    values = _answer_pivot(made, figure)
    lows = _answer_pivot(made, figure, "lo").reindex(index=values.index, columns=values.columns)
    highs = _answer_pivot(made, figure, "hi").reindex(index=values.index, columns=values.columns)
    if values.empty or lows.isna().all().all():
        return pd.DataFrame()
    digits = 2 if "accept" in figure else 1
    v, lo, hi = (t.to_numpy(dtype=float) for t in (values, lows, highs))
    cells = [
        [
            ""
            if math.isnan(v[i, j])
            else f"{v[i, j]:,.{digits}f}"
            + (f" ± {(hi[i, j] - lo[i, j]) / 2:,.{digits}f}" if not math.isnan(lo[i, j] + hi[i, j]) else "")
            for j in range(v.shape[1])
        ]
        for i in range(v.shape[0])
    ]
    return pd.DataFrame(cells, index=values.index, columns=values.columns)


def _measured(analysis: Analysis) -> pd.DataFrame:
    frame = analysis.frame
    return frame[frame["alias_of"].isna()]


def _pivot(analysis: Analysis, value: str, *, ok_only: bool = True) -> pd.DataFrame:
    rows = _measured(analysis)
    if ok_only:
        rows = rows[rows["status"].isin(MEASURED)]  # a degraded point keeps its figures (it is not ranked)
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


def _answer_pivot(made: Answer, figure: str, part: str = "value") -> pd.DataFrame:
    """The answer's ``figure`` (its ``value``, ``lo`` or ``hi``) of every point that has it: a row per configuration
    (per host and configuration when the run has several hosts), a column per load, in the order of the answer's
    points and loads; a figure the answer does not carry is read from its analysis's frame."""
    if figure not in FIGURES:
        return _pivot(made.analysis, figure if part == "value" else f"{figure}_{part}")
    several = len(_hosts(made.analysis)) > 1
    order: list[Any] = []
    loads: dict[str, tuple[str, float]] = {}
    cells: dict[Any, dict[str, float]] = {}
    for point in made.points:
        row = (point.host, point.label) if several else point.label
        if row not in order:
            order.append(row)
        found = point.figures.get(figure) if point.status in MEASURED else None
        if found is None:
            continue
        value = {"value": found.value, "lo": found.lo, "hi": found.hi}[part]
        loads.setdefault(point.load_label, (point.mode, point.load))
        if value is not None:
            cells.setdefault(row, {})[point.load_label] = value
    if not cells:
        return pd.DataFrame()
    columns = sorted(loads, key=lambda label: loads[label])
    columns = [c for c in columns if any(c in r for r in cells.values())]
    index = [row for row in order if row in cells]
    table = pd.DataFrame(
        [[cells[row].get(c, math.nan) for c in columns] for row in index],
        index=pd.MultiIndex.from_tuples(index, names=["host", "label"]) if several else pd.Index(index, name="label"),
        columns=columns,
        dtype=float,
    )
    return table


def pareto_table(made: Answer) -> pd.DataFrame:
    """Every point of the answer's Pareto front (``Answer.pareto``), as the figure draws it: per-user throughput
    ascending; the figure labels only some of a long front (``figures.MAX_FRONT_LABELS``), this table all."""
    metric = made.metric
    rows: list[dict[str, Any]] = []
    for key in made.pareto:
        point = made.point(*key)
        if point is not None:
            host, workload, label, load = key
            row: dict[str, Any] = {"host": host, "workload": workload, "label": label, "load_label": load}
            row.update({"per_user_tok_s": _nan(point.value("per_user_tok_s")), metric: _nan(point.value(metric))})
            rows.append(row)
    if not rows:
        return pd.DataFrame()
    front = pd.DataFrame(rows)
    columns = {"label": "configuration", "load_label": "load", "per_user_tok_s": "per-user tok/s", metric: "tok/s"}
    if len(_hosts(made.analysis)) > 1:
        columns = {"host": "host", **columns}
    if front["workload"].astype(bool).any():
        columns = {"workload": "workload", **columns}
    by = [c for c in ("host", "workload") if c in columns] + ["per_user_tok_s"]
    ordered = front.sort_values(by, kind="stable")
    return ordered[list(columns)].rename(columns=columns).reset_index(drop=True)


def throughput_table(made: Answer) -> pd.DataFrame:
    """Output tok/s: a row per configuration, a column per load."""
    return _answer_pivot(made, made.metric)


def speedup_table(made: Answer, against: str = "ar") -> pd.DataFrame:
    """Speedup over the AR (``ar``) or linear (``linear``) baseline: a row per configuration, a column per load."""
    return _answer_pivot(made, f"speedup_vs_{against}")


def accept_table(made: Answer) -> pd.DataFrame:
    """Accept length (tokens per verify step, bonus included): a row per configuration, a column per load."""
    return _answer_pivot(made, "accept_len")


def accept_sources_note(made: Answer) -> str:
    """Where the accept lengths shown come from and how exact each is, counted over the points shown (ok and
    degraded, as :func:`accept_table`), as the answer has them:
    ``client (exact) 12 points; server (bounded) 2 points`` (orchestrator/engines/integrity.py, KINDS)."""
    counts: dict[str, int] = {}
    for point in made.points:
        found = point.figures.get("accept_len") if point.status in MEASURED else None
        if found is None:
            continue
        said = f"{found.source} ({found.exactness})" if found.exactness else found.source
        counts[said] = counts.get(said, 0) + 1
    if not counts:
        return ""
    parts = [f"{name} {n} point{'s' if n != 1 else ''}" for name, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    return "from " + "; ".join(parts)


def latency_table(made: Answer, metric: str = "ttft_ms_p50") -> pd.DataFrame:
    return _answer_pivot(made, metric)


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
    "accept_len_exactness",
    "output_tok_s_lo",
    "output_tok_s_hi",
    "accept_len_lo",
    "accept_len_hi",
    "ci_method",
    "ci_level",
    "windows",
    "tokens_per_joule",
    "gpu_utilization_pct",
    "gpu_power_w",
    "speedup_vs_ar",
    "speedup_vs_linear",
    "accept_len_vs_linear",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "tpot_ms_p50",
    "tpot_ms_p99",
    "e2e_ms_p50",
    "e2e_ms_p99",
    "requests_per_s",
    "server_gen_throughput",
    "ddtree_avg_commit_len",
    "ddtree_avg_accepted_depth",
    "error_kind",
    "error_message",
    "engine_version",
    "point_id",
    "deployment_id",
    "command",
]


def _with_slots(table: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """``table`` with each row's GPU slot and GPUs after its host (the frame's ``slot`` and ``gpus``, from the
    record's ``placement``: orchestrator/launchers/gpuslots.py), for a run with GPU slots."""
    if table.empty or "slot" not in rows.columns or not rows["slot"].notna().any() or "host" not in table.columns:
        return table
    table = table.copy()
    position = list(table.columns).index("host") + 1
    table.insert(position, "gpus", rows["gpus"].fillna("").tolist())
    table.insert(position, "slot", rows["slot"].fillna("").tolist())
    return table


def summary_table(analysis: Analysis) -> pd.DataFrame:
    """One row per configuration and load (summary.csv): parameters, figures, ratios, status; with GPU slots,
    each row's slot and GPUs."""
    rows = _measured(analysis)
    columns = [c for c in SUMMARY_COLUMNS[:3] if c in rows.columns]
    columns += [c for c in analysis.param_columns if c in rows.columns]
    columns += [c for c in SUMMARY_COLUMNS[3:] if c in rows.columns]
    table = rows[columns].reset_index(drop=True)
    # Counts (and a parameter, a concurrency) are whole numbers: a column that also has a point without one
    # (a failed point's requests, autoregressive's budget) would be floats, ``12.0``; nullable integers say 12.
    for column in ["load", *analysis.param_columns, *_COUNT_COLUMNS]:
        if column in table.columns:
            table[column] = _whole(table[column])
    return _with_slots(table, rows)


#: The summary's columns that count something.
_COUNT_COLUMNS = ("requests", "errors", "windows")


def _whole(values: pd.Series) -> pd.Series:
    """``values`` as nullable integers where every value present is a whole number (else as they are)."""
    if values.dtype == object or pd.api.types.is_bool_dtype(values):
        numbers = pd.to_numeric(values, errors="coerce")
        if numbers.notna().sum() != values.notna().sum():  # text among them: not a count
            return values
    else:
        numbers = values
    if not pd.api.types.is_numeric_dtype(numbers) or pd.api.types.is_bool_dtype(numbers):
        return values
    present = numbers.dropna()
    if present.empty or not bool(((present % 1) == 0).all()):
        return values
    return numbers.astype("Int64")


def failed_points(analysis: Analysis) -> pd.DataFrame:
    """Points that failed or were skipped, with their reason and evidence lines."""
    rows = _measured(analysis)
    rows = rows[rows["status"] != "ok"]  # failed, skipped and degraded (its why is in error_message)
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
    return _with_slots(rows[[c for c in columns if c in rows.columns]].reset_index(drop=True), rows)


def _cell(value: Any, column: str) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if column.startswith(("speedup", "×")) or column.endswith("_vs_linear"):
            return f"{value:.2f}×"
        if column in ("margin",):
            return f"{value:+.1%}"
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


@dataclass
class HowMade:
    """How a run was made, from its run directory: the engine and the version its servers reported, the
    workload every point ran, and the server command of each configuration (``plan.json``)."""

    engine: str
    #: The versions the servers reported (``engine_info.version`` of the records), each with its configurations.
    versions: list[tuple[str, list[str]]]
    workload: list[tuple[str, str]]
    #: (configuration, rendered server command, environment) in plan order; aliases named after the label.
    commands: list[tuple[str, str | None, dict[str, str]]]
    service: str

    @property
    def version_text(self) -> str:
        if not self.versions:
            return "not reported by the server"
        if len(self.versions) == 1:
            return self.versions[0][0]
        return "; ".join(f"{v} ({', '.join(labels)})" for v, labels in self.versions)

    @property
    def workload_text(self) -> str:
        return "; ".join(f"{k} {v}" for k, v in self.workload)


def workload_text(load: dict[str, Any]) -> list[tuple[str, str]]:
    """The workload settings of an experiment's ``load`` (as stored in the run), in reading order."""
    out: list[tuple[str, str]] = []
    if load.get("concurrency"):
        out.append(("concurrency", ", ".join(str(c) for c in load["concurrency"])))
    if load.get("rates"):
        out.append(("rates (req/s)", ", ".join(f"{r:g}" for r in load["rates"])))
        if load.get("max_in_flight"):
            out.append(("max in flight", str(load["max_in_flight"])))
    if load.get("duration") is not None:
        out.append(("duration per point", f"{float(load['duration']):g} s"))
    elif load.get("requests") is not None:
        out.append(("requests per point", str(load["requests"])))
    for key, name in (
        ("warmup", "warm-up requests per deployment"),
        ("prompts", "prompts"),
        ("max_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("seed", "seed"),
    ):
        if key in load and not (key == "prompts" and load.get("workloads")):  # workloads replace the prompts
            value = load[key]
            out.append((name, f"{value:g}" if isinstance(value, float) else str(value)))
    if isinstance(load.get("workloads"), dict) and load["workloads"]:
        out.append(("workloads", "; ".join(_workload_text(k, v) for k, v in load["workloads"].items())))
    if "ignore_eos" in load:
        out.append(("ignore_eos", "yes" if load["ignore_eos"] else "no"))
    if load.get("prompt_max_tokens"):
        out.append(("max_tokens per prompt", "each prompt's own where its file gives one, at most max_tokens"))
    if "stream" in load:
        out.append(("streaming", "yes" if load["stream"] else "no"))
    return out


def _workload_text(name: str, spec: Any) -> str:
    if not isinstance(spec, dict):
        return f"{name}: {spec}"
    extras = [f"{k} {spec[k]}" for k in ("format", "category", "max_tokens") if spec.get(k) not in (None, "auto")]
    return f"{name}: {spec.get('source')}" + (f" ({', '.join(extras)})" if extras else "")


def how_made(analysis: Analysis) -> HowMade:
    """How the run was made (:class:`HowMade`), from the stored experiment, the plan and the records."""
    from orchestrator.analysis.frame import config_label

    experiment = analysis.run.experiment
    versions: dict[str, list[str]] = {}
    frame = _measured(analysis)
    if "engine_version" in frame.columns:
        for version, label in zip(frame["engine_version"], frame["label"], strict=True):
            if isinstance(version, str) and version:
                labels = versions.setdefault(version, [])
                if label not in labels:
                    labels.append(str(label))
    commands: list[tuple[str, str | None, dict[str, str]]] = []
    for deployment in analysis.run.plan.get("deployments", []):
        if not isinstance(deployment, dict):
            continue
        label = config_label(str(deployment.get("variant")), dict(deployment.get("params") or {}))
        aliases = [
            config_label(str(a.get("variant")), dict(a.get("params") or {}))
            for a in deployment.get("aliases") or []
            if isinstance(a, dict)
        ]
        if aliases:
            label += " = " + ", ".join(aliases)
        command = deployment.get("command")
        environment = deployment.get("environment") or {}
        commands.append(
            (
                label,
                visible(as_fields(command)) if isinstance(command, str) else None,
                {str(k): visible(as_fields(str(v))) for k, v in environment.items()},
            )
        )
    service = experiment.get("service") if isinstance(experiment.get("service"), dict) else {}
    kind = str((service or {}).get("kind", "?"))
    where = (service or {}).get("unit") or ""
    load = experiment.get("load") if isinstance(experiment.get("load"), dict) else {}
    return HowMade(
        engine=str(experiment.get("engine", "?")),
        versions=list(versions.items()),
        workload=workload_text(load or {}),
        commands=commands,
        service=f"{kind} {where}".strip(),
    )


def workload_table(analysis: Analysis) -> pd.DataFrame:
    """The workload every point ran (setting, value)."""
    return pd.DataFrame(how_made(analysis).workload, columns=["setting", "value"])


def commands_table(analysis: Analysis) -> pd.DataFrame:
    """The server command (and environment) of each configuration, from ``plan.json``; no environment column
    when no configuration sets one."""
    rows = [
        {
            "configuration": label,
            "server command": command if command is not None else "(none: the server is not started)",
            "environment": " ".join(f"{k}={v}" for k, v in env.items()),
        }
        for label, command, env in how_made(analysis).commands
    ]
    frame = pd.DataFrame(rows, columns=["configuration", "server command", "environment"])
    return frame.drop(columns=["environment"]) if not frame["environment"].any() else frame


def command_differences(analysis: Analysis) -> tuple[str | None, pd.DataFrame]:
    """(the words every server command shares, with ``…`` where each differs; a row per configuration with what
    it puts there), or (None, :func:`commands_table`) when the commands share nothing or there is one: the
    report shows the differing (speculative) part of each command without a scrollbar."""
    made = how_made(analysis)
    commands = [(label, command, env) for label, command, env in made.commands if command is not None]
    if len(commands) < 2 or len(commands) != len(made.commands):
        return None, commands_table(analysis)
    head, middles, tail = command_parts([c for _l, c, _e in commands])
    if not head and not tail:
        return None, commands_table(analysis)
    rows = [
        {"configuration": label, "in place of …": middle or "(nothing)", "environment": " ".join(
            f"{k}={v}" for k, v in env.items())}
        for (label, _c, env), middle in zip(commands, middles, strict=True)
    ]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["configuration", "in place of …", "environment"])
    frame = frame.drop(columns=["environment"]) if not frame["environment"].any() else frame
    return " ".join(part for part in (head, "…", tail) if part), frame


def command_parts(commands: list[str]) -> tuple[str, list[str], str]:
    """(the words every command starts with, what is left of each, the words every command ends with), so
    that a list of long, nearly equal commands can be shown as their shared frame and their differences."""
    split = [c.split() for c in commands]
    if len(split) < 2:
        return "", [" ".join(s) for s in split], ""
    shortest = min(len(s) for s in split)
    head = 0
    while head < shortest and all(s[head] == split[0][head] for s in split):
        head += 1
    while head and split[0][head - 1].startswith("-"):
        head -= 1  # an option whose value differs stays with its value
    tail = 0
    while tail < shortest - head and all(s[len(s) - 1 - tail] == split[0][len(split[0]) - 1 - tail] for s in split):
        tail += 1
    while tail and not split[0][len(split[0]) - tail].startswith("-"):
        tail -= 1  # the shared end starts with an option, not with the value of one that differs
    middles = [" ".join(s[head : len(s) - tail]) for s in split]
    return " ".join(split[0][:head]), middles, " ".join(split[0][len(split[0]) - tail :]) if tail else ""
