"""The notebook's views of the answer (orchestrator/report/answerview.py): a table a person reads, the same rows
as JSON, figures as the answer has them (none computed), on a run the simulator made (tests/data/runs)."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.analysis.answer import answer
from orchestrator.report import answerview

RUN = Path(__file__).resolve().parents[1] / "data" / "runs" / "sim-demo"


def test_the_views_carry_the_answer_and_show_it() -> None:
    made = answer(RUN)
    counts = answerview.counts_view(made)
    assert counts._repr_json_() == {"answer": "counts", "text": made.counts.text(), "rows": [made.counts.to_dict()]}
    assert repr(counts) == made.counts.text()

    loads = answerview.loads_view(made)
    assert [(r["load"], r["winner"], r["tied"], r["beats"]) for r in loads.rows] == [
        (lv.load_label, lv.winner, lv.tied, lv.beats) for lv in made.loads
    ]
    points = answerview.points_view(made)
    assert len(points.rows) == len(made.points)
    for row, point in zip(points.rows, made.points, strict=True):
        assert (row["label"], row["load"], row["status"]) == (point.label, point.load_label, point.status)
        assert row["output_tok_s"] == point.value("output_tok_s")
        assert row["accept_len"] == point.value("accept_len")
    json.dumps(points._repr_json_())  # what the notebook keeps is JSON as it is
    html = points._repr_html_()
    assert all(p.label in html for p in made.points)
    # A figure no point has (goodput: this run has no limits) is left out of the table, kept in the rows.
    assert "goodput" not in points.frame().columns and "goodput" in points.rows[0]
