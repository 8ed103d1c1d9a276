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


def test_the_notebook_shows_margins_as_percentages_and_cells_whole() -> None:
    """The notebook's tables showed a margin of 1.3% as ``0.01`` and cut findings and tie lists at 50 characters
    (issue 59, item 7); the rows it keeps are still the answer's figures."""
    import pandas as pd

    from orchestrator.report import notebook

    made = answer(RUN)
    loads = answerview.loads_view(made)
    shown = loads.frame()
    for row, (_, cells) in zip(loads.rows, shown.iterrows(), strict=True):
        if row["margin"] is not None:
            assert cells["margin"] == f"{row['margin']:+.1%}", cells["margin"]
            assert isinstance(row["margin"], float)  # the JSON keeps the fraction
    assert any(row["margin"] is not None for row in loads.rows)
    long = "a finding whose advice runs well past fifty characters, as findings do, to its end"
    table = pd.DataFrame({"what": [long]})
    assert long not in repr(table)  # pandas' own display cuts it at 50 characters
    shown = notebook.whole(table)
    assert long in repr(shown) and long in (shown._repr_html_() or ""), repr(shown)
    cells = json.loads((Path(__file__).parents[2] / "notebooks" / "sweep-results.ipynb").read_text())["cells"]
    sources = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    for made_whole in ("findings_by_check", "findings_table", "winners_table"):
        assert f"notebook.whole(tables.{made_whole}(" in sources, made_whole


def test_the_winners_table_leaves_out_a_ratio_no_winner_has() -> None:
    """``× linear`` was a column of NaN in a run without a linear baseline (issue 59, item 7)."""
    import dataclasses

    from orchestrator.report import tables

    made = answer(RUN)
    assert "× linear" in tables.winners_table(made).columns
    points = [
        dataclasses.replace(p, figures={k: v for k, v in p.figures.items() if k != "speedup_vs_linear"})
        for p in made.points
    ]
    assert "× linear" not in tables.winners_table(dataclasses.replace(made, points=points)).columns
