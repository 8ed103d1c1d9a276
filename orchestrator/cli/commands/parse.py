"""`specsweep parse --engine NAME FILE|- [--json]`: read a saved log and print its metrics as one window.

`specsweep parse --engine NAME --prometheus BEFORE AFTER [--elapsed S] [--json]` does the same for two saved
``/metrics`` scrapes that bracket a window (counters by difference, gauges as the after scrape says), with
the same JSON keys as a log window (``accept_len``, ``acceptance_rate``, ``gen_throughput``, ``details``).

A window that is not whole (a process start inside it, a counter that went down, a pair of lines cut apart:
orchestrator/engines/integrity.py) still exits 0: the figures are those of its whole part (or none), the JSON
carries ``integrity`` and ``exactness``, and one warning line on stderr names the reason
(``Integrity.describe()``). A log whose engine's last stats tick still holds requests lacks its last interval
(orchestrator/metrics/saved.py): its figures are withheld (``details.open_end_figures``), as a sweep withholds
an open window's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from orchestrator.cli.console import console, err_console
from orchestrator.engines.registry import BUILTIN, engine_names
from orchestrator.errors import MetricsError
from orchestrator.metrics import PromWindow, WindowMetrics, scrape_delta
from orchestrator.metrics.saved import parse_saved_log


def _read(source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(source).read_bytes()
    except OSError as exc:
        raise MetricsError(f"cannot read {source}: {exc.strerror or exc}") from exc


def _user_parsers(specs: list[str]) -> list[tuple[str, str]]:
    parsers = []
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"expected NAME=REGEX, got {spec!r}", param_hint="--regex")
        parsers.append((name, pattern))
    return parsers


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.0f}"
    if isinstance(value, list):
        return ", ".join(_fmt(v) for v in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in value.items()) or "-"
    return str(value)


def _summary(wm: WindowMetrics) -> Table:
    table = Table(title=f"window metrics ({wm.engine})", title_justify="left", show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value", justify="right")
    rows: list[tuple[str, Any]] = [
        ("accept_len (bonus incl.)", wm.accept_len),
        ("acceptance_rate", wm.acceptance_rate),
        ("gen_throughput (tok/s)", wm.gen_throughput),
    ]
    rows += [(k, v) for k, v in wm.ddtree.items() if v is not None]
    rows += [(f"details.{k}", v) for k, v in wm.details.items()]
    for name, data in wm.user.items():
        rows.append((f"{name}.matches", data["matches"]))
        rows += [(f"{name}.{group}", stats) for group, stats in data["groups"].items()]
    rows += _exactness_rows(wm.exactness)
    for key, value in rows:
        table.add_row(key, _fmt(value))
    table.caption = (
        f"{wm.lines_total} lines: {wm.lines_matched} read, {wm.lines_skipped} skipped, {wm.lines_duplicate} rank copies"
    )
    table.caption_justify = "left"
    return table


def _exactness_rows(exactness: dict[str, dict[str, Any]]) -> list[tuple[str, Any]]:
    """``exactness.<figure>``: its kind, with the rounding step or the bounds (orchestrator/engines/integrity.py)."""
    rows: list[tuple[str, Any]] = []
    for figure, entry in exactness.items():
        text = str(entry.get("kind"))
        if entry.get("resolution") is not None:
            text += f" (step {_fmt(entry['resolution'])})"
        if entry.get("bounds"):
            text += f" [{_fmt(entry['bounds'])}]"
        rows.append((f"exactness.{figure}", text))
    return rows


# The columns worth a terminal's width per sample kind; --json has every field.
_COLUMNS = {
    "sglang_decode": ("timestamp", "ranks", "running_req", "accept_len", "accept_rate", "gen_throughput", "queue_req"),
    "ddtree": ("values",),
    "vllm_spec": ("accepted", "drafted", "drafts", "mean_acceptance_length", "draft_acceptance_rate", "per_position"),
    "vllm_engine": ("engine_index", "generation_throughput", "prompt_throughput", "running", "waiting"),
    "llamacpp_request": (
        "slot",
        "task",
        "accepted",
        "generated",
        "mean_len",
        "verify_steps",
        "eval_tokens",
        "eval_tps",
    ),
    "llamacpp_spec_stats": ("impl", "gen_drafts", "acc_drafts", "gen_tokens", "acc_tokens", "mean_acc_len"),
    "user": ("parser", "groups"),
}


def _sample_tables(wm: WindowMetrics, limit: int) -> list[Table]:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for sample in wm.samples:
        row = sample.to_dict()
        by_kind.setdefault(row.pop("kind"), []).append(row)
    tables = []
    for kind, rows in by_kind.items():
        shown = rows if limit <= 0 else rows[:limit]
        wanted = _COLUMNS.get(kind, tuple(rows[0]))
        columns = [c for c in wanted if any(r.get(c) not in (None, [], {}) for r in shown)]
        table = Table(title=f"{kind} samples ({len(rows)})", title_justify="left")
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in shown:
            table.add_row(*(_fmt(row.get(c)) for c in columns))
        if len(shown) < len(rows):
            table.caption = f"first {len(shown)} of {len(rows)}; --limit 0 shows all"
            table.caption_justify = "left"
        tables.append(table)
    return tables


def _prom_summary(window: PromWindow) -> Table:
    table = Table(title=f"/metrics window ({window.engine})", title_justify="left", show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value", justify="right")
    rows: list[tuple[str, Any]] = [
        ("accept_len (bonus incl.)", window.accept_len),
        ("acceptance_rate", window.acceptance_rate),
        ("gen_throughput (tok/s)", window.gen_throughput),
        ("per_position_acceptance", window.per_position),
        ("elapsed_s", window.elapsed_s),
    ]
    rows += [(f"details.{k}", v) for k, v in window.details.items()]
    rows += [(f"counter {k}", v) for k, v in window.counters.items()]
    rows += _exactness_rows(window.exactness)
    for key, value in rows:
        table.add_row(key, _fmt(value))
    if window.resets:
        table.caption = f"counters reset between the scrapes: {', '.join(window.resets)}"
        table.caption_justify = "left"
    return table


def _parse_prometheus(engine: str, before: str, after: str, elapsed: float | None, as_json: bool) -> None:
    texts = [_read(path).decode("utf-8", errors="replace") for path in (before, after)]
    window = scrape_delta(texts[0], texts[1], engine, elapsed_s=elapsed)
    warnings = [w for w in (_prom_engine_warning(engine, window, texts, elapsed), window.integrity.describe()) if w]
    if as_json:
        out = window.to_dict()
        if warnings:
            out["warnings"] = warnings
        typer.echo(json.dumps(out, indent=2))
    else:
        console.print(_prom_summary(window))
    for warning in warnings:
        _warn(warning)


def _read_figures(window: PromWindow) -> int:
    """How many figures and counters a /metrics window read (0: the engine's series are not in the scrapes)."""
    figures = [window.accept_len, window.acceptance_rate, window.gen_throughput, window.per_position]
    figures += list(window.details.values()) + list(window.counters.values())
    return sum(1 for v in figures if v is not None and v != [] and v != {})


def _prom_engine_warning(engine: str, window: PromWindow, texts: list[str], elapsed: float | None) -> str | None:
    """One line when ``engine`` read nothing from the scrapes, naming the engine that does (as the log path
    warns, :func:`_engine_warning`)."""
    if _read_figures(window) or not window.integrity.whole:
        return None  # read, or read and then given up for a reason the integrity warning names
    fits: dict[str, int] = {}
    for other in engine_names():
        if other == engine:
            continue
        try:
            fits[other] = _read_figures(scrape_delta(texts[0], texts[1], other, elapsed_s=elapsed))
        except MetricsError:
            continue
    likely = max(fits, key=lambda k: fits[k], default=None)
    if likely is None or not fits[likely]:
        return (
            f"engine {engine} read none of the series in these /metrics scrapes, and no other engine reads "
            "them either: check --engine and that the server exports its speculative metrics"
        )
    return (
        f"engine {engine} read none of the series in these /metrics scrapes, but the {likely} parser reads "
        f"{fits[likely]} figure(s): the server looks like {likely} (use --engine {likely})"
    )


def parse(
    source: str | None = typer.Argument(
        None, metavar="FILE|-", help="A saved log: journalctl export, log file, or - for stdin."
    ),
    engine: str = typer.Option(
        ...,
        "--engine",
        "-e",
        help=f"Engine that wrote the log: {', '.join(BUILTIN)}, or one a package registers (docs/engines.md).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the window aggregate and samples as JSON."),
    regex: list[str] = typer.Option(
        [], "--regex", "-r", metavar="NAME=REGEX", help="A user parser; named groups become fields (repeatable)."
    ),
    limit: int = typer.Option(20, "--limit", help="Samples shown per kind in the table (0: all)."),
    prometheus: tuple[str, str] | None = typer.Option(
        None,
        "--prometheus",
        metavar="BEFORE AFTER",
        help="Two saved /metrics scrapes bracketing a window, instead of a log: counters by difference.",
    ),
    elapsed: float | None = typer.Option(
        None, "--elapsed", metavar="SECONDS", help="With --prometheus: seconds between the scrapes (for tok/s)."
    ),
    window: bool = typer.Option(
        False,
        "--window",
        help="The log is one point's window cut from a longer log (a run's windows/*.log): leave out each "
        "group's first interval line, which began before the window, as sweeps do.",
    ),
) -> None:
    """Read a saved log (or two saved /metrics scrapes) as one window: print the aggregate (accept length,
    acceptance rate, throughput, DDTree averages) and the samples."""
    if engine not in engine_names():
        raise typer.BadParameter(f"{engine!r} is not one of {', '.join(engine_names())}", param_hint="--engine")
    if prometheus is not None:
        if source is not None:
            raise typer.BadParameter("give either a log FILE or --prometheus BEFORE AFTER, not both")
        _parse_prometheus(engine, prometheus[0], prometheus[1], elapsed, as_json)
        return
    if source is None:
        raise typer.BadParameter("a log FILE (or - for stdin), or --prometheus BEFORE AFTER", param_hint="FILE|-")
    data = _read(source)
    wm = parse_saved_log(engine, data, _user_parsers(regex), cut=window)
    warnings = [w for w in (_engine_warning(engine, data), wm.integrity.describe()) if w]
    warnings += _impossible_lines(wm, data)
    if wm.details.get("per_position_unread"):
        warnings.append(f"per-position: {wm.details['per_position_unread']}")
    if as_json:
        out = wm.to_dict()
        if warnings:
            out["warnings"] = warnings
        typer.echo(json.dumps(out, indent=2))
    else:
        console.print(_summary(wm))
        for table in _sample_tables(wm, limit):
            console.print(table)
    for warning in warnings:
        _warn(warning)


def _impossible_lines(wm: WindowMetrics, data: bytes) -> list[str]:
    """One warning per DDTree line whose accepted depth exceeds its commit length (the depth_vs_commit check of
    a sweep's analysis, orchestrator/analysis/checks.py), naming the line of the log it is on. The lines are
    those a sweep's record counts (``flag_lines``: details.ddtree_lines_depth_above_commit), so the answer and
    a stored record say the same."""
    from orchestrator.analysis.checks import impossible_depth
    from orchestrator.engines.ddtreeintervals import flag_lines

    above = flag_lines(wm)
    ddtree = [s for s in wm.samples if s.kind == "ddtree"]
    numbers = [n for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1) if "DDTREE metrics" in line]
    out = []
    for index, sample in above:
        values = getattr(sample, "values", {})
        message = impossible_depth(values.get("avg_accepted_depth"), values.get("avg_commit_len"))
        if message is not None:
            where = f"line {numbers[index]}" if len(numbers) == len(ddtree) else f"DDTree line {index + 1}"
            out.append(f"depth_vs_commit: {where}: {message}")
    return out


def _warn(warning: str | None) -> None:
    """One line on stderr (never wrapped: a warning is grepped as often as read)."""
    if warning:
        err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}", markup=True, highlight=False, soft_wrap=True)


def _engine_warning(engine: str, data: bytes) -> str | None:
    """One line when ``engine``'s parser read none of the log's lines, naming the engine that reads them."""
    from orchestrator.metrics.engine_guess import engine_fit

    return engine_fit(engine, data.decode("utf-8", errors="replace")).describe()


def register(app: typer.Typer) -> None:
    app.command("parse")(parse)
