"""What a sweep ends with: every point beside its baselines, the best configuration at each load, and how the
run was made. It reads at any width (an 80-column terminal, a pipe, a CI log): the configuration and the load
are never cut (:mod:`orchestrator.cli.textfit`), rows are grouped by configuration, and the figures of least
value are left out first when the width runs short.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.markup import escape
from rich.text import Text

from orchestrator.analysis.deciding import decision_lines
from orchestrator.cli.textfit import Column, fit_table

if TYPE_CHECKING:
    from orchestrator.analysis import Analysis

__all__ = [
    "OneLine",
    "best_table",
    "findings_lines",
    "how_made_lines",
    "points_table",
    "summary_renderables",
    "summary_table",
]


def _fmt(value: Any, pattern: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return pattern.format(value)


#: (header, frame column, format, priority): the figures after the identifying columns, most valuable first.
_FIGURES: list[tuple[str, str, str, int]] = [
    ("tok/s", "output_tok_s", "{:,.1f}", 100),
    ("±", "output_tok_s_pm", "{:.1%}", 85),
    ("accept", "accept_len", "{:.2f}", 80),
    ("×AR", "speedup_vs_ar", "{:.2f}x", 70),
    ("×linear", "speedup_vs_linear", "{:.2f}x", 60),
    ("TTFT ms", "ttft_ms_p50", "{:,.0f}", 40),
    ("TPOT ms", "tpot_ms_p50", "{:,.1f}", 30),
    ("user tok/s", "per_user_tok_s", "{:,.1f}", 20),
]


def points_table(analysis: Analysis, width: int) -> RenderableType:
    """One row per measured point, grouped by configuration (named once, on its first row), fitted to ``width``."""
    frame = analysis.frame
    frame = frame[frame["alias_of"].isna()] if "alias_of" in frame else frame
    if "output_tok_s_lo" in frame.columns:
        # Half the throughput interval's width, relative to the figure: how sure the figure is.
        values = frame["output_tok_s"].astype(float)
        frame = frame.assign(
            output_tok_s_pm=(frame["output_tok_s_hi"].astype(float) - frame["output_tok_s_lo"].astype(float))
            / 2
            / values.where(values != 0)
        )
    pooled = bool(frame["host"].nunique() > 1) if len(frame) else False
    counts = analysis.counts()
    statuses = analysis.status_counts()
    all_ok = statuses["failed"] == 0 and statuses["skipped"] == 0 and statuses["degraded"] == 0
    ranked = "degraded" in analysis.ranked_statuses
    columns: list[Column] = []
    if pooled:
        columns.append(Column("host", "left", required=True))
    columns += [Column("configuration", "left", required=True, wrap=True), Column("load", "right", required=True)]
    if not all_ok:
        columns.append(Column("status", "left", required=True))
    present = [f for f in _FIGURES if f[1] in frame.columns and frame[f[1]].notna().any()] or _FIGURES[:1]
    columns += [Column(h, "right", required=(col == "output_tok_s"), priority=p) for h, col, _f, p in present]
    groups: dict[tuple[str, str], list[dict[Any, Any]]] = {}
    for record in frame.to_dict("records"):
        groups.setdefault((str(record.get("host")), str(record.get("label"))), []).append(record)
    rows: list[list[Any]] = []
    ends: list[int] = []
    for (host, label), members in groups.items():
        members.sort(key=lambda r: (str(r.get("mode")), float(r.get("load") or 0)))
        for position, row in enumerate(members):
            first = position == 0
            name = Text(label + (" *" if row.get("baseline") else "")) if first else Text("")
            cells: list[Any] = [Text(host) if first else Text("")] if pooled else []
            cells += [name, Text(str(row.get("load_label")))]
            if not all_ok:
                status = str(row.get("status"))
                cells.append(Text(status) if status == "ok" else Text(status, style="red"))
                if status == "degraded":
                    lost = row.get("lost_requests")
                    cells[-1] = Text(
                        f"degraded ({_fmt(lost, '{:.0f}')} of {_fmt(row.get('requests'), '{:.0f}')} lost)", style="red"
                    )
            cells += [Text(_fmt(row.get(col), fmt)) for _h, col, fmt, _p in present]
            rows.append(cells)
        ends.append(len(rows) - 1)
    caption = (
        f"{statuses['ok']} points ok"
        + (
            f", {statuses['degraded']} degraded, {statuses['failed']} failed, {statuses['skipped']} skipped"
            if not all_ok
            else ""
        )
        + (" (degraded: too many requests lost; not ranked)" if statuses["degraded"] and not ranked else "")
        + ("; * baseline" if bool(frame["baseline"].astype(bool).any()) else "")
        + "; findings: "
        f"{counts['error']} errors, {counts['warning']} warnings, {counts['info']} notes (report.md, checks.json)"
    )
    return fit_table(
        columns,
        rows,
        width,
        title=f"{analysis.experiment_name} ({analysis.run_id})",
        caption=caption,
        sections=ends[:-1],
    )


def best_table(analysis: Analysis, width: int) -> RenderableType:
    """The answer to the user's question: at each load, the fastest configuration, its ratios to the baselines,
    and the runner-up with the margin; what the winner rule said (``basis``) is in the title."""
    best = analysis.best
    if best.empty:
        return Text("best configuration at each load: no successful point to rank", style="yellow")
    pooled = best["host"].nunique() > 1
    bases = sorted({str(b) for b in best["basis"] if isinstance(b, str) and b != "only one point"})
    errors: dict[tuple[Any, Any, Any], list[str]] = {}
    for finding in analysis.findings:
        if finding.severity == "error":
            errors.setdefault((finding.host, finding.config, finding.load), []).append(finding.check)
    for (host, config, load), checks in list(errors.items()):
        if load is None and config is not None:  # a finding about the configuration at every load (lossless)
            for row in best.to_dict("records"):
                if row["label"] == config and (host is None or host == row["host"]):
                    errors.setdefault((row["host"], config, row["load_label"]), []).extend(checks)
    flagged = any(errors.get((r["host"], r["label"], r["load_label"])) for r in best.to_dict("records"))
    records = best.to_dict("records")
    beaten = [[str(x) for x in (row.get("beats") or [])] for row in records]
    # What the winner is tied with and what it beats are the answer itself: never dropped, only wrapped (one
    # configuration a line); the ratios to the baselines go first when the width runs short.
    columns = [Column("host", "left", required=True)] if pooled else []
    columns += [
        Column("load", "right", required=True),
        Column("best", "left", required=True, wrap=True),
        Column("tok/s", "right", required=True),
        Column("margin", "right", priority=80),
        Column("interval", "right", priority=45),
        Column("tied with", "left", required=any(row.get("tied") for row in records), wrap=True),
        Column("over", "left", required=any(beaten), wrap=True),
        Column("×AR", "right", priority=40),
        Column("×linear", "right", priority=30),
    ]
    if flagged:  # the error lines below the table say the same at any width
        columns.append(Column("fails checks", "left", priority=90, wrap=True))
    rows: list[list[Any]] = []
    for row, over in zip(records, beaten, strict=True):
        margin = row.get("margin")
        decided = row.get("decided")
        low, high = row.get("margin_lo"), row.get("margin_hi")
        interval = "-"
        if isinstance(low, float) and isinstance(high, float) and not (math.isnan(low) or math.isnan(high)):
            interval = f"{low:+.1%}…{high:+.1%}"
        margin_text = "tie" if decided is False else _fmt(margin, "{:+.1%}")
        cells: list[Any] = [Text(str(row["host"]))] if pooled else []
        cells += [
            Text(str(row["load_label"])),
            Text(str(row["label"])),
            Text(_fmt(row.get(analysis.metric), "{:,.1f}")),
            Text(margin_text if row.get("runner_up") else "-", style="yellow" if decided is False else ""),
            Text(interval if row.get("runner_up") else "-"),
            Text(",\n".join(row.get("tied") or []) or "-"),
            Text(",\n".join(over) or "-"),
            Text(_fmt(row.get("speedup_vs_ar"), "{:.2f}x")),
            Text(_fmt(row.get("speedup_vs_linear"), "{:.2f}x")),
        ]
        if flagged:
            checks = errors.get((row["host"], row["label"], row["load_label"])) or []
            cells.append(Text(", ".join(sorted(set(checks))) or "-", style="red" if checks else ""))
        rows.append(cells)
    basis = f"; {', '.join(bases)}" if bases else ""
    notes = [
        "tied with: not told apart from the best" if any(row.get("tied") for row in records) else "",
        "over: the ones it beats" if any(beaten) else "",
        "margin: best / runner-up - 1" if any(row.get("runner_up") for row in records) else "",
    ]
    caption = "; ".join(n for n in notes if n) or None
    return fit_table(
        columns,
        rows,
        width,
        title=f"best configuration at each load (by {analysis.metric}{basis})",
        caption=caption,
    )


def how_made_lines(analysis: Analysis) -> list[OneLine]:
    """How the run was made, in a few lines: engine and version, the workload, the server commands (their
    shared words once, then what each configuration changes). Each line is printed whole (``OneLine``): a
    command, a path or a JSON argument broken at the terminal's width could not be copied."""
    from orchestrator.report import tables

    made = tables.how_made(analysis)
    lines = [
        f"[bold]how it was made[/bold]: engine {escape(made.engine)}, version {escape(made.version_text)}; "
        f"service {escape(made.service)}",
        f"  workload: {escape(made.workload_text)}",
    ]
    commands = [(label, command) for label, command, _env in made.commands if command]
    if not commands:
        lines.append("  server commands: none (the server is not started by specsweep)")
        return [OneLine(line) for line in lines]
    # Only what ran: a search's plan holds every candidate of the grid, most of which it never deployed.
    measured = set(analysis.frame["label"]) if "label" in analysis.frame else set()
    ran = [(label, c) for label, c in commands if not measured or label.split(" = ")[0] in measured]
    never = len(commands) - len(ran)
    commands = ran or commands
    head, middles, tail = tables.command_parts([c for _l, c in commands])
    if head or tail:
        lines.append(f"  server command: {escape(head)} [dim]…[/dim] {escape(tail)}".rstrip())
        lines += [
            f"    {escape(label)}: {escape(middle) or '(nothing added)'}"
            for (label, _c), middle in zip(commands, middles, strict=True)
        ]
    else:
        lines += [f"  {escape(label)}: {escape(command)}" for label, command in commands]
    if never:
        lines.append(f"  and {never} more in the plan, never run (`specsweep plan` lists them)")
    return [OneLine(line) for line in lines]


class OneLine(str):
    """A line printed whole, never wrapped by us (``soft_wrap``): a finding and its advice, grepped as often as
    read."""


def findings_lines(analysis: Analysis) -> list[OneLine]:
    """One line per error and warning finding, with its advice (the finding's message says what to do):
    ``warning engine_mismatch (run): engine: vllm read none of … (set engine: sglang) …``. Notes stay in
    report.md and checks.json."""
    order = {"error": 0, "warning": 1}
    shown = sorted((f for f in analysis.findings if f.severity in order), key=lambda f: order[f.severity])
    style = {"error": "red", "warning": "yellow"}
    # The same finding at several points (every point of a deployment that did not start) is one line.
    groups: dict[tuple[str, str, str], list[str]] = {}
    for finding in shown:
        groups.setdefault((finding.severity, finding.check, finding.message), []).append(finding.where)
    return [
        OneLine(
            f"[{style[severity]}]{severity} {escape(check)}[/{style[severity]}] ({escape(_places(wheres))}): "
            f"{escape(message)}"
        )
        for (severity, check, message), wheres in groups.items()
    ]


def _places(wheres: list[str]) -> str:
    """``linear @ C=1, C=2 on gpu-box`` for the places of one finding (the configuration and host once)."""
    wheres = list(dict.fromkeys(wheres))
    if len(wheres) == 1:
        return wheres[0]
    parts = [re.match(r"^(.*?) @ (.*?)(?: on (.*))?$", w) for w in wheres]
    if all(parts) and len({(m.group(1), m.group(3)) for m in parts if m}) == 1:
        first = parts[0]
        assert first is not None
        loads = ", ".join(m.group(2) for m in parts if m)
        return f"{first.group(1)} @ {loads}" + (f" on {first.group(3)}" if first.group(3) else "")
    return "; ".join(wheres)


def lossless_lines(analysis: Analysis) -> list[str]:
    """The lossless verdict as the answer holds it (``analysis.lossless``, orchestrator/analysis/lossless.py): per
    host the baseline against itself, then each configuration's verdict, wrapped at the console's width (prose, not
    a command to copy: at 80 columns it ran to 128)."""
    if analysis.lossless is None:
        return []
    style = {"lossless": "green", "lossy": "red", "inconclusive": "yellow"}
    lines: list[str] = []
    for host in analysis.lossless.hosts:
        lines.append(f"[bold]lossless[/bold] on {escape(host.host)}: {escape(host.baseline_text())}")
        lines += [
            f"  [{style[v.verdict]}]{v.verdict}[/{style[v.verdict]}] {escape(v.text())}" for v in host.configs
        ]
    return lines


def summary_renderables(run_dir: Path, width: int, *, analysis: Analysis | None = None) -> list[RenderableType]:
    """Everything the sweep prints at its end: the points table, the best at each load, each error and
    warning finding with its advice, the lossless verdict, how it was made."""
    from orchestrator.analysis import analyse

    analysis = analysis or analyse(run_dir)
    return [
        points_table(analysis, width),
        best_table(analysis, width),
        *(Text(line) for line in decision_lines(analysis)),  # load.decide: decided, or the budget ran out
        *findings_lines(analysis),
        *lossless_lines(analysis),
        *how_made_lines(analysis),
    ]


def summary_table(run_dir: Path, width: int = 80) -> RenderableType:
    """The points table alone (kept for callers of the earlier API)."""
    from orchestrator.analysis import analyse

    return points_table(analyse(run_dir), width)
