"""The report's view of workloads (``load.workloads``): per-workload tables, winners and figures.

A run with workloads measures every configuration on every workload at every load, so the questions are:
how much does each configuration accept and gain on each workload, and does the best configuration depend on
the workload? This module answers them from an :class:`~orchestrator.analysis.result.Analysis` alone:

- :func:`workload_views`: the analysis narrowed to one workload at a time, so that every figure of the report
  is drawn per workload (a run without workloads is its own single view);
- :func:`workload_summary`: per configuration and workload, the accept length, the per-position acceptance
  (where the engine reports it) and the speedup over AR, each the mean over the loads;
- :func:`best_by_workload`: the best configuration of each workload at each load (the answer's winners,
  ``Answer.loads``);
- :func:`winner_sentences`: where the best configuration differs between workloads at one load, one sentence
  that says so (``A wins code, B wins translation at C=1``);
- :func:`workload_figures`: the heatmap of speedup over AR by configuration x workload (a panel per load),
  and the TTFT and inter-token latency CDFs of each load from every request (``requests/<point>.jsonl``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from orchestrator.analysis.answer import Answer, LoadAnswer
from orchestrator.analysis.checks import capped_share
from orchestrator.analysis.requests import samples_by_load
from orchestrator.analysis.result import Analysis
from orchestrator.report.figures import _figure, config_colours, config_order

__all__ = [
    "best_by_workload",
    "latency_cdfs",
    "speedup_by_workload_heatmap",
    "winner_sentences",
    "workload_figures",
    "workload_names",
    "workload_summary",
    "workload_views",
]


def workload_names(analysis: Analysis) -> list[str]:
    """The run's workloads in the order it measured them (none: a run without workloads)."""
    frame = analysis.frame
    if frame.empty or "workload" not in frame.columns:
        return []
    return [str(w) for w in dict.fromkeys(frame["workload"]) if w]


def workload_views(analysis: Analysis) -> list[tuple[str, Analysis]]:
    """(workload, the analysis of that workload's points) for each workload; [("", analysis)] without any."""
    names = workload_names(analysis)
    if not names:
        return [("", analysis)]
    views = []
    for name in names:
        views.append(
            (
                name,
                dataclasses.replace(
                    analysis,
                    frame=analysis.frame[analysis.frame["workload"] == name],
                    best=analysis.best[analysis.best["workload"] == name],
                    pareto=analysis.pareto[analysis.pareto["workload"] == name]
                    if "workload" in analysis.pareto.columns
                    else analysis.pareto,
                ),
            )
        )
    return views


def _measured_ok(analysis: Analysis) -> pd.DataFrame:
    frame = analysis.frame
    return frame[(frame["status"] == "ok") & frame["alias_of"].isna()]


def _per_position(values: pd.Series) -> str:
    """The mean per-position acceptance over the loads, as text (one rate per draft position)."""
    lists = [list(v) for v in values if isinstance(v, list | tuple | np.ndarray) and len(v)]
    if not lists:
        return ""
    width = min(len(v) for v in lists)
    return ", ".join(f"{np.mean([float(v[i]) for v in lists]):.2f}" for i in range(width))


def workload_summary(analysis: Analysis) -> pd.DataFrame:
    """A row per (configuration, workload): accept length, per-position acceptance, speedup over AR (means
    over the loads) and the share of responses that stopped at the output cap (``finish_reason: length``)."""
    rows = _measured_ok(analysis)
    if rows.empty or not workload_names(analysis):
        return pd.DataFrame()
    per_pos = [c for c in rows.columns if c.endswith("per_position_acceptance")]
    out = []
    for (label, workload), group in rows.groupby(["label", "workload"], sort=False):
        entry: dict[str, Any] = {"configuration": label, "workload": workload}
        entry["accept len"] = pd.to_numeric(group["accept_len"], errors="coerce").mean()
        entry["per-position acceptance"] = next(
            (text for text in (_per_position(group[c]) for c in per_pos) if text), ""
        )
        entry["× AR"] = pd.to_numeric(group["speedup_vs_ar"], errors="coerce").mean()
        shares = [capped_share(r) for r in _records(group)]
        known = [v for v in shares if v is not None]
        entry["at the cap"] = float(np.mean(known)) if known else float("nan")
        out.append(entry)
    table = pd.DataFrame(out)
    order = {label: i for i, label in enumerate(config_order(analysis))}
    workloads = {w: i for i, w in enumerate(workload_names(analysis))}
    table["_c"] = table["configuration"].map(order)
    table["_w"] = table["workload"].map(workloads)
    return table.sort_values(["_c", "_w"], kind="stable").drop(columns=["_c", "_w"]).reset_index(drop=True)


def summary_cells(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`workload_summary` as text cells (accept length two decimals, ratios as ``1.23×``, shares in %)."""

    def cell(value: Any, fmt: str) -> str:
        number = pd.to_numeric(value, errors="coerce")
        return "" if pd.isna(number) else fmt.format(float(number))

    out = table.copy()
    if out.empty:
        return out
    out["accept len"] = [cell(v, "{:.2f}") for v in out["accept len"]]
    out["× AR"] = [cell(v, "{:.2f}×") for v in out["× AR"]]
    out["at the cap"] = [cell(v, "{:.0%}") for v in out["at the cap"]]
    return out


def workload_blocks(made: Answer) -> list[Any]:
    """The report's "Workloads" section (nothing for a run without workloads): the answer's winners of each
    workload, and the per-workload summary of the analysis it was made from."""
    from orchestrator.report.render import Heading, Items, Paragraph, Table

    analysis = made.analysis
    names = workload_names(analysis)
    if not names:
        return []
    blocks: list[Any] = [
        Heading("Workloads"),
        Paragraph(
            f"Every configuration was measured on {len(names)} workloads ({', '.join(names)}) at every load, "
            "in the same deployments (a workload costs no restart). Figures and tables below the winners "
            "are per workload; each load reads 'workload C=…'.",
            "muted",
        ),
    ]
    sentences = winner_sentences(made)
    if sentences:
        blocks.append(Items([("", s, []) for s in sentences]))
    elif len(names) > 1 and made.loads:
        blocks.append(Paragraph("The same configuration is best on every workload at every load.", "muted"))
    best = best_by_workload(made)
    if not best.empty:
        blocks.append(Table(best, "Best configuration of each workload at each load"))
    summary = workload_summary(analysis)
    if not summary.empty:
        blocks.append(
            Table(
                summary_cells(summary),
                "Accept length, per-position acceptance (where the engine reports it), speedup over AR and the "
                "share of responses stopped at the output cap, per configuration and workload (means over the loads)",
            )
        )
    return blocks


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return frame.to_dict("records")  # type: ignore[return-value]


def _load_text(row: dict[str, Any]) -> str:
    label = str(row.get("load_label") or "")
    workload = str(row.get("workload") or "")
    return label[len(workload) + 1 :] if workload and label.startswith(workload + " ") else label


def best_by_workload(made: Answer) -> pd.DataFrame:
    """The answer's best configuration (and its tok/s) of each workload at each load: a row per workload, a column
    per load; several hosts each get their own rows."""
    loads_of = made.loads
    names = workload_names(made.analysis)
    if not loads_of or not names:
        return pd.DataFrame()
    several = len({lv.host for lv in loads_of}) > 1
    cells: dict[tuple[str, str], dict[str, str]] = {}
    loads: list[str] = []
    for lv in loads_of:
        key = (lv.host, lv.workload)
        load = _load_text({"load_label": lv.load_label, "workload": lv.workload})
        if load not in loads:
            loads.append(load)
        value = "?" if lv.value is None else f"{lv.value:,.1f}"
        verdict = " (tie)" if lv.decided is False else ""
        cells.setdefault(key, {})[load] = f"{lv.winner}{verdict}, {value} tok/s"
    order = {w: i for i, w in enumerate(names)}
    out = []
    for (host, workload), by_load in sorted(cells.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 0))):
        entry = {"host": host} if several else {}
        entry["workload"] = workload
        entry.update({load: by_load.get(load, "") for load in loads})
        out.append(entry)
    return pd.DataFrame(out)


def winner_sentences(made: Answer) -> list[str]:
    """At each load where workloads have different best configurations (the answer's winners), one sentence
    naming them."""
    names = workload_names(made.analysis)
    if not made.loads or len(names) < 2:
        return []
    groups: dict[tuple[str, str, float], list[LoadAnswer]] = {}
    for lv in made.loads:
        groups.setdefault((lv.host, lv.mode, lv.load), []).append(lv)
    several = len({lv.host for lv in made.loads}) > 1
    order = {w: i for i, w in enumerate(names)}
    sentences = []
    for (host, _mode, _load), group in sorted(groups.items(), key=lambda kv: kv[0]):
        if len({lv.winner for lv in group}) < 2:
            continue
        first = group[0]
        where = _load_text({"load_label": first.load_label, "workload": first.workload})
        where += f" on {host}" if several else ""
        parts = []
        for lv in sorted(group, key=lambda lv: order.get(lv.workload, 0)):
            noise = f" (within noise of {', '.join(lv.tied)})" if lv.decided is False and lv.tied else ""
            parts.append(f"{lv.winner} wins {lv.workload}{noise}")
        sentences.append(f"The best configuration depends on the workload at {where}: {'; '.join(parts)}.")
    return sentences


def speedup_by_workload_heatmap(analysis: Analysis) -> Figure | None:
    """Speedup over AR, configuration (rows) x workload (columns), one panel per load level."""
    rows = _measured_ok(analysis)
    names = workload_names(analysis)
    if not names or analysis.roles.ar is None or rows.empty or rows["speedup_vs_ar"].isna().all():
        return None
    rows = rows.assign(_load=[_load_text(r) for r in _records(rows)])
    loads = rows.sort_values(["mode", "load"])["_load"].drop_duplicates().tolist()
    labels = [c for c in config_order(analysis) if c in set(rows["label"])]
    values = pd.to_numeric(rows["speedup_vs_ar"], errors="coerce").dropna()
    norm = TwoSlopeNorm(vmin=float(min(values.min(), 0.95)), vcenter=1.0, vmax=float(max(values.max(), 1.05)))
    columns = min(3, len(loads))
    lines = math.ceil(len(loads) / columns)
    figure = _figure(1.2 * len(names) * columns + 3.5, 0.42 * len(labels) * lines + 1.6 * lines)
    axes = figure.subplots(lines, columns, squeeze=False)
    image = None
    for index, load in enumerate(loads):
        ax = axes[index // columns][index % columns]
        at = rows[rows["_load"] == load]
        grid = at.pivot_table(index="label", columns="workload", values="speedup_vs_ar", aggfunc="mean")
        grid = grid.reindex(index=labels, columns=names)
        data = grid.to_numpy(dtype=float)
        image = ax.imshow(data, cmap="RdBu", norm=norm, aspect="auto")
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                if not math.isnan(data[i, j]):
                    dark = abs(float(norm(data[i, j])) - 0.5) > 0.35
                    ax.text(j, i, f"{data[i, j]:.2f}×", ha="center", va="center", fontsize=8,
                            color="white" if dark else "black")  # fmt: skip
        ax.set_xticks(range(len(names)), names, fontsize=9)
        ax.set_yticks(range(len(labels)), labels if index % columns == 0 else [""] * len(labels), fontsize=8)
        ax.set_title(load, fontsize=11)
    for index in range(len(loads), lines * columns):
        axes[index // columns][index % columns].set_axis_off()
    if image is not None:
        figure.colorbar(image, ax=axes, shrink=0.85).set_label(f"tok/s ÷ {analysis.roles.ar} tok/s", fontsize=9)
    figure.suptitle(
        f"{analysis.experiment_name}: speedup over the autoregressive baseline by configuration and workload\n"
        "(output tok/s ratio; blue = faster, red = slower)",
        fontsize=12,
    )
    return figure


def latency_cdfs(analysis: Analysis, samples: pd.DataFrame, load_label: str) -> Figure | None:
    """TTFT and inter-token latency CDFs of every configuration at one load, from every request (``samples``:
    ``requests.samples_frame``)."""
    at = samples[samples["load_label"] == load_label]
    if at.empty:
        return None
    grouped: dict[tuple[str, Any], np.ndarray] = {
        (str(figure), label): part["value"].to_numpy(float)
        for (figure, label), part in at.groupby(["figure", "label"], sort=False)
    }
    return _latency_cdfs(analysis, grouped, load_label)


def _latency_cdfs(analysis: Analysis, grouped: dict[tuple[str, Any], np.ndarray], load_label: str) -> Figure:
    """:func:`latency_cdfs` of one load's samples by (figure, configuration label). Each configuration's samples
    are found once (a filter of the load's samples per configuration and figure was quadratic:
    bench/RESULTS-scale.md)."""
    nothing = np.empty(0, dtype=float)
    colours = config_colours(analysis)
    figure = _figure(10.5, 3.8)
    axes = figure.subplots(1, 2, squeeze=False)[0]
    for ax, figure_name, title in ((axes[0], "ttft_ms", "time to first token"), (axes[1], "itl_ms", "inter-token")):
        drawn = 0
        for label in config_order(analysis):
            values = np.sort(grouped.get((figure_name, label), nothing))
            # A gap of 0 ms (tokens the client read at once: a busy client reads several chunks in one go) counts
            # in the share, but has no place on a log axis: each curve starts at its share of such gaps.
            shares = np.arange(1, values.size + 1) / max(values.size, 1)
            positive = values > 0
            if positive.any():
                ax.step(values[positive], shares[positive], where="post", label=label,
                        color=colours.get(label))  # fmt: skip
                drawn += 1
        if not drawn:
            # Not an empty log axis with limits matplotlib made up: say why there is no curve.
            ax.text(0.5, 0.5, f"no {title} sample above 0 ms at this load", ha="center", va="center",
                    transform=ax.transAxes, fontsize=9, color="#666666")  # fmt: skip
            ax.set_xticks([])
            ax.set_xlabel(f"{title} (ms)", fontsize=10)
            ax.set_ylabel("share of samples at or below", fontsize=10)
            continue
        ax.set_xscale("log")
        # Numbers at 1, 2, 3, 5 and 7 of each decade when the latencies span about one (20 to 60 ms had no
        # decade tick in view, and so no number on its axis); fewer per decade the more decades they span, so
        # the numbers never run into each other (0.002 0.003 0.005 0.007 overlapped over four decades).
        low, high = ax.get_xlim()
        decades = math.log10(high / low) if low > 0 and high > low else 1.0
        subs = (1.0, 2.0, 3.0, 5.0, 7.0) if decades <= 1.5 else (1.0, 2.0, 5.0) if decades <= 2.5 else (1.0,)
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"{title} (ms, log scale)", fontsize=10)
        ax.set_ylabel("share of samples at or below", fontsize=10)
        ax.grid(True, alpha=0.3)
    if axes[1].get_legend_handles_labels()[0]:
        axes[1].legend(fontsize=7, loc="lower right")
    figure.suptitle(f"{analysis.experiment_name}: latency distributions at {load_label} (every request)", fontsize=12)
    return figure


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


def workload_figures(analysis: Analysis) -> Iterator[tuple[str, Figure, str]]:
    """(name, figure, caption) of the workload heatmap and of the latency CDFs of each load, each made when the
    caller asks for the next: the caller saves one before the next is drawn (25 loads' CDFs held at once, each
    with every request's samples, were most of the report's memory at thousands of points)."""
    heatmap = speedup_by_workload_heatmap(analysis)
    if heatmap is not None:
        yield (
            "speedup_by_workload",
            heatmap,
            "Speedup over the autoregressive baseline of each configuration on each workload, one panel per load.",
        )
    del heatmap
    windows = analysis.run.windows if analysis.run.windows is not None else analysis.frame
    by_load = samples_by_load(analysis.path, windows)
    if not by_load:
        return
    measured = _measured_ok(analysis)
    labels = measured.sort_values(["workload", "mode", "load"], kind="stable")["load_label"].drop_duplicates()
    order = {w: i for i, w in enumerate(workload_names(analysis))}
    loads = sorted(labels, key=lambda lbl: order.get(str(lbl).split(" ")[0], 0))
    for load_label in loads:
        parts = by_load.pop(str(load_label), None)
        if parts is None:
            continue
        grouped = {key: np.concatenate(values).astype(float, copy=False) for key, values in parts.items()}
        yield (
            f"latency_cdf-{_safe(str(load_label))}",
            _latency_cdfs(analysis, grouped, str(load_label)),
            f"TTFT and inter-token latency CDFs at {load_label}, from every request (requests/<point>.jsonl).",
        )
