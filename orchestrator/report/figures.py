"""The report's figures, drawn from an ``Analysis`` with matplotlib's Agg backend (no display, no pyplot state).

Each function returns a ``matplotlib.figure.Figure`` (a notebook shows it as it is; the report saves it as a
PNG), or ``None`` when the run has nothing to draw for it (no tree variant for a heatmap, no AR baseline for a
speedup). Colours are fixed per configuration across figures; baselines are drawn dashed in black (AR) and
grey (linear).

At scale (more configurations than the palette has distinct colours, :data:`MAX_COLOURED`), a figure draws
the baselines and the :data:`MAX_COLOURED` configurations of highest throughput in colour and every other
configuration in light grey, without a legend entry each (the latency bars show only the coloured ones), and
says so in its title (:func:`scale_note`); the Pareto figure labels at most :data:`MAX_FRONT_LABELS` points of
its front, a heatmap prints its cells' values only up to :data:`MAX_CELL_TEXT` cells, and the latency figure
draws at most :data:`MAX_LATENCY_LOADS` loads, evenly from the lowest to the highest. Nothing is left out
silently: each figure that summarises says what it left out and where the rest is (the report's tables).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from orchestrator.analysis.result import Analysis
from orchestrator.report.labels import place_labels

__all__ = [
    "MAX_CELL_TEXT",
    "MAX_COLOURED",
    "MAX_FRONT_LABELS",
    "MAX_LATENCY_LOADS",
    "Highlight",
    "accept_len_heatmap",
    "config_colours",
    "front_labelled",
    "highlighted",
    "latency_percentiles",
    "pareto_plot",
    "scale_note",
    "speedup_heatmaps",
    "spread_rows",
    "throughput_vs_load",
]

_NAN = float("nan")
_AR_COLOUR = "#111111"
_LINEAR_COLOUR = "#7a7a7a"
_OTHER_COLOUR = "#c4c4c4"
_TITLE_SIZE = 12
_LABEL_SIZE = 10

#: More configurations than this (baselines aside) and a figure colours only this many, the ones of highest
#: throughput (tab20 without its greys has 18 distinct colours; beyond, colours would repeat).
MAX_COLOURED = 18
#: The Pareto figure labels at most this many points of its front, evenly along it.
MAX_FRONT_LABELS = 30
#: A heatmap panel prints its cells' values only up to this many cells (beyond, the report's tables hold them).
MAX_CELL_TEXT = 120
#: A heatmap axis names every row (or column) only up to this many; beyond, every n-th.
_MAX_TICKS = 24
#: The latency figure draws at most this many loads (a column of panels each, about 3 inches wide), evenly from
#: the lowest to the highest: at 25 loads it was 76 inches wide, past any page, and a third of the report's
#: drawing (bench/RESULTS-scale.md). The report's latency table holds every load.
MAX_LATENCY_LOADS = 12


def _figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)  # Agg explicitly: the report must draw on a machine with no display
    return figure


def _measured_ok(analysis: Analysis, host: str | None, mode: str | None = None) -> pd.DataFrame:
    frame = analysis.frame
    rows = frame[(frame["status"] == "ok") & frame["alias_of"].isna()]
    if host is not None:
        rows = rows[rows["host"] == host]
    if mode is not None:
        rows = rows[rows["mode"] == mode]
    return rows


def config_order(analysis: Analysis) -> list[str]:
    """Configurations in the order the plan ran them (baselines first), measured ones only."""
    measured = analysis.frame[analysis.frame["alias_of"].isna()]
    return list(dict.fromkeys(measured["label"]))


@dataclass(frozen=True)
class Highlight:
    """Which configurations (baselines aside) the figures draw in colour: all of them, or at scale the
    :data:`MAX_COLOURED` of highest throughput."""

    coloured: tuple[str, ...]
    total: int
    metric: str

    @property
    def summarised(self) -> bool:
        return self.total > len(self.coloured)

    def shows(self, label: str, analysis: Analysis) -> bool:
        return label in self.coloured or _role_of_label(analysis, label) is not None


def highlighted(analysis: Analysis) -> Highlight:
    """The configurations drawn in colour (see :class:`Highlight`): ranked by each one's best throughput over
    the run's successful points, ties in the plan's order."""
    labels = config_order(analysis)
    others = [label for label in labels if _role_of_label(analysis, label) is None]
    metric = analysis.metric
    if len(others) <= MAX_COLOURED:
        return Highlight(tuple(others), len(others), metric)
    rows = _measured_ok(analysis, None)
    best = pd.to_numeric(rows[metric], errors="coerce").groupby(rows["label"], sort=False).max()
    order = {label: i for i, label in enumerate(others)}
    ranked = sorted(others, key=lambda label: (-_sortable(best.get(label)), order[label]))
    chosen = set(ranked[:MAX_COLOURED])
    return Highlight(tuple(label for label in others if label in chosen), len(others), metric)


def _sortable(value: object) -> float:
    number = float(value) if isinstance(value, int | float) else _NAN
    return number if number == number else -math.inf


def scale_note(analysis: Analysis) -> str | None:
    """The sentence a summarising figure carries (None when every configuration has its colour)."""
    chosen = highlighted(analysis)
    if not chosen.summarised:
        return None
    return (
        f"colour: the {len(chosen.coloured)} of {chosen.total} configurations with the highest {chosen.metric}, "
        f"and the baselines; the other {chosen.total - len(chosen.coloured)} in grey"
    )


def config_colours(analysis: Analysis) -> dict[str, str]:
    """A fixed colour per configuration: AR black, linear grey, the rest from a qualitative palette without
    its greys (so no configuration can be mistaken for a baseline). At scale only the highlighted
    configurations (:func:`highlighted`) get a colour; the others a light grey."""
    labels = config_order(analysis)
    chosen = highlighted(analysis)
    others = list(chosen.coloured)
    name, greys = ("tab10", {7}) if len(others) <= 9 else ("tab20", {14, 15})
    palette = matplotlib.colormaps[name]
    choices = [matplotlib.colors.to_hex(palette(i)) for i in range(palette.N) if i not in greys]
    colours = {label: _OTHER_COLOUR for label in labels}
    colours.update({label: choices[i % len(choices)] for i, label in enumerate(others)})
    if analysis.roles.ar:
        colours[analysis.roles.ar] = _AR_COLOUR
    if analysis.roles.linear:
        colours[analysis.roles.linear] = _LINEAR_COLOUR
    return colours


def _failed(analysis: Analysis, host: str | None, mode: str | None = None) -> pd.DataFrame:
    frame = analysis.frame
    rows = frame[(frame["status"] == "failed") & frame["alias_of"].isna()]
    if host is not None:
        rows = rows[rows["host"] == host]
    if mode is not None:
        rows = rows[rows["mode"] == mode]
    return rows


def _role_of_label(analysis: Analysis, label: str) -> str | None:
    return analysis.roles.role_of(label)


def _load_axis(ax: Axes, loads: Sequence[float], mode: str) -> None:
    loads = sorted(set(loads))
    if mode == "concurrency" and loads and min(loads) > 0:
        ax.set_xscale("log", base=2)
    ax.set_xticks(loads)
    ax.set_xticklabels([f"{v:g}" for v in loads])
    ax.minorticks_off()
    label = "concurrent users (closed loop)" if mode == "concurrency" else "request rate (requests/s, open loop)"
    ax.set_xlabel(label, fontsize=_LABEL_SIZE)


def _host_note(analysis: Analysis, host: str | None) -> str:
    """`` on <host>`` when the run has several hosts, and the workload when the figure shows one of several."""
    hosts = sorted(set(analysis.frame["host"]))
    note = f" on {host}" if host is not None and len(hosts) > 1 else ""
    workloads = {str(w) for w in analysis.frame.get("workload", pd.Series(dtype=object)) if w}
    if len(workloads) == 1:
        note += f", workload {next(iter(workloads))}"
    return note


def _config_lines(
    ax: Axes, analysis: Analysis, rows: pd.DataFrame, column: str, colours: dict[str, str], legend: bool
) -> None:
    chosen = highlighted(analysis)
    groups = dict(tuple(rows.groupby("label", sort=False)))
    grey: list[np.ndarray] = []
    for label in config_order(analysis):
        if label not in groups:
            continue
        line = groups[label].sort_values("load")
        values = pd.to_numeric(line[column], errors="coerce")
        if line.empty or values.isna().all():
            continue
        if not chosen.shows(label, analysis):  # at scale: one grey line each, drawn at once, no legend entry
            present = values.notna().to_numpy()
            grey.append(np.column_stack((line["load"].to_numpy(dtype=float)[present], values.to_numpy()[present])))
            continue
        baseline = _role_of_label(analysis, label) is not None
        ax.plot(
            line["load"],
            values,
            label=(f"{label} (baseline)" if baseline else label) if legend else None,
            color=colours.get(label),
            linestyle="--" if baseline else "-",
            linewidth=2.4 if baseline else 1.5,
            marker="s" if baseline else "o",
            markersize=5 if baseline else 4,
            zorder=3 if baseline else 2,
        )
        lo_col, hi_col = f"{column}_lo", f"{column}_hi"
        if lo_col in line.columns and hi_col in line.columns:
            lo = pd.to_numeric(line[lo_col], errors="coerce")
            hi = pd.to_numeric(line[hi_col], errors="coerce")
            have = lo.notna() & hi.notna() & values.notna()
            if have.any():
                # Error bars: the figure's confidence interval (orchestrator/analysis/intervals.py).
                ax.errorbar(
                    line["load"][have],
                    values[have],
                    yerr=[(values - lo)[have].clip(lower=0), (hi - values)[have].clip(lower=0)],
                    fmt="none",
                    ecolor=colours.get(label),
                    elinewidth=1.0,
                    capsize=3,
                    alpha=0.8,
                    zorder=3 if baseline else 2,
                )
    if grey:
        ax.add_collection(
            LineCollection(
                grey,
                colors=_OTHER_COLOUR,
                linewidths=0.8,
                zorder=1,
                label=f"{len(grey)} other configurations (grey)" if legend else None,
            )
        )
        ax.autoscale_view()


def _mark_failed(ax: Axes, failed: pd.DataFrame, colours: dict[str, str], legend: bool) -> None:
    if failed.empty:
        return
    ax.scatter(
        failed["load"],
        [0.0] * len(failed),
        marker="X",
        s=70,
        color=[colours.get(label, "#c62828") for label in failed["label"]],
        edgecolors="#c62828",
        linewidths=1.2,
        zorder=4,
        clip_on=False,
        label="failed point (colour: its configuration)" if legend else None,
    )


def throughput_vs_load(analysis: Analysis, *, host: str | None = None, mode: str = "concurrency") -> Figure | None:
    """Total output tok/s against concurrency (or rate), a line per configuration, baselines dashed; beside it
    the same figures relative to AR, where small differences at low load are visible. Failed points are
    marked with an X on the axis."""
    rows = _measured_ok(analysis, host, mode)
    metric = analysis.metric
    if rows.empty or pd.to_numeric(rows[metric], errors="coerce").isna().all():
        return None
    colours = config_colours(analysis)
    failed = _failed(analysis, host, mode)
    relative = analysis.roles.ar is not None and rows["speedup_vs_ar"].notna().any()
    figure = _figure(15.5 if relative else 10.5, 5.8)
    axes = figure.subplots(1, 2 if relative else 1, squeeze=False)[0]
    what = "concurrency" if mode == "concurrency" else "request rate"
    ax = axes[0]
    _config_lines(ax, analysis, rows, metric, colours, legend=True)
    _mark_failed(ax, failed, colours, legend=True)
    _load_axis(ax, list(rows["load"]) + list(failed["load"]), mode)
    ax.set_ylabel("output throughput (tokens/s, all users)", fontsize=_LABEL_SIZE)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title("total output tokens/s (higher is better)", fontsize=_LABEL_SIZE + 1)
    if relative:
        right = axes[1]
        _config_lines(right, analysis, rows, "speedup_vs_ar", colours, legend=False)
        right.axhline(1.0, color=_AR_COLOUR, linewidth=1.0, alpha=0.5)
        _load_axis(right, list(rows["load"]), mode)
        right.set_ylabel(f"speedup over AR ({analysis.roles.ar}), × tokens/s", fontsize=_LABEL_SIZE)
        right.grid(True, alpha=0.3)
        right.set_title("relative to the AR baseline (1.0 = as fast as AR)", fontsize=_LABEL_SIZE + 1)
    note = scale_note(analysis)
    figure.suptitle(
        f"{analysis.experiment_name}: output throughput vs {what}{_host_note(analysis, host)} (baselines dashed)"
        + (f"\n({note})" if note else ""),
        fontsize=_TITLE_SIZE,
    )
    figure.legend(loc="outside right upper", fontsize=8.5, frameon=False)
    return figure


def _tree_variants(rows: pd.DataFrame) -> list[str]:
    trees = rows[rows["tree_budget"].notna() & rows["tree_topk"].notna()]
    return list(dict.fromkeys(trees["variant"]))


def _annotate_grid(
    ax: Axes,
    grid: pd.DataFrame,
    text: str,
    dark: Callable[[float], bool],
    failed: set[tuple[float, float]] | None = None,
) -> None:
    values = grid.to_numpy(dtype=float)
    if values.size > MAX_CELL_TEXT:  # too many cells to print each one legibly: the figure's title says so
        return
    # Each value sits inside its cell, within the axes: the constrained layout need not measure it (a 25-panel
    # heatmap figure has 1,600 of them; measuring them was a fifth of its drawing, bench/RESULTS-scale.md).
    cell: dict[str, Any] = {"ha": "center", "va": "center", "fontsize": 9, "in_layout": False}
    for i, budget in enumerate(grid.index):
        for j, topk in enumerate(grid.columns):
            value = float(values[i, j])
            if failed and (budget, topk) in failed:
                ax.text(j, i, "failed", color="#c62828", weight="bold", **cell)
            elif math.isnan(value):
                ax.text(j, i, "–", color="#666666", **cell)
            else:
                ax.text(j, i, text.format(value), color="white" if dark(value) else "black", **cell)


def _below(threshold: float) -> Callable[[float], bool]:
    return lambda value: value < threshold


def _grid(rows: pd.DataFrame, value: str, shape: pd.DataFrame | None = None) -> pd.DataFrame:
    """Budget (rows, ascending) x top-k (columns) of ``value``; ``shape`` rows fix the full set of cells."""
    data = rows.assign(_v=pd.to_numeric(rows[value], errors="coerce"))
    grid = data.pivot_table(index="tree_budget", columns="tree_topk", values="_v", aggfunc="mean", dropna=False)
    source = shape if shape is not None else rows
    budgets = sorted(set(source["tree_budget"].dropna()) | set(grid.index))
    topks = sorted(set(source["tree_topk"].dropna()) | set(grid.columns))
    return grid.reindex(index=budgets, columns=topks)


def _grid_axes(ax: Axes, grid: pd.DataFrame) -> None:
    for axis, names in ((ax.xaxis, grid.columns), (ax.yaxis, grid.index)):
        step = max(1, math.ceil(len(names) / _MAX_TICKS))  # every n-th name where all would overlap
        axis.set_ticks(range(0, len(names), step))
        axis.set_ticklabels([f"{v:g}" for v in list(names)[::step]])
    ax.set_xlabel("top-k (children per node)", fontsize=_LABEL_SIZE)


def _cells_note(grids: Sequence[pd.DataFrame], where: str) -> str:
    """The line a heatmap's title gets when its cells are too many to print each value."""
    if not any(grid.size > MAX_CELL_TEXT for grid in grids):
        return ""
    return f"\n(over {MAX_CELL_TEXT} cells a panel: values not printed in the cells; the {where} table has each)"


def accept_len_heatmap(analysis: Analysis, *, host: str | None = None) -> Figure | None:
    """Accept length of each tree configuration as a budget x top-k grid (mean over the loads measured)."""
    rows = _measured_ok(analysis, host)
    variants = _tree_variants(rows)
    if not variants:
        return None
    figure = _figure(max(4.6 * len(variants) + 1.4, 7.0), 5.0)
    axes = figure.subplots(1, len(variants), squeeze=False)[0]
    loads = rows.sort_values("load")["load_label"].drop_duplicates().tolist()
    linear = pd.to_numeric(rows[rows["role"] == "linear"]["accept_len"], errors="coerce").dropna()
    grids: list[pd.DataFrame] = []
    for ax, variant in zip(axes, variants, strict=True):
        grid = _grid(rows[rows["variant"] == variant], "accept_len")
        grids.append(grid)
        values = grid.to_numpy(dtype=float)
        if grid.isna().all().all():
            ax.set_axis_off()
            ax.set_title(f"{variant}: no accept length measured", fontsize=_LABEL_SIZE)
            continue
        image = ax.imshow(values, cmap="viridis", aspect="auto", origin="lower", interpolation="nearest")
        low, high = float(grid.min().min()), float(grid.max().max())
        middle = low + (high - low) / 2
        _annotate_grid(ax, grid, "{:.2f}", _below(float(middle)))
        _grid_axes(ax, grid)
        ax.set_ylabel("budget (max tree nodes)", fontsize=_LABEL_SIZE)
        ax.set_title(variant, fontsize=_LABEL_SIZE + 1)
        colourbar = figure.colorbar(image, ax=ax, shrink=0.9)
        colourbar.set_label("accept length (tokens/step, bonus included)", fontsize=9)
    span = f"{loads[0]}…{loads[-1]}" if len(loads) > 1 else (loads[0] if loads else "")
    reference = f"; linear chain accepts {linear.mean():.2f}" if not linear.empty else ""
    figure.suptitle(
        f"{analysis.experiment_name}: tree accept length, budget × top-k{_host_note(analysis, host)}\n"
        f"tokens per verify step, mean over {span}{reference}\n(higher is better)"
        + _cells_note(grids, "Accept length"),
        fontsize=_TITLE_SIZE,
    )
    return figure


def speedup_heatmaps(analysis: Analysis, *, against: str = "ar", host: str | None = None) -> Figure | None:
    """Tree speedup (tok/s ratio) over a baseline as budget x top-k grids, one panel per load level."""
    column = f"speedup_vs_{against}"
    baseline = analysis.roles.ar if against == "ar" else analysis.roles.linear
    rows = _measured_ok(analysis, host)
    variants = _tree_variants(rows)
    if not variants or baseline is None or rows[column].isna().all():
        return None
    rows = rows[rows["variant"].isin(variants)]
    failed = _failed(analysis, host)
    loads = rows.sort_values(["mode", "load"])[["mode", "load", "load_label"]].drop_duplicates()
    values = pd.to_numeric(rows[column], errors="coerce").dropna()
    low, high = float(min(values.min(), 0.95)), float(max(values.max(), 1.05))
    norm = TwoSlopeNorm(vmin=low, vcenter=1.0, vmax=high)
    panels = [(v, load) for v in variants for load in loads.itertuples(index=False)]
    columns = min(4, len(panels))
    lines = math.ceil(len(panels) / columns)
    figure = _figure(3.3 * columns + 1.4, 3.3 * lines + 1.0)
    axes = figure.subplots(lines, columns, squeeze=False)
    image = None
    grids: list[pd.DataFrame] = []
    for index, (variant, load) in enumerate(panels):
        ax = axes[index // columns][index % columns]
        subset = rows[(rows["variant"] == variant) & (rows["load_label"] == load.load_label)]
        lost = failed[(failed["variant"] == variant) & (failed["load_label"] == load.load_label)]
        grid = _grid(subset, column, shape=rows[rows["variant"] == variant])
        grids.append(grid)
        image = ax.imshow(
            grid.to_numpy(dtype=float), cmap="RdBu", norm=norm, aspect="auto", origin="lower", interpolation="nearest"
        )
        cells = set(zip(lost["tree_budget"], lost["tree_topk"], strict=True))
        _annotate_grid(ax, grid, "{:.2f}×", lambda v: abs(float(norm(v)) - 0.5) > 0.35, cells)
        _grid_axes(ax, grid)
        if index % columns == 0:
            ax.set_ylabel("budget (max tree nodes)", fontsize=_LABEL_SIZE)
        title = load.load_label if len(variants) == 1 else f"{variant} @ {load.load_label}"
        ax.set_title(title, fontsize=_LABEL_SIZE + 1)
    for index in range(len(panels), lines * columns):
        axes[index // columns][index % columns].set_axis_off()
    if image is not None:
        colourbar = figure.colorbar(image, ax=axes, shrink=0.85)
        colourbar.set_label(f"tok/s ÷ {baseline} tok/s (1.0 = same)", fontsize=9)
    name = "autoregressive" if against == "ar" else "linear"
    named = name if baseline == name else f"{name} ({baseline})"
    figure.suptitle(
        f"{analysis.experiment_name}: tree speedup over the {named} baseline at each load"
        f"{_host_note(analysis, host)}\n(output tok/s ratio; blue = faster, red = slower)"
        + _cells_note(grids, "Speedup over AR" if against == "ar" else "Speedup over linear"),
        fontsize=_TITLE_SIZE,
    )
    return figure


def latency_percentiles(analysis: Analysis, *, host: str | None = None) -> Figure | None:
    """TTFT and ITL per configuration at each load: p50 bars (with the p50's confidence interval as error bars)
    and p90 and p99 markers."""
    rows = _measured_ok(analysis, host)
    metrics = [m for m in ("ttft_ms", "itl_ms") if f"{m}_p50" in rows.columns and rows[f"{m}_p50"].notna().any()]
    if rows.empty or not metrics:
        return None
    chosen = highlighted(analysis)
    present = set(rows["label"])
    every = [label for label in config_order(analysis) if label in present]
    labels = [label for label in every if chosen.shows(label, analysis)]  # at scale: the coloured ones
    every_load = rows.sort_values(["mode", "load"])[["mode", "load", "load_label"]].drop_duplicates()
    loads = spread_rows(every_load, MAX_LATENCY_LOADS)
    colours = config_colours(analysis)
    failed = _failed(analysis, host)
    figure = _figure(2.9 * len(loads) + 3.2, 0.28 * len(labels) * len(metrics) + 1.6 * len(metrics) + 0.6)
    axes = figure.subplots(len(metrics), len(loads), squeeze=False, sharey=True)
    names = {"ttft_ms": "time to first token (ms)", "itl_ms": "inter-token latency (ms)"}
    positions = list(range(len(labels)))
    for r, metric in enumerate(metrics):
        for c, load in enumerate(loads.itertuples(index=False)):
            ax = axes[r][c]
            same = (rows["mode"] == load.mode) & (rows["load"] == load.load) & (rows["load_label"] == load.load_label)
            at = rows[same].set_index("label")
            figures = {
                stat: [
                    float(pd.to_numeric(at[f"{metric}_{stat}"], errors="coerce").get(label, _NAN))
                    if f"{metric}_{stat}" in at.columns
                    else _NAN
                    for label in labels
                ]
                for stat in ("p50", "p90", "p99")
            }
            bounds = [
                [
                    float(pd.to_numeric(at[f"{metric}_p50_{end}"], errors="coerce").get(label, _NAN))
                    if f"{metric}_p50_{end}" in at.columns
                    else _NAN
                    for label in labels
                ]
                for end in ("lo", "hi")
            ]
            errors = [
                [
                    max(0.0, v - lo) if v == v and lo == lo else 0.0
                    for v, lo in zip(figures["p50"], bounds[0], strict=True)
                ],
                [
                    max(0.0, hi - v) if v == v and hi == hi else 0.0
                    for v, hi in zip(figures["p50"], bounds[1], strict=True)
                ],
            ]
            ax.barh(
                positions,
                figures["p50"],
                color=[colours.get(label, "#1f77b4") for label in labels],
                alpha=0.85,
                height=0.7,
                xerr=errors if any(any(e) for e in errors) else None,
                error_kw={"elinewidth": 1.0, "capsize": 2.5, "ecolor": "#333333"},
            )
            ax.plot(figures["p90"], positions, linestyle="none", marker="|", markersize=9, color="black")
            ax.plot(figures["p99"], positions, linestyle="none", marker="x", markersize=5, color="#b22222")
            lost = failed[(failed["load_label"] == load.load_label)]
            for position, label in zip(positions, labels, strict=True):
                if label in set(lost["label"]):
                    ax.text(0, position, " failed", va="center", ha="left", fontsize=8, color="#c62828")
            ax.set_yticks(positions)
            ax.set_yticklabels(labels, fontsize=8.5)
            ax.grid(True, axis="x", alpha=0.3)
            ax.set_xlim(left=0)
            ax.tick_params(axis="x", labelsize=8.5)
            if r == 0:
                ax.set_title(load.load_label, fontsize=_LABEL_SIZE + 1)
            ax.set_xlabel(names[metric], fontsize=9)
    axes[0][0].invert_yaxis()  # shared by every panel: first configuration on top
    handles = [
        Line2D([], [], color="#888888", linewidth=6, label="p50 (bar; whiskers: its confidence interval)"),
        Line2D([], [], color="black", marker="|", linestyle="none", markersize=9, label="p90"),
        Line2D([], [], color="#b22222", marker="x", linestyle="none", markersize=6, label="p99"),
    ]
    figure.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=9, frameon=False)

    def _others(names: list[str]) -> int:
        return sum(1 for label in names if _role_of_label(analysis, label) is None)

    figure.suptitle(
        f"{analysis.experiment_name}: latency percentiles per configuration and load{_host_note(analysis, host)}\n"
        "(lower is better)"
        + (
            f"\n(shown: the {_others(labels)} of {_others(every)} configurations with the highest {chosen.metric}, "
            "and the baselines; every configuration's latency is in the report's tables)"
            if len(labels) < len(every)
            else ""
        )
        + (
            f"\n(shown: {len(loads)} of {len(every_load)} loads, evenly from {every_load.iloc[0].load_label} to "
            f"{every_load.iloc[-1].load_label}; every load's latency is in the report's tables and summary.csv)"
            if len(loads) < len(every_load)
            else ""
        ),
        fontsize=_TITLE_SIZE,
    )
    return figure


def spread_rows(rows: pd.DataFrame, most: int) -> pd.DataFrame:
    """At most ``most`` of ``rows`` (``most`` at least 2), in their order, evenly from the first to the last."""
    if len(rows) <= most:
        return rows
    picks = sorted({round(i * (len(rows) - 1) / (most - 1)) for i in range(most)})
    return rows.iloc[picks]


def pareto_plot(analysis: Analysis, *, host: str | None = None) -> Figure | None:
    """Every point as per-user tok/s against total tok/s, with both intervals as error bars; the Pareto front
    (points beaten on both figures beyond noise are off it) joined and labelled."""
    rows = _measured_ok(analysis, host)
    metric = analysis.metric
    rows = rows.assign(
        _x=pd.to_numeric(rows["per_user_tok_s"], errors="coerce") if "per_user_tok_s" in rows else _NAN,
        _y=pd.to_numeric(rows[metric], errors="coerce"),
    ).dropna(subset=["_x", "_y"])
    if rows.empty:
        return None
    front = analysis.pareto
    if host is not None:
        front = front[front["host"] == host]
    colours = config_colours(analysis)
    chosen = highlighted(analysis)
    figure = _figure(10.5, 6.0)
    ax = figure.add_subplot()
    groups = dict(tuple(rows.groupby("label", sort=False)))
    shown = [label for label in config_order(analysis) if label in groups and chosen.shows(label, analysis)]
    grey = rows[~rows["label"].isin(shown)]
    if not grey.empty:  # at scale: every other configuration's points in one grey layer, below the coloured ones
        others = grey["label"].nunique()
        ax.scatter(
            grey["_x"], grey["_y"], color=_OTHER_COLOUR, s=12, zorder=1, label=f"{others} other configurations (grey)"
        )
        _pareto_errors(ax, grey, metric, _OTHER_COLOUR, zorder=0, alpha=0.35)
    for label in shown:
        points = groups[label]
        role = _role_of_label(analysis, label)
        ax.scatter(
            points["_x"],
            points["_y"],
            color=colours.get(label),
            s=46 if role else 30,
            marker={"ar": "s", "linear": "^"}.get(role or "", "o"),
            label=f"{label} (baseline)" if role else label,
            zorder=3,
            edgecolors="white",
            linewidths=0.5,
        )
        _pareto_errors(ax, points, metric, colours.get(label), zorder=2, alpha=0.6)
    if not front.empty:
        ordered = front.sort_values("per_user_tok_s")
        ax.plot(
            ordered["per_user_tok_s"],
            ordered[metric],
            color="black",
            linewidth=1.0,
            alpha=0.6,
            zorder=2,
            label="Pareto front",
        )
        ax.scatter(
            ordered["per_user_tok_s"],
            ordered[metric],
            s=130,
            facecolors="none",
            edgecolors="black",
            linewidths=1.0,
            zorder=4,
        )
    ax.set_xlabel("per-user throughput (tokens/s per user; interactivity)", fontsize=_LABEL_SIZE)
    ax.set_ylabel("total output throughput (tokens/s, all users)", fontsize=_LABEL_SIZE)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    notes = [n for n in (scale_note(analysis), _labels_note(len(front))) if n]
    ax.set_title(
        f"{analysis.experiment_name}: per-user vs total throughput, every configuration and load"
        f"{_host_note(analysis, host)}\n(up and right is better; the front is what no other point beats on both "
        "beyond noise)" + "".join(f"\n({n})" for n in notes),
        fontsize=_TITLE_SIZE,
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8.5, frameon=False)
    if not front.empty:
        # Last, once the axes are final: labels laid out so none overlaps another, a point, or the axes' edge.
        labelled = ordered.iloc[front_labelled(len(ordered))]
        place_labels(
            ax,
            list(zip(labelled["per_user_tok_s"], labelled[metric], strict=True)),
            [f"{label} @ {load}" for label, load in zip(labelled["label"], labelled["load_label"], strict=True)],
            avoid=list(zip(rows["_x"], rows["_y"], strict=True)),
            fontsize=7.5,
            color="#333333",
        )
        # place_labels laid the figure out to place them, and labels are left out of the layout: the layout is
        # final, so saving does not run the layout engine a second time.
        figure.set_layout_engine("none")
    return figure


def front_labelled(size: int) -> list[int]:
    """Which of a front of ``size`` points (in the order it is drawn) get a label: all up to
    :data:`MAX_FRONT_LABELS`, else that many evenly along it, both ends included."""
    if size <= MAX_FRONT_LABELS:
        return list(range(size))
    return sorted({round(i * (size - 1) / (MAX_FRONT_LABELS - 1)) for i in range(MAX_FRONT_LABELS)})


def _labels_note(size: int) -> str | None:
    if size <= MAX_FRONT_LABELS:
        return None
    return (
        f"labelled: {len(front_labelled(size))} of the front's {size} points, evenly along it; "
        "the report's table of the front lists every one"
    )


def _pareto_errors(
    ax: Axes, points: pd.DataFrame, metric: str, colour: str | None, *, zorder: int, alpha: float
) -> None:
    """Both intervals of ``points`` (``_x``: per-user, ``_y``: total throughput) as error bars, when they have any."""
    errors: list[list[pd.Series] | None] = []
    for column, centre in (("per_user_tok_s", points["_x"]), (metric, points["_y"])):
        if f"{column}_lo" not in points.columns or f"{column}_hi" not in points.columns:
            errors.append(None)
            continue
        lo = pd.to_numeric(points[f"{column}_lo"], errors="coerce")
        hi = pd.to_numeric(points[f"{column}_hi"], errors="coerce")
        if lo.isna().all():
            errors.append(None)
            continue
        errors.append([(centre - lo).clip(lower=0).fillna(0), (hi - centre).clip(lower=0).fillna(0)])
    if any(e is not None for e in errors):
        ax.errorbar(
            points["_x"],
            points["_y"],
            xerr=errors[0],
            yerr=errors[1],
            fmt="none",
            ecolor=colour,
            elinewidth=0.8,
            alpha=alpha,
            zorder=zorder,
        )
