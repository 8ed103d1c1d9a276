"""``build_report(run_dir)``: everything ``specsweep report`` writes, from the run directory alone.

Into the run directory (or ``out_dir``): ``report.html`` (self-contained), ``report.md``, ``summary.csv``,
``records.parquet`` (the analysed frame), ``checks.json`` (every finding) and ``figures/*.png``. The order of
the report is the order a reader needs: findings, winners, figures, tables, failed points, then the run's
particulars.

What the report says of points, loads and counts is the run's answer (``orchestrator/analysis/answer.py``):
the counts of points and findings, the findings, the winners and the headline sentences, every table of a
figure per configuration and load (each ``value ± half`` its interval), break-even loads, schedule verdicts,
the lossless verdict, load.decide and the accept length's sources. The figures (``report/figures.py``) draw
the analysis the answer was made from (``Answer.analysis``), as do summary.csv and records.parquet (its
columns), the failed points' evidence lines and how the run was made.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from orchestrator import __version__
from orchestrator.analysis.answer import Answer, findings_text
from orchestrator.analysis.answer import answer as make_answer
from orchestrator.analysis.checks import CHECKS
from orchestrator.analysis.result import Analysis
from orchestrator.errors import StoreError
from orchestrator.files import write_atomic
from orchestrator.quoting import spreadsheet_cell
from orchestrator.report import figures as figs
from orchestrator.report import tables
from orchestrator.report.axes import tagged_png
from orchestrator.report.deciding import decide_blocks
from orchestrator.report.render import Block, Evidence, Heading, Image, Items, Paragraph, Table, to_html, to_markdown
from orchestrator.report.search import search_blocks, search_figures
from orchestrator.report.sources import accept_sources_blocks
from orchestrator.runs.identity import playbook_verdict, resumed_at

__all__ = ["CHECKS_SCHEMA_VERSION", "ReportResult", "build_report", "report_blocks", "write_figures"]

CHECKS_SCHEMA_VERSION = 1
Progress = Callable[[str], None]


@dataclass
class ReportResult:
    """What ``build_report`` wrote: name -> path, and the run's answer it wrote it from."""

    directory: Path
    files: dict[str, Path]
    #: The run's answer (orchestrator/analysis/answer.py): what every part of the report renders.
    answer: Answer
    figures: dict[str, Path] = field(default_factory=dict)

    @property
    def analysis(self) -> Analysis:
        """The analysis the answer was made from (the figures draw it)."""
        return self.answer.analysis

    @property
    def counts(self) -> dict[str, int]:
        """The findings by severity, as the answer counts them."""
        return self.answer.finding_counts()


@dataclass
class _FigureSpec:
    name: str
    caption: str
    draw: Callable[[Analysis, str | None], Figure | None]


_FIGURES = [
    _FigureSpec(
        "throughput_vs_concurrency",
        "Output throughput against concurrency, a line per configuration; baselines dashed; error bars: each "
        "point's confidence interval.",
        lambda a, h: figs.throughput_vs_load(a, host=h, mode="concurrency"),
    ),
    _FigureSpec(
        "throughput_vs_rate",
        "Output throughput against the offered request rate (open loop); baselines dashed; error bars: each "
        "point's confidence interval.",
        lambda a, h: figs.throughput_vs_load(a, host=h, mode="rate"),
    ),
    _FigureSpec(
        "accept_len_heatmap",
        "Accept length of each tree configuration (budget × top-k), tokens per verify step.",
        lambda a, h: figs.accept_len_heatmap(a, host=h),
    ),
    _FigureSpec(
        "speedup_vs_ar",
        "Tree throughput over the autoregressive baseline at each load (ratio; >1 is faster).",
        lambda a, h: figs.speedup_heatmaps(a, against="ar", host=h),
    ),
    _FigureSpec(
        "speedup_vs_linear",
        "Tree throughput over the linear baseline at each load (ratio; >1 is faster).",
        lambda a, h: figs.speedup_heatmaps(a, against="linear", host=h),
    ),
    _FigureSpec(
        "latency_percentiles",
        "Time to first token and inter-token latency: p50 bars (whiskers: the p50's interval), p90 and p99 markers.",
        lambda a, h: figs.latency_percentiles(a, host=h),
    ),
    _FigureSpec(
        "pareto",
        "Per-user against total throughput for every point, with both intervals; the Pareto front (a point leaves "
        "it only when another beats it beyond noise) is joined and labelled.",
        lambda a, h: figs.pareto_plot(a, host=h),
    ),
]


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


def _png(figure: Figure) -> bytes:
    """The PNG of ``figure.savefig(..., format="png")`` without its first draw. ``savefig`` of a figure with a layout
    engine (ours are constrained) draws every artist once without rendering to run the layout, then again to
    render; the Agg canvas's ``print_png`` draws once, running the layout at the start of that draw (the steps
    of ``savefig``'s first draw), so the PNG is the same, byte for byte, for about a fifth less of each
    figure's drawing. A figure on another canvas is saved by ``savefig``."""
    out = io.BytesIO()
    canvas = figure.canvas
    if isinstance(canvas, FigureCanvasAgg):
        canvas.print_png(out)
    else:
        figure.savefig(out, format="png")
    return out.getvalue()


def write_figures(analysis: Analysis, directory: Path, progress: Progress | None = None) -> dict[str, tuple[Path, str]]:
    """Draw and save every figure that has data; returns name -> (png path, caption). A run with workloads
    gets each figure once per workload (and the workload figures of ``orchestrator/report/workloads.py``)."""
    from orchestrator.report.workloads import workload_figures, workload_views

    if directory.is_symlink():  # its figures would land wherever the link points (issue 58, S7)
        raise StoreError(f"{directory} is a symbolic link: the report writes its figures into no linked folder")
    directory.mkdir(parents=True, exist_ok=True)
    hosts = sorted(set(analysis.frame["host"])) if not analysis.frame.empty else []
    per_host: list[str | None] = [None] if len(hosts) <= 1 else list(hosts)
    out: dict[str, tuple[Path, str]] = {}

    def save(name: str, figure: Figure, caption: str) -> None:
        path = directory / f"{name}.png"
        # With what its axes say, for report.html's data-axes (orchestrator/report/axes.py); a new file renamed
        # over the old, so a link planted as a figure's name is replaced, never written through.
        write_atomic(path, tagged_png(_png(figure), figure))
        out[name] = (path, caption)
        if progress:
            progress(f"figure {path.name}")

    for workload, view in workload_views(analysis):
        for spec in _FIGURES:
            for host in per_host:
                figure = spec.draw(view, host)
                if figure is None:
                    continue
                name = spec.name if host is None else f"{spec.name}-{_safe(host)}"
                caption = spec.caption if host is None else f"{spec.caption} Host {host}."
                if workload:
                    name, caption = f"{name}-{_safe(workload)}", f"{caption} Workload {workload}."
                save(name, figure, caption)
    for name, figure, caption in workload_figures(analysis):
        save(name, figure, caption)
    return out


def _run_lines(made: Answer) -> list[str]:
    analysis = made.analysis
    info = analysis.run.info
    counts = made.counts
    hosts = ", ".join(sorted(set(analysis.frame["host"]))) or "none"
    how = tables.how_made(analysis)
    engine = how.engine + (f" {how.version_text}" if how.versions else "")
    lines = [
        f"Run {info.run_id} of experiment {info.experiment} ({engine}), state {info.state}; "
        f"started {info.started_at}, ended {info.ended_at or '(not ended)'}; host(s): {hosts}.",
        f"{counts.ok} points ok, {counts.degraded} degraded, {counts.failed} failed, {counts.skipped} skipped; "
        f"{counts.planned} points planned.",
    ]
    if info.state != "done":
        lines.append(f"This run is {info.state}: the figures show only the points it finished.")
    resumed = resumed_at(analysis.path)
    if resumed:
        lines.append(f"Resumed {len(resumed)} time(s) (--resume): at {', '.join(resumed)}.")
    lines += provenance_lines(analysis)
    methods = sorted({p.ci_method for p in made.points if p.ci_method})
    if methods:
        lines.append(
            f"Every figure carries its {made.confidence:.0%} confidence interval ({'; '.join(methods)}); "
            "a configuration beats another only when the interval of their difference excludes zero."
        )
    return lines


def provenance_lines(analysis: Analysis) -> list[str]:
    """The report header's provenance: specsweep and its revision, the experiment file's hash, the engine
    versions, the GPUs of each host (``provenance.json``)."""
    data = analysis.run.provenance
    if not data:
        return ["No provenance.json: this run was made before specsweep kept one."]
    run = data.get("run") or {}
    git = run.get("git") or {}
    revision = (
        f", git {str(git.get('commit'))[:12]}{' (dirty)' if git.get('dirty') else ''}" if git.get("commit") else ""
    )
    sha = str(run.get("experiment_sha256") or "unknown")
    lines = [
        f"Made by specsweep {run.get('specsweep_version')}{revision}, Python {run.get('python')}, on "
        f"{run.get('controller')}; experiment file {run.get('experiment_file')} ({sha[:19]}…).",
    ]
    versions = sorted(
        {
            f"{d.get('engine')} {d.get('engine_version') or '(version not reported)'}"
            for d in (data.get("deployments") or {}).values()
            if isinstance(d, dict)
        }
    )
    if versions:
        lines.append(f"Engine as the servers reported it: {', '.join(versions)}.")
    for host, facts in sorted((data.get("hosts") or {}).items()):
        gpu = (facts or {}).get("gpu")
        if gpu:
            memory = gpu.get("memory_total_mib")
            lines.append(
                f"{host}: {gpu.get('count')} × {gpu.get('model')}, driver {gpu.get('driver_version')}"
                + (f", {memory / 1024:.0f} GiB each" if isinstance(memory, int | float) else "")
                + "."
            )
        elif facts:
            lines.append(f"{host}: {facts.get('note') or 'no GPU details'}.")
    return lines


def _how_made_blocks(analysis: Analysis) -> list[Block]:
    """How the run was made: the engine and the version its servers reported, the workload every point ran,
    and the server command (and environment) of each configuration, as ``plan.json`` holds them."""
    made = tables.how_made(analysis)
    blocks: list[Block] = [
        Heading("How this run was made"),
        Paragraph(
            f"Engine {made.engine}, version {made.version_text} (as the servers reported it); service {made.service}.",
            "muted",
        ),
    ]
    if made.workload:
        blocks.append(Table(tables.workload_table(analysis), "Workload (every load point)"))
    if made.commands:
        shared, table = tables.command_differences(analysis)
        if shared is not None:  # the long shared words once; the part each configuration changes in a row
            blocks.append(Paragraph(f"Every configuration's server command is: {shared}", "muted"))
            blocks.append(Table(table, "What each configuration puts in place of … in the server command"))
        else:
            blocks.append(Table(table, "Server command of each configuration"))
    return blocks


def _break_even_blocks(made: Answer) -> list[Block]:
    """Where each speculative variant stops paying, as the answer has it (``Answer.break_even``)."""
    if not made.break_even:
        return []
    rows = [
        {
            "host": b.host,
            "workload": b.workload or "-",
            "variant": b.variant,
            "break-even": "not reached" if b.load is None else f"C={b.load}",
            "bracket": "-" if b.load is None or b.last_win is None else f"({b.last_win}, {b.load}]",
            "judged loads": ", ".join(f"C={c}" for c in b.judged) or "-",
            "not judged": ", ".join(f"C={c}" for c in b.not_judged) or "-",
        }
        for b in made.break_even
    ]
    return [
        Heading("Where speculation stops paying"),
        Paragraph(
            "The break-even load of each speculative variant: the lowest measured concurrency at which none of its "
            "configurations beats autoregressive beyond noise; the crossing lies between the highest load below it "
            "where one still did and that load (the bracket). At a load where another variant won, the run does not "
            "say (not judged).",
            "muted",
        ),
        Table(tables.formatted(pd.DataFrame(rows)), "Break-even load per speculative variant"),
        Items([("", b.text, []) for b in made.break_even]),
    ]


def _verdict_blocks(made: Answer) -> list[Block]:
    """A deployed schedule against the best static configuration, as the answer has it (``schedule_verdicts``)."""
    if not made.schedule_verdicts:
        return []
    blocks: list[Block] = [Heading("Schedule against the best static configuration")]
    for v in made.schedule_verdicts:
        rows = [
            {
                "load": lv.load_label,
                "schedule": lv.outcome.replace("_", " "),
                "best static": lv.best_static or "-",
                "winner": lv.winner,
                "margin (winner over runner-up)": "-"
                if lv.margin is None
                else f"{lv.margin * 100:+.1f}% [{(lv.margin_lo or 0) * 100:+.1f}% … {(lv.margin_hi or 0) * 100:+.1f}%]",
                "scheduled k": "-" if lv.k is None else str(lv.k.scheduled_k),
                "draft tokens per draft": "-"
                if lv.k is None or lv.k.drafts_per_draft is None
                else f"{lv.k.drafts_per_draft:.2f}",
                "engine ran it": "-" if lv.k is None else {True: "yes", False: "NO", None: "cannot tell"}[lv.k.ran],
            }
            for lv in [*v.loads, *v.ramp]
        ]
        css = "error" if v.ignored_at else ""
        blocks.append(
            Paragraph(f"{v.schedule} (num_speculative_tokens {v.num_speculative_tokens}): {v.summary()}", css)
        )
        blocks.append(
            Table(tables.formatted(pd.DataFrame(rows)), f"{v.label} on {v.host}: at each load and over the ramp")
        )
    return blocks


def _lossless_blocks(made: Answer) -> list[Block]:
    """The lossless verdict, as the answer has it (``Answer.lossless``): the baseline against itself, then each
    configuration lossless, lossy beyond the baseline's own variance, or inconclusive."""
    if not made.lossless:
        return []
    blocks: list[Block] = [
        Heading("Lossless at temperature 0"),
        Paragraph(
            "Each configuration's answers to the lossless probe against the autoregressive baseline's, alone and "
            "batched: speculation is called lossy only where it differs earlier than the baseline differs from "
            "itself, or on a prompt the baseline is stable on.",
            "muted",
        ),
    ]
    css = {"lossless": "ok", "lossy": "error", "inconclusive": "warning"}
    for host in made.lossless:
        blocks.append(Paragraph(f"{host.host}: {host.baseline_text()}", ""))
        blocks.append(Items([(css[v.verdict], v.text(), []) for v in host.configs]))
    return blocks


def report_blocks(made: Answer, figures: dict[str, tuple[Path, str]], base: Path) -> list[Block]:
    """The report as a list of blocks (both renderings share it), from the run's answer ``made``."""
    analysis = made.analysis  # the run's particulars, the figures' frame
    blocks: list[Block] = [
        Heading(f"specsweep report: {analysis.experiment_name}, run {analysis.run_id}", 1),
    ]
    blocks += [Paragraph(line, "muted") for line in _run_lines(made)]
    verdict = playbook_verdict(analysis.path)
    if verdict is not None:  # a playbook's run: its own checks' verdict first (expectations.json)
        blocks.append(Heading("Playbook verdict"))
        blocks.append(Paragraph(verdict.sentence(), "ok" if verdict.passed else "error"))

    counts = made.finding_counts()
    blocks.append(Heading("Findings"))
    groups = tables.group_findings(made.findings)
    if not made.points:
        blocks.append(Paragraph("The run has no records yet: nothing to check.", "warning"))
    elif counts["error"] == 0 and counts["warning"] == 0:
        enabled = [c for c in CHECKS if c not in analysis.settings.disabled]
        blocks.append(Paragraph(f"No errors or warnings: every check passed ({', '.join(enabled)}).", "ok"))
    else:
        css = "error" if counts["error"] else "warning"
        blocks.append(
            Paragraph(
                f"{findings_text(counts)} ({len(made.findings)} findings, grouped by check and configuration below).",
                css,
            )
        )
    if groups:
        blocks.append(Table(tables.formatted(tables.findings_by_check(made.findings)), "Findings by check"))
        blocks.append(Items([(g.severity, f"[{g.check}] {g.where}: {g.message}", g.evidence) for g in groups]))

    blocks.append(Heading("Winners"))
    sentences = tables.headline(made)
    if sentences:
        blocks.append(Items([("", s, []) for s in sentences]))
        blocks.append(Table(tables.formatted(tables.winners_table(made)), "Best configuration at each load"))
    else:
        blocks.append(Paragraph("No successful point to rank.", "warning"))

    blocks += decide_blocks(made)  # load.decide: decided, or the budget ran out (report/deciding.py)
    blocks += _break_even_blocks(made)
    blocks += _verdict_blocks(made)
    blocks += _lossless_blocks(made)
    blocks += accept_sources_blocks(made)

    from orchestrator.report.workloads import workload_blocks

    blocks += workload_blocks(made)

    if figures:
        blocks.append(Heading("Figures"))
        note = figs.scale_note(analysis)
        if note:  # at scale the figures summarise: say how, and where every configuration is
            blocks.append(Paragraph(f"Figures at this run's scale: {note}; the tables below hold every one.", "muted"))
        for path, caption in figures.values():
            blocks.append(Image(path, path.relative_to(base).as_posix(), caption))

    blocks.append(Heading("Tables"))
    level = f"{made.confidence:.0%}"
    sources = tables.accept_sources_note(made)
    # A figure with its interval is one table; its plain table only where it has none (report.md had two
    # "Output throughput" tables, the same numbers twice). The accept length keeps both: the plain one says
    # each figure's source and exactness.
    with_interval: set[str] = set()
    for figure, table, caption in (
        (
            "throughput",
            tables.interval_table(made, made.metric),
            f"Output throughput ({made.metric}, tokens/s) ± half its {level} interval",
        ),
        ("", tables.interval_table(made, "accept_len"), f"Accept length ± half its {level} interval"),
        (
            "ttft",
            tables.interval_table(made, "ttft_ms_p50"),
            f"Time to first token, p50 (ms) ± half its {level} interval",
        ),
    ):
        if not table.empty:
            blocks.append(Table(tables.formatted(table), caption))
            if figure:
                with_interval.add(figure)
    for figure, table, caption, kind in (
        ("throughput", tables.throughput_table(made), f"Output throughput ({made.metric}, tokens/s)", ""),
        ("", tables.speedup_table(made, "ar"), f"Speedup over AR ({analysis.roles.ar})", "speedup"),
        ("", tables.speedup_table(made, "linear"), f"Speedup over linear ({analysis.roles.linear})", "speedup"),
        (
            "",  # kept beside its intervals: it says where each accept length comes from and how exact it is
            tables.accept_table(made),
            "Accept length (tokens per verify step, bonus included)" + (f", {sources}" if sources else ""),
            "accept",
        ),
        ("ttft", tables.latency_table(made, "ttft_ms_p50"), "Time to first token, p50 (ms)", ""),
        ("", tables.latency_table(made, "itl_ms_p50"), "Inter-token latency, p50 (ms)", ""),
        ("", tables.latency_table(made, "tokens_per_joule"), "Output tokens per joule (GPU telemetry)", ""),
    ):
        if figure and figure in with_interval:
            continue
        if not table.empty and not table.isna().all().all():
            blocks.append(Table(tables.formatted(table, kind=kind), caption))
    if len(made.pareto) > figs.MAX_FRONT_LABELS:  # the figure labels some of the front: every point here
        blocks.append(
            Table(
                tables.formatted(tables.pareto_table(made)),
                f"Points on the Pareto front ({len(made.pareto)}; the figure labels "
                f"{figs.MAX_FRONT_LABELS} evenly along it)",
            )
        )
    if isinstance(blocks[-1], Heading):
        blocks.append(Paragraph("No table: no point completed.", "muted"))

    failed = tables.failed_points(analysis)
    blocks.append(Heading("Failed points"))
    if analysis.frame.empty:
        blocks.append(Paragraph("None recorded.", "muted"))
    elif failed.empty:
        blocks.append(Paragraph("None: every point completed.", "ok"))
    else:
        shown = failed.drop(columns=["error_evidence"], errors="ignore").rename(
            columns={
                "label": "configuration",
                "load_label": "load",
                "error_kind": "kind",
                "error_message": "reason",
                "window_file": "server log of the window",
                "point_id": "point",
            }
        )
        blocks.append(
            Table(
                tables.formatted(shown),
                "Points that failed, were skipped, or lost too many requests (degraded: figures kept, not ranked)",
            )
        )
        for row in failed.to_dict("records"):
            evidence = row.get("error_evidence") or []
            if len(evidence):
                title = f"{row['label']} @ {row['load_label']} on {row['host']}: {row.get('error_message') or ''}"
                blocks.append(Evidence(title, [str(line) for line in evidence]))

    blocks += _how_made_blocks(analysis)

    blocks.append(Heading("About this report"))
    skipped = analysis.run.skipped_lines
    notes = [
        f"Built by specsweep {__version__} from the run directory alone. Throughput is the client's "
        f"{analysis.metric}; accept length is tokens per verify step with the bonus token.",
        f"Baselines: AR = {analysis.roles.ar or 'none'}, linear = {analysis.roles.linear or 'none'}. "
        f"Check tolerances: {analysis.settings.model_dump()}.",
        "Files: report.md, report.html, summary.csv (one row per point), records.parquet (every column), "
        "checks.json (every finding), figures/.",
    ]
    if skipped:
        notes.append(f"{len(skipped)} unreadable line(s) of records.jsonl were left out.")
    blocks += [Paragraph(n, "muted") for n in notes]
    blocks += search_blocks(analysis.path, analysis)  # the report ends with the recommendations (orchestrator/search)
    return blocks


def _parquet_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns Arrow can type: an object column mixing kinds (a parameter that is a number for one variant
    and text for another) becomes text; lists stay lists of text."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype != object:
            continue
        values = [v for v in out[column] if v is not None and not (isinstance(v, float) and v != v)]
        kinds = {type(v) for v in values}
        converted: list[Any]
        if kinds <= {list}:
            converted = [None if not isinstance(v, list) else [str(x) for x in v] for v in out[column]]
        elif len(kinds) > 1 or (kinds and not kinds <= {str, int, float, bool}):
            converted = [None if v is None or (isinstance(v, float) and v != v) else str(v) for v in out[column]]
        else:
            continue
        out[column] = pd.Series(converted, index=out.index, dtype=object)
    return out


def _write_text(path: Path, text: str) -> None:
    write_atomic(path, text)


def _checks_json(made: Answer) -> dict[str, Any]:
    analysis = made.analysis
    return {
        "schema_version": CHECKS_SCHEMA_VERSION,
        "run_id": analysis.run_id,
        "experiment": analysis.experiment_name,
        "settings": analysis.settings.model_dump(),
        "baselines": {"ar": analysis.roles.ar, "linear": analysis.roles.linear},
        "counts": made.finding_counts(),
        "findings": [f.model_dump() for f in made.findings],
    }


def build_report(
    run_dir: str | Path,
    *,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    answer: Answer | None = None,
) -> ReportResult:
    """Write the report files of ``run_dir`` (see the module docstring) from its answer: ``answer`` where the
    caller made it already (a sweep's ending, which saved it in the run: it is neither made nor written again
    there), else made here from the run (and saved in it when the report is written there); returns what was
    written."""
    run_dir = Path(run_dir)
    target = Path(out_dir) if out_dir is not None else run_dir
    made = answer if answer is not None else make_answer(run_dir, save=target == run_dir)
    analysis = made.analysis
    files: dict[str, Path] = {}
    try:
        target.mkdir(parents=True, exist_ok=True)
        if progress:
            progress("figures")
        figures = write_figures(analysis, target / "figures", progress)
        figures.update(search_figures(run_dir, target / "figures"))  # a search's history (orchestrator/search)
        summary = target / "summary.csv"
        shown = tables.summary_table(analysis)  # a control character in a cell (a command's) written escaped
        # and a text cell a spreadsheet would run as a formula (``=HYPERLINK(...)``) neutralised
        shown = shown.apply(lambda col: col.map(lambda v: spreadsheet_cell(v) if isinstance(v, str) else v))
        # Every output is a new file renamed over the old: a link planted as its name (to a file outside the run)
        # is replaced, never written through (issue 58, S7).
        write_atomic(summary, shown.to_csv(index=False))
        files["summary.csv"] = summary
        parquet = target / "records.parquet"
        table = io.BytesIO()
        _parquet_ready(analysis.frame).to_parquet(table, index=False)
        write_atomic(parquet, table.getvalue())
        files["records.parquet"] = parquet

        # The run's answer: answer.json in the run directory (ls and --json read it), saved where it was made.
        if target != run_dir:
            _write_text(target / "answer.json", json.dumps(made.to_dict(), indent=1, default=str) + "\n")
        files["answer.json"] = target / "answer.json"
        checks = target / "checks.json"
        _write_text(checks, json.dumps(_checks_json(made), indent=2) + "\n")
        files["checks.json"] = checks
        blocks = report_blocks(made, figures, target)
        markdown = target / "report.md"
        _write_text(markdown, to_markdown(blocks))
        files["report.md"] = markdown
        page = target / "report.html"
        _write_text(page, to_html(blocks, title=f"specsweep: {analysis.experiment_name} {analysis.run_id}"))
        files["report.html"] = page
        if progress:
            progress("done")
    except OSError as exc:
        raise StoreError(f"cannot write the report into {target}: {exc.strerror or exc}") from exc
    return ReportResult(directory=target, files=files, answer=made, figures={k: v[0] for k, v in figures.items()})
