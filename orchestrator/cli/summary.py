"""What a sweep ends with: every point beside its baselines, the best configuration at each load, and how the
run was made. It reads at any width (an 80-column terminal, a pipe, a CI log): the configuration and the load
are never cut (:mod:`orchestrator.cli.textfit`), rows are grouped by configuration, and the figures of least
value are left out first when the width runs short.

Everything it says of the points, the loads and the counts is the run's answer (``orchestrator/analysis/answer.py``,
:class:`~orchestrator.analysis.answer.Answer`): each figure and its interval (the ``±`` is
``Figure.relative_half_width``), each load's winner, ties and margin, the counts of points and findings, the
findings, the lossless verdicts and the load.decide lines. Only how the run was made (engine, workload,
commands) is read from the run's particulars beside it.
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
    from orchestrator.analysis.answer import Answer, PointAnswer

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


def _figure(point: PointAnswer, column: str) -> float | None:
    """The answer's figure of ``point`` a column of the points table shows (``output_tok_s_pm``: how sure its
    throughput is, half its interval relative to it)."""
    if column == "output_tok_s_pm":
        found = point.figures.get("output_tok_s")
        return None if found is None else found.relative_half_width
    return point.value(column)


def points_table(answer: Answer, width: int) -> RenderableType:
    """One row per point of the answer, grouped by configuration (named once, on its first row), fitted to
    ``width``; the caption is the answer's counts of points and findings."""
    points = answer.points
    pooled = len({p.host for p in points}) > 1
    counts = answer.counts
    from orchestrator.analysis.answer import findings_text

    findings = answer.finding_counts()
    all_ok = counts.failed == 0 and counts.skipped == 0 and counts.degraded == 0
    columns: list[Column] = []
    if pooled:
        columns.append(Column("host", "left", required=True))
    columns += [Column("configuration", "left", required=True, wrap=True), Column("load", "right", required=True)]
    if not all_ok:
        columns.append(Column("status", "left", required=True))
    present = [f for f in _FIGURES if any(_figure(p, f[1]) is not None for p in points)] or _FIGURES[:1]
    columns += [Column(h, "right", required=(col == "output_tok_s"), priority=p) for h, col, _f, p in present]
    groups: dict[tuple[str, str], list[PointAnswer]] = {}
    for point in points:
        groups.setdefault((point.host, point.label), []).append(point)
    rows: list[list[Any]] = []
    ends: list[int] = []
    for (host, label), members in groups.items():
        members.sort(key=lambda p: (p.mode, p.load))
        for position, point in enumerate(members):
            first = position == 0
            name = Text(label + (" *" if point.baseline else "")) if first else Text("")
            cells: list[Any] = [Text(host) if first else Text("")] if pooled else []
            cells += [name, Text(point.load_label)]
            if not all_ok:
                status = point.status
                cells.append(Text(status) if status == "ok" else Text(status, style="red"))
                if status == "degraded":
                    lost, sent = _fmt(point.lost_requests, "{:.0f}"), _fmt(point.requests, "{:.0f}")
                    cells[-1] = Text(f"degraded ({lost} of {sent} lost)", style="red")
            cells += [Text(_fmt(_figure(point, col), fmt)) for _h, col, fmt, _p in present]
            rows.append(cells)
        ends.append(len(rows) - 1)
    caption = (
        f"{counts.ok} points ok"
        + (f", {counts.degraded} degraded, {counts.failed} failed, {counts.skipped} skipped" if not all_ok else "")
        + (" (degraded: too many requests lost; not ranked)" if counts.degraded and not answer.rank_degraded else "")
        + ("; * baseline" if any(p.baseline for p in points) else "")
        + f"; findings: {findings_text(findings)} (report.md, checks.json)"
    )
    analysis = answer.analysis  # the run's name and id
    return fit_table(
        columns,
        rows,
        width,
        title=f"{analysis.experiment_name} ({analysis.run_id})",
        caption=caption,
        sections=ends[:-1],
    )


def best_table(answer: Answer, width: int) -> RenderableType:
    """The answer to the user's question: at each load, the fastest configuration, its ratios to the baselines,
    and the runner-up with the margin; what the winner rule said (``basis``) is in the title. Every cell is the
    answer's (``Answer.loads``, and the winner's own point for its ratios)."""
    loads = answer.loads
    if not loads:
        return Text("best configuration at each load: no successful point to rank", style="yellow")
    pooled = len({lv.host for lv in loads}) > 1
    bases = sorted({lv.basis for lv in loads if lv.basis and lv.basis != "only one point"})
    errors: dict[tuple[Any, Any, Any], list[str]] = {}
    for finding in answer.findings:
        if finding.severity == "error":
            errors.setdefault((finding.host, finding.config, finding.load), []).append(finding.check)
    for (host, config, load), checks in list(errors.items()):
        if load is None and config is not None:  # a finding about the configuration at every load (lossless)
            for lv in loads:
                if lv.winner == config and (host is None or host == lv.host):
                    errors.setdefault((lv.host, config, lv.load_label), []).extend(checks)
    flagged = any(errors.get((lv.host, lv.winner, lv.load_label)) for lv in loads)
    # What the winner is tied with and what it beats are the answer itself: never dropped, only wrapped (one
    # configuration a line); the ratios to the baselines go first when the width runs short.
    columns = [Column("host", "left", required=True)] if pooled else []
    columns += [
        Column("load", "right", required=True),
        Column("best", "left", required=True, wrap=True),
        Column("tok/s", "right", required=True),
        Column("margin", "right", priority=80),
        Column("interval", "right", priority=45),
        Column("tied with", "left", required=any(lv.tied for lv in loads), wrap=True),
        Column("over", "left", required=any(lv.beats for lv in loads), wrap=True),
        Column("×AR", "right", priority=40),
        Column("×linear", "right", priority=30),
    ]
    if flagged:  # the error lines below the table say the same at any width
        columns.append(Column("fails checks", "left", priority=90, wrap=True))
    rows: list[list[Any]] = []
    for lv in loads:
        winner = answer.point(lv.host, lv.workload, lv.winner, lv.load_label)
        interval = "-"
        if lv.margin_lo is not None and lv.margin_hi is not None:
            interval = f"{lv.margin_lo:+.1%}…{lv.margin_hi:+.1%}"
        margin_text = "tie" if lv.decided is False else _fmt(lv.margin, "{:+.1%}")
        cells: list[Any] = [Text(lv.host)] if pooled else []
        cells += [
            Text(lv.load_label),
            Text(lv.winner),
            Text(_fmt(lv.value, "{:,.1f}")),
            Text(margin_text if lv.runner_up else "-", style="yellow" if lv.decided is False else ""),
            Text(interval if lv.runner_up else "-"),
            Text(",\n".join(lv.tied) or "-"),
            Text(",\n".join(lv.beats) or "-"),
            Text(_fmt(winner.value("speedup_vs_ar") if winner else None, "{:.2f}x")),
            Text(_fmt(winner.value("speedup_vs_linear") if winner else None, "{:.2f}x")),
        ]
        if flagged:
            checks = errors.get((lv.host, lv.winner, lv.load_label)) or []
            cells.append(Text(", ".join(sorted(set(checks))) or "-", style="red" if checks else ""))
        rows.append(cells)
    basis = f"; {', '.join(bases)}" if bases else ""
    legends = [
        ("tied with", "tied with: not told apart from the best") if any(lv.tied for lv in loads) else ("", ""),
        ("over", "over: the ones it beats") if any(lv.beats for lv in loads) else ("", ""),
        ("margin", "margin: best / runner-up - 1") if any(lv.runner_up for lv in loads) else ("", ""),
    ]
    return fit_table(
        columns,
        rows,
        width,
        title=f"best configuration at each load (by {answer.metric}{basis})",
        legends=[(header, text) for header, text in legends if text],
    )


def how_made_lines(answer: Answer) -> list[OneLine]:
    """How the run was made, in a few lines: engine and version, the workload, the server commands (their
    shared words once, then what each configuration changes). Each line is printed whole (``OneLine``): a
    command, a path or a JSON argument broken at the terminal's width could not be copied."""
    from orchestrator.report import tables

    analysis = answer.analysis  # the run's particulars: the experiment, plan.json, provenance
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


def findings_lines(answer: Answer) -> list[OneLine]:
    """One line per error and warning finding, with its advice (the finding's message says what to do):
    ``warning engine_mismatch (run): engine: vllm read none of … (set engine: sglang) …``. Notes stay in
    report.md and checks.json."""
    order = {"error": 0, "warning": 1}
    shown = sorted((f for f in answer.findings if f.severity in order), key=lambda f: order[f.severity])
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


def lossless_lines(answer: Answer) -> list[str]:
    """The lossless verdict as the answer holds it (``Answer.lossless``, orchestrator/analysis/lossless.py): per
    host the baseline against itself, then each configuration's verdict, wrapped at the console's width (prose, not
    a command to copy: at 80 columns it ran to 128)."""
    style = {"lossless": "green", "lossy": "red", "inconclusive": "yellow"}
    lines: list[str] = []
    for host in answer.lossless:
        lines.append(f"[bold]lossless[/bold] on {escape(host.host)}: {escape(host.baseline_text())}")
        # The verdict word once: ``ngram(k=2): lossless: each of ...`` (it read ``lossless ngram(k=2): lossless:``).
        lines += [
            f"  {escape(v.config)}: [{style[v.verdict]}]{v.verdict}[/{style[v.verdict]}]{escape(v.detail())}"
            for v in host.configs
        ]
    return lines


def summary_renderables(run_dir: Path, width: int, *, answer: Answer | None = None) -> list[RenderableType]:
    """Everything the sweep prints at its end, from the run's ``answer`` (made from ``run_dir`` when not given):
    the points table, the best at each load, the load.decide lines, each error and warning finding with its
    advice, the lossless verdict, how it was made."""
    from orchestrator.analysis.answer import answer as make_answer

    answer = answer or make_answer(run_dir)
    return [
        points_table(answer, width),
        best_table(answer, width),
        # load.decide: decided, or the budget ran out
        *(Text(line) for line in decision_lines(answer.decisions, answer.path)),
        *findings_lines(answer),
        *lossless_lines(answer),
        *how_made_lines(answer),
    ]


def summary_table(run_dir: Path, width: int = 80) -> RenderableType:
    """The points table alone (kept for callers of the earlier API)."""
    from orchestrator.analysis.answer import answer

    return points_table(answer(run_dir), width)
