"""The report at scale: with more configurations than the palette has colours, more front points than fit as
labels, or more heatmap cells than can carry a number each, a figure summarises and says so on itself, and
the report holds what the figure left out (issue 40, item 16; the times are in bench/RESULTS-scale.md)."""

from __future__ import annotations

import io
import itertools
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.text import Annotation

from orchestrator.analysis import analyse
from orchestrator.analysis.answer import answer as make_answer
from orchestrator.analysis.result import Analysis
from orchestrator.report import build_report, figures
from orchestrator.runs.store import RunStore
from tests.unit.synthetic_runs import append_point

LOADS = [1, 4]
REPEATS = 2
CONFIGS = 40  # tree configurations besides the AR baseline: more than MAX_COLOURED, a 40 x 4 grid of cells


def _run(root: Path, configs: int = CONFIGS) -> Path:
    """A finished run: AR and ``configs`` ddtree configurations (budget b, top-k 1 + b % 4) at two loads,
    two repeats each, every record with its figures' standard errors."""
    rng = random.Random(7)
    budgets = list(range(4, 4 + configs))
    experiment = {
        "name": "scale",
        "host": {"ssh": "root@gpu-box"},
        "service": {"kind": "systemd", "unit": "sglang.service", "exec_start": "serve {spec_args}"},
        "server": {"url": "http://gpu-box:30001"},
        "engine": "sglang",
        "variants": {
            "autoregressive": {"spec_args": ""},
            "ddtree": {"spec_args": "--budget {budget} --topk {topk}", "matrix": {"budget": budgets, "topk": [1]}},
        },
        "baselines": ["autoregressive"],
        "load": {"concurrency": LOADS, "requests": 64, "repeats": REPEATS},
    }
    store = RunStore.create(root, "scale", experiment, {"deployments": []})
    variants: list[tuple[str, dict[str, Any]]] = [("autoregressive", {})]
    variants += [("ddtree", {"budget": b, "topk": 1 + b % 4}) for b in budgets]
    for index, (variant, params) in enumerate(variants):
        for load in LOADS:
            for repeat in range(1, REPEATS + 1):
                # Distinct throughputs: configuration i is about (1 + i / 100) times AR, so the ranking is known.
                tok_s = 100.0 * load * (1.0 + index / 100) * rng.uniform(0.999, 1.001)
                server = {"engine": "sglang", "accept_len": 2.0 + index / 100} if params else None
                baseline = variant == "autoregressive"
                append_point(
                    store, "scale", index=index, variant=variant, params=params, load=load, repeat=repeat,
                    tok_s=tok_s, baseline=baseline, server=server,
                )  # fmt: skip
    store.set_state("done")
    store.release()
    return store.path


@pytest.fixture(scope="module")
def analysis(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    return analyse(_run(tmp_path_factory.mktemp("scale")))


def _title(figure: Figure) -> str:
    parts = [figure.get_suptitle()] + [ax.get_title() for ax in figure.axes]
    return "\n".join(p for p in parts if p)


def _fastest(count: int) -> set[str]:
    """The ``count`` tree configurations of highest throughput (the last ones: throughput grows with the index)."""
    return {f"ddtree(budget={b}, topk={1 + b % 4})" for b in range(4 + CONFIGS - count, 4 + CONFIGS)}


def test_the_throughput_figure_colours_the_fastest_configurations_and_greys_the_rest(analysis: Analysis) -> None:
    figure = figures.throughput_vs_load(analysis, mode="concurrency")
    assert figure is not None
    shown = figures.MAX_COLOURED
    assert f"colour: the {shown} of {CONFIGS} configurations with the highest output_tok_s" in _title(figure)
    assert f"the other {CONFIGS - shown} in grey" in _title(figure)
    left = figure.axes[0]
    coloured = {line.get_label() for line in left.get_lines()} - {"_nolegend_"}  # an error bar's caps: no label
    assert coloured == _fastest(shown) | {"autoregressive (baseline)"}
    grey = [c for c in left.collections if isinstance(c, LineCollection) and "other configurations" in c.get_label()]
    assert len(grey) == 1 and len(grey[0].get_segments()) == CONFIGS - shown  # every other one drawn, in grey
    colours = figures.config_colours(analysis)
    assert len({colours[label] for label in _fastest(shown)}) == shown  # no two coloured ones share a colour
    figure.savefig(io.BytesIO(), format="png")


def test_a_run_that_fits_the_palette_is_drawn_as_before(tmp_path: Path) -> None:
    small = analyse(_run(tmp_path, configs=5))
    figure = figures.throughput_vs_load(small, mode="concurrency")
    assert figure is not None and "colour: the" not in _title(figure)
    assert not [c for c in figure.axes[0].collections if "other configurations" in str(c.get_label())]
    assert len([line for line in figure.axes[0].get_lines() if line.get_label() != "_nolegend_"]) == 6
    assert figures.scale_note(small) is None


def test_the_latency_figure_shows_the_coloured_configurations_and_says_where_the_rest_are(analysis: Analysis) -> None:
    figure = figures.latency_percentiles(analysis)
    assert figure is not None
    names = {t.get_text() for t in figure.axes[0].get_yticklabels()}
    assert names == _fastest(figures.MAX_COLOURED) | {"autoregressive"}
    assert f"shown: the {figures.MAX_COLOURED} of {CONFIGS} configurations" in _title(figure)
    assert "every configuration's latency is in the report's tables" in _title(figure)


def test_a_heatmap_with_too_many_cells_prints_no_values_and_says_where_they_are(analysis: Analysis) -> None:
    figure = figures.accept_len_heatmap(analysis)
    assert figure is not None
    cells = [t for ax in figure.axes for t in ax.texts]
    assert cells == []  # 40 budgets x 4 top-k: 160 cells, more than MAX_CELL_TEXT
    assert f"over {figures.MAX_CELL_TEXT} cells a panel" in _title(figure)
    assert "the Accept length table has each" in _title(figure)
    speedup = figures.speedup_heatmaps(analysis, against="ar")
    assert speedup is not None and "the Speedup over AR table has each" in _title(speedup)
    ticks = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert 0 < len(ticks) <= 24 and ticks[0] == "4"  # every n-th budget named, not forty overlapping


def test_a_long_front_gets_some_labels_and_the_report_lists_every_point_of_it(tmp_path: Path) -> None:
    run = _run(tmp_path)
    analysis = analyse(run)
    ok = analysis.frame[analysis.frame["status"] == "ok"]
    analysis.pareto = ok.sort_values("per_user_tok_s").head(figures.MAX_FRONT_LABELS + 12)
    front = len(analysis.pareto)
    figure = figures.pareto_plot(analysis)
    assert figure is not None
    labels = [t for t in figure.axes[0].texts if isinstance(t, Annotation) and " @ C=" in t.get_text()]
    assert len(labels) == figures.MAX_FRONT_LABELS
    assert f"labelled: {figures.MAX_FRONT_LABELS} of the front's {front} points, evenly along it" in _title(figure)
    ordered = analysis.pareto.sort_values("per_user_tok_s")
    ends = {f"{r['label']} @ {r['load_label']}" for r in (ordered.iloc[0], ordered.iloc[-1])}
    assert ends <= {t.get_text() for t in labels}  # both ends of the front are labelled
    figure.savefig(io.BytesIO(), format="png")

    result = build_report(run, out_dir=tmp_path / "report", answer=make_answer(run, analysis=analysis))
    markdown = result.files["report.md"].read_text(encoding="utf-8")
    assert f"Points on the Pareto front ({front}; the figure labels {figures.MAX_FRONT_LABELS}" in markdown
    table = markdown.split("Points on the Pareto front", 1)[1].split("\n\n", 2)[1]
    for row in ordered.itertuples():
        assert f"| {row.label} | {row.load_label} |" in table
    assert "Figures at this run's scale: colour: the 18 of 40 configurations" in markdown


def test_front_labelled_spreads_the_labels_along_the_front() -> None:
    assert figures.front_labelled(5) == [0, 1, 2, 3, 4]
    chosen = figures.front_labelled(300)
    assert len(chosen) == figures.MAX_FRONT_LABELS and chosen[0] == 0 and chosen[-1] == 299
    gaps = {b - a for a, b in itertools.pairwise(chosen)}
    assert max(gaps) - min(gaps) <= 1


def test_the_latency_figure_draws_at_most_its_loads_evenly_and_says_where_the_rest_are(tmp_path: Path) -> None:
    """25 loads were a latency figure 76 inches wide (issue 49): it draws MAX_LATENCY_LOADS of them, the lowest,
    the highest and evenly between, and its title says so; with fewer loads it draws every one."""
    loads = list(range(1, 26))
    store = RunStore.create(tmp_path, "loads", {"name": "loads"}, {"deployments": []})
    for index, (variant, params) in enumerate([("autoregressive", {}), ("ddtree", {"budget": 8, "topk": 2})]):
        for load in loads:
            append_point(
                store, "loads", index=index, variant=variant, params=params, load=load, repeat=1,
                tok_s=100.0 * load * (1 + index), baseline=not params,
                server={"engine": "sglang", "accept_len": 2.5} if params else None,
            )  # fmt: skip
    store.set_state("done")
    store.release()
    many = analyse(store.path)
    figure = figures.latency_percentiles(many)
    assert figure is not None
    titles = [ax.get_title() for ax in figure.axes if ax.get_title()]
    shown = [int(t.split("=")[-1]) for t in titles]
    assert len(shown) == figures.MAX_LATENCY_LOADS and shown[0] == 1 and shown[-1] == 25
    steps = {b - a for a, b in itertools.pairwise(shown)}
    assert steps <= {2, 3}  # evenly: 24 steps of load over 11 gaps
    assert f"shown: {figures.MAX_LATENCY_LOADS} of 25 loads, evenly from" in _title(figure)
    few = figures.spread_rows(pd.DataFrame({"load": [1, 2, 4]}), figures.MAX_LATENCY_LOADS)
    assert list(few["load"]) == [1, 2, 4]
