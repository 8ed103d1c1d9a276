"""Every output renders the Answer it is given, never a count or a figure of its own (issue 51).

The answer of a real run is taken and planted with counts, failure kinds, finding counts, figures, intervals and
winners that a recount of the run's records or a read of its frame would never give (99 points planned, 7 ok,
5 degraded, 3 failed; every point's throughput 1,234.5 with its interval; the slowest configuration the winner).
Each output is then rendered from that answer: the sweep's ending (points and best tables), its exit code and
error line, ``sweep --json``, report.md (and checks.json), the notebook's count view and ``ls`` (from the
``answer.json`` the ending keeps). An output that counted or computed on its own would show the run's own
numbers, and fail here.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from orchestrator.analysis.answer import ANSWER_FILE, Answer, Counts, Figure, answer, findings_text
from orchestrator.cli.commands import ls as ls_command
from orchestrator.cli.commands.sweep import EXIT_POINTS_FAILED, EXIT_STOPPED, _json_summary, outcome
from orchestrator.cli.summary import OneLine, summary_renderables
from orchestrator.report import tables
from orchestrator.report.answerview import counts_view
from orchestrator.report.build import _checks_json, report_blocks
from orchestrator.report.render import to_markdown
from orchestrator.runs.store import RunStore
from tests.unit.synthetic_runs import append_point

LOADS = [1, 2]
REPEATS = 3
CONFIGS = [
    ("autoregressive", {}, 100.0),
    ("linear", {}, 200.0),
    ("ddtree", {"budget": 7, "topk": 1}, 160.0),
    ("slow", {}, 50.0),
]
PLANTED_COUNTS = Counts(planned=99, ok=7, degraded=5, failed=3, skipped=2)
PLANTED_FINDINGS = {"error": 11, "warning": 12, "info": 13}
#: Every point's throughput, and its interval: 1,234.5 ± 34.5 (2.8% of it).
TOK_S = Figure(value=1234.5, lo=1200.0, hi=1269.0, se=17.6, source="client", exactness="exact")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    experiment = {
        "name": "planted",
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
    store = RunStore.create(tmp_path_factory.mktemp("planted"), "planted", experiment, {"deployments": []})
    for index, (variant, params, per_user) in enumerate(CONFIGS):
        for load, repeat in itertools.product(LOADS, range(1, REPEATS + 1)):
            append_point(
                store, "planted", index=index, variant=variant, params=params, load=load, repeat=repeat,
                tok_s=per_user * load * (1.0 + (repeat - 2) / 100), baseline=variant in ("autoregressive", "linear"),
                rel_se=0.01, requests=32,
            )  # fmt: skip
    store.set_state("done")
    store.release()
    return store.path


def _planted(run: Path) -> Answer:
    """The run's answer with counts, figures and winners no recount of the run could give."""
    made = answer(run)
    assert made.counts.failed == 0 and made.counts.planned != 99  # the run's own: nothing failed
    points = [dataclasses.replace(p, figures={**p.figures, "output_tok_s": TOK_S}) for p in made.points]
    loads = [
        dataclasses.replace(
            lv,
            winner="slow",
            value=4321.0,
            lo=4300.0,
            hi=4342.0,
            runner_up="linear",
            margin=0.5,
            margin_lo=0.25,
            margin_hi=0.75,
            decided=True,
            tied=[],
            beats=["autoregressive"],
        )
        for lv in made.loads
    ]
    assert loads and all(lv.winner != "slow" for lv in made.loads)  # the run's own winner is never the slowest
    return dataclasses.replace(
        made,
        points=points,
        loads=loads,
        counts=PLANTED_COUNTS,
        failure_kinds={"planted_kind": 3},
        findings_by_severity=dict(PLANTED_FINDINGS),
    )


def _ending(made: Answer, width: int = 250) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, force_terminal=False)
    for part in summary_renderables(made.path, width, answer=made):
        console.print(part, soft_wrap=isinstance(part, OneLine))
    out = console.file
    assert isinstance(out, io.StringIO)
    return out.getvalue()


def test_the_ending_shows_the_answers_counts_figures_intervals_and_winners(run: Path) -> None:
    made = _planted(run)
    text = _ending(made)
    assert "7 points ok, 5 degraded, 3 failed, 2 skipped" in text, text
    assert "findings: 11 errors, 12 warnings, 13 notes" in text, text
    rows = [line for line in text.splitlines() if "1,234.5" in line]
    assert len(rows) == len(made.points), text  # every point's throughput is the answer's
    assert all("2.8%" in row for row in rows), rows  # its ± is the answer's interval, relative to it
    best = [line for line in text.splitlines() if "4,321.0" in line]
    assert len(best) == len(made.loads), text
    for line in best:
        assert "slow" in line and "+50.0%" in line and "+25.0%…+75.0%" in line, line


def test_the_exit_code_and_its_line_are_the_answers(run: Path) -> None:
    made = _planted(run)
    # The sweep's own tally says nothing failed: the answer's counts are the ones said.
    done = SimpleNamespace(state="done", points={"planned": 8, "ok": 8, "failed": 0}, records=[], run_dir=run)
    code, line = outcome(done, answer=made)
    assert code == EXIT_POINTS_FAILED
    assert line is not None and line.startswith(
        "3 of 99 point(s) failed (planted_kind x3); 5 of 99 point(s) degraded (too many requests lost; not ranked)"
    ), line
    assert outcome(done, allow_failures=True, answer=made) == (0, None)
    stopped = SimpleNamespace(**{**vars(done), "state": "stopped", "stop_reason": "a baseline cannot start"})
    code, line = outcome(stopped, answer=made)
    assert code == EXIT_STOPPED and line is not None
    assert "3 point(s) failed, 84 of 99 not measured" in line, line  # 99 - 7 ok - 5 degraded - 3 failed
    # And the other way: the sweep's tally says points failed, the answer says none did.
    settled = dataclasses.replace(made, counts=Counts(planned=8, ok=8), failure_kinds={})
    failing = SimpleNamespace(**{**vars(done), "points": {"planned": 8, "ok": 6, "failed": 2}})
    assert outcome(failing, answer=settled) == (0, None)


def test_sweep_json_counts_are_the_answers(run: Path) -> None:
    made = _planted(run)
    result = SimpleNamespace(run_dir=run, state="done", records=[], points={"planned": 8}, stop_reason=None, failed=0)
    summary = _json_summary(result, None, made)
    assert (summary["points"], summary["failed"], summary["degraded"]) == (17, 3, 5)
    assert summary["answer"]["counts"] == PLANTED_COUNTS.to_dict()
    assert summary["answer"]["failure_kinds"] == {"planted_kind": 3}


def test_the_report_shows_the_answers_counts_figures_intervals_and_winners(run: Path) -> None:
    made = _planted(run)
    markdown = to_markdown(report_blocks(made, {}, run))
    assert "7 points ok, 5 degraded, 3 failed, 2 skipped; 99 points planned." in markdown
    assert "11 errors, 12 warnings, 13 notes" in markdown
    for lv in made.loads:
        assert f"{lv.load_label}: slow is fastest at 4321.0 ± 21.0 tok/s" in markdown, markdown
    assert "| C=1 | slow | 4,321.0 | 4,300.0 … 4,342.0 |" in markdown, markdown  # the winners table
    intervals = tables.interval_table(made, "output_tok_s")
    assert set(intervals.to_numpy().ravel()) == {"1,234.5 ± 34.5"}
    assert set(tables.throughput_table(made).to_numpy().ravel()) == {1234.5}
    assert "1,234.5 ± 34.5" in markdown
    assert _checks_json(made)["counts"] == PLANTED_FINDINGS
    # The Pareto front's table: the answer's points on it, with the answer's figures.
    front = tables.pareto_table(dataclasses.replace(made, pareto=[p.key for p in made.points[:3]]))
    assert sorted(zip(front["configuration"], front["load"], strict=True)) == sorted(
        (p.label, p.load_label) for p in made.points[:3]
    )
    assert set(front["tok/s"]) == {1234.5}
    overview = tables.run_overview(made)
    assert overview.loc["points", "value"] == "7 ok, 5 degraded, 3 failed, 2 skipped (99 planned per host)"


def test_the_notebooks_counts_are_the_answers(run: Path) -> None:
    view = counts_view(_planted(run))
    assert view.rows == [PLANTED_COUNTS.to_dict()]
    assert view.text == "7 points ok, 5 degraded, 3 failed, 2 skipped (of 99 planned)"


def test_ls_shows_the_counts_answer_json_keeps(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``ls`` reads the counts of the ``answer.json`` the ending keeps; it never counts the records itself."""
    answer(run, save=True)
    path = run / ANSWER_FILE
    kept: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert list(kept)[:3] == ["schema", "made_from", "counts"]  # the head ls reads
    kept["counts"] = PLANTED_COUNTS.to_dict()
    path.write_text(json.dumps(kept, indent=1) + "\n", encoding="utf-8")
    try:
        shown = ls_command.run_summary(run)
        assert {k: shown[k] for k in ("planned", "ok", "degraded", "failed")} == {
            "planned": 99,
            "ok": 7,
            "degraded": 5,
            "failed": 3,
        }
        assert shown["counts_error"] is None
    finally:
        path.unlink()
    shown = ls_command.run_summary(run)  # without it: the answer's own counts (analysis/quickcounts.py)
    assert {k: shown[k] for k in ("planned", "ok", "degraded", "failed")} == {
        k: v for k, v in answer(run).counts.to_dict().items() if k != "skipped"
    }


def test_ls_of_a_run_whose_answer_cannot_be_made_shows_no_counts(
    run: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No answer, no counts: ``-`` and the reason, never the records' statuses counted another way."""
    from orchestrator.analysis import answer as answer_module
    from orchestrator.analysis import quickcounts
    from orchestrator.errors import StoreError

    def refused(*_args: object, **_kwargs: object) -> Answer:
        raise StoreError("planted: the answer cannot be made")

    monkeypatch.setattr(quickcounts, "quick_counts", lambda _run: None)
    monkeypatch.setattr(answer_module, "answer", refused)
    shown = ls_command.run_summary(run)
    assert (shown["ok"], shown["degraded"], shown["failed"]) == (None, None, None)
    assert shown["counts_error"] == "no answer: planted: the answer cannot be made"
    assert ls_command._count(shown["ok"]) == "-"


@pytest.mark.parametrize(
    ("counts", "said"),
    [
        pytest.param({"error": 2, "warning": 1, "info": 0}, "2 errors, 1 warning, 0 notes", id="one-warning"),
        pytest.param({"error": 1, "warning": 0, "info": 1}, "1 error, 0 warnings, 1 note", id="one-each"),
        pytest.param({}, "0 errors, 0 warnings, 0 notes", id="none"),
    ],
)
def test_finding_counts_are_said_in_the_singular_when_there_is_one(counts: dict[str, int], said: str) -> None:
    """``findings: 2 errors, 1 warnings`` was the ending's (issue 59, item 7); every output says it alike."""
    assert findings_text(counts) == said


def test_the_ending_and_the_report_say_one_warning_in_the_singular(run: Path) -> None:
    made = dataclasses.replace(_planted(run), findings_by_severity={"error": 2, "warning": 1, "info": 1})
    assert "findings: 2 errors, 1 warning, 1 note (report.md" in _ending(made)
    assert "2 errors, 1 warning, 1 note (" in to_markdown(report_blocks(made, {}, run))


def test_report_md_has_one_output_throughput_table_and_one_of_time_to_first_token(run: Path) -> None:
    """report.md showed every point's throughput twice, with its interval and then bare (issue 59, item 7):
    a figure with its interval is one table."""
    made = _planted(run)
    # Every figure of the three with an interval has one (the accept length too: its plain table stays).
    accept = Figure(value=2.5, lo=2.4, hi=2.6, se=0.05, source="client", exactness="exact")
    made = dataclasses.replace(made, points=[dataclasses.replace(p, figures={**p.figures, "accept_len": accept})
                                             for p in made.points])  # fmt: skip
    markdown = to_markdown(report_blocks(made, {}, run))
    captions = [line for line in markdown.splitlines() if line.startswith("_") and line.endswith("_")]
    throughput = [c for c in captions if c.startswith("_Output throughput")]
    assert len(throughput) == 1 and "± half its 95% interval" in throughput[0], captions
    assert len([c for c in captions if c.startswith("_Time to first token, p50")]) <= 1, captions
    for kept in ("_Speedup over AR", "_Accept length (tokens per verify step", "_Inter-token latency, p50"):
        assert any(c.startswith(kept) for c in captions), (kept, captions)  # the tables without an interval stay


def test_the_margins_legend_is_said_only_under_a_table_that_shows_the_margin(run: Path) -> None:
    """``margin: best / runner-up - 1`` was printed under a best table narrow enough to leave its margin column
    out (issue 59, item 6): each legend is said only for a column the table keeps."""
    from orchestrator.cli.summary import best_table

    made = _planted(run)
    said: dict[bool, int] = {}
    for width in range(160, 19, -4):
        console = Console(width=width, file=io.StringIO(), color_system=None, force_terminal=False)
        console.print(best_table(made, width))
        text = " ".join(console.file.getvalue().split())  # type: ignore[attr-defined]
        dropped = re.search(r"left out at this width: [^(]*\bmargin\b", text) is not None
        assert ("margin: best / runner-up - 1" in text) is not dropped, (width, text)
        said[dropped] = width
    assert set(said) == {True, False}, said  # both cases were met
