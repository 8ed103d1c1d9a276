"""The ending's best table at 80 columns, on a run whose answer is known: two configurations that cannot be told
apart (the same throughput at every load) and two that both beat. The table names the tie and the beaten
ones, never drops either column at 80 columns, and leaves the "tied with" column out only when the answer has
no tie (the integration test of the first hour measures a real sweep, whose ties are the machine's to decide;
this one holds the rendering to a tie that is certain)."""

from __future__ import annotations

import itertools
from pathlib import Path

from rich.console import Console

from orchestrator.analysis.answer import answer
from orchestrator.cli.summary import best_table
from orchestrator.runs.store import RunStore
from tests.integration.test_first_hour_cli import _best_rows, _names
from tests.unit.synthetic_runs import append_point

LOADS = [1, 2]
REPEATS = 3  # an interval needs repeats; each repeat moves by a fixed +-1% (no randomness)
# Output tok/s per user at C=1; a configuration's throughput at C is C times it. "linear" and the tree tie.
CONFIGS = {
    "autoregressive": ("autoregressive", {}, 100.0),
    "linear": ("linear", {}, 200.0),
    "ddtree(budget=7, topk=1)": ("ddtree", {"budget": 7, "topk": 1}, 200.0),
    "slow": ("slow", {}, 50.0),
}


def _run(root: Path, *, tie: bool) -> Path:
    experiment = {
        "name": "best",
        "host": {"ssh": "root@gpu-box"},
        "service": {"kind": "systemd", "unit": "vllm.service", "exec_start": "serve {spec_args}"},
        "server": {"url": "http://gpu-box:8000"},
        "engine": "vllm",
        "variants": {
            "autoregressive": {"spec_args": ""},
            "linear": {"spec_args": "--linear"},
            "ddtree": {"spec_args": "--budget {budget} --topk {topk}", "matrix": {"budget": [7], "topk": [1]}},
            "slow": {"spec_args": "--slow"},
        },
        "baselines": ["autoregressive", "linear"],
        "load": {"concurrency": LOADS, "requests": 32, "repeats": REPEATS},
    }
    store = RunStore.create(root, "best", experiment, {"deployments": []})
    for index, (variant, params, per_user) in enumerate(CONFIGS.values()):
        if not tie and variant == "ddtree":
            per_user *= 0.8  # clearly behind the linear drafter: no tie anywhere
        for load, repeat in itertools.product(LOADS, range(1, REPEATS + 1)):
            tok_s = per_user * load * (1.0 + (repeat - 2) / 100)
            baseline = variant in ("autoregressive", "linear")
            append_point(
                store, "best", index=index, variant=variant, params=params, load=load, repeat=repeat,
                tok_s=tok_s, baseline=baseline, rel_se=0.01, requests=32,
            )  # fmt: skip
    store.set_state("done")
    store.release()
    return store.path


def _render(run: Path) -> tuple[str, object]:
    made = answer(run)
    console = Console(width=80, record=True, color_system=None, force_terminal=False)
    console.print(best_table(made, 80))
    return console.export_text(), made.analysis


def test_a_tie_is_named_in_its_own_column_and_the_beaten_in_theirs_at_80_columns(tmp_path: Path) -> None:
    text, analysis = _render(_run(tmp_path, tie=True))
    best = analysis.best  # type: ignore[attr-defined]
    assert all(best["tied"].map(len) == 1), best  # the answer itself: one tie at every load
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80, text
    assert "tied with" in text.splitlines()[1] + text.splitlines()[2], text  # the header, not only the caption
    assert "tied with: not told apart from the best" in text, text
    rows = _best_rows(text)
    assert len(rows) == len(LOADS), text
    for row, (_i, expected) in zip(rows, best.iterrows(), strict=True):
        assert {row["best"], *_names(row["tied with"])} == {"linear", "ddtree(budget=7, topk=1)"}, (row, text)
        assert _names(row["tied with"]) == list(expected["tied"]), (row, text)
        assert set(_names(row["over"])) == {"autoregressive", "slow"}, (row, text)


def test_without_a_tie_the_column_is_left_out_and_the_rest_still_read(tmp_path: Path) -> None:
    text, analysis = _render(_run(tmp_path, tie=False))
    best = analysis.best  # type: ignore[attr-defined]
    assert not any(best["tied"].map(len)), best
    assert "tied with" not in text, text
    for row in _best_rows(text):
        assert row["best"] == "linear", (row, text)
        assert set(_names(row["over"])) == {"autoregressive", "ddtree(budget=7, topk=1)", "slow"}, (row, text)
