"""The run's answer (``orchestrator/analysis/answer.py``) as the notebook shows it: its counts, every point
with its figures and intervals, and every load's winner, ties and margin.

Each view is a table a person reads (HTML in Jupyter, text elsewhere, rounded as the notebook's other tables)
and carries the rows it shows as JSON (``application/json`` in the saved notebook, at full precision), so
what an executed notebook said can be held against the other outputs figure by figure. A view only lays out
the answer's figures; it computes none.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.analysis.answer import Answer

__all__ = ["AnswerView", "counts_view", "loads_view", "points_view"]

#: The figures of a point the view shows, each with its interval.
POINT_FIGURES = ("output_tok_s", "accept_len", "per_user_tok_s", "ttft_ms_p50", "goodput", "tokens_per_joule")


class AnswerView:
    """Rows of the answer: shown as a table, kept as JSON (module docstring)."""

    def __init__(self, kind: str, rows: list[dict[str, Any]], text: str = "") -> None:
        self.kind = kind
        self.rows = rows
        self.text = text

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        shown = [{k: _cell(k, v) for k, v in row.items()} for row in self.rows]
        # A column no row has a value in (goodput in a run without its limits) is left out of the table.
        return pd.DataFrame(shown).dropna(axis="columns", how="all")

    def __repr__(self) -> str:
        return self.text or self.frame().to_string(index=False, na_rep="-", float_format=lambda v: f"{v:,.2f}")

    def _repr_html_(self) -> str:
        if self.text:
            return f"<p>{html.escape(self.text)}</p>"
        return str(self.frame().to_html(index=False, na_rep="-", float_format=lambda v: f"{v:,.2f}"))

    def _repr_json_(self) -> dict[str, Any]:
        return {"answer": self.kind, "text": self.text, "rows": self.rows}


#: Columns whose figure is a fraction, shown as a percentage (a margin of 0.0131 read ``0.01`` at two decimals).
PERCENT_COLUMNS = frozenset({"margin", "margin_lo", "margin_hi"})


def _cell(column: str, value: Any) -> Any:
    """A row's value as the table shows it (the rows keep it as the answer has it)."""
    if isinstance(value, list):
        return ", ".join(value)
    if column in PERCENT_COLUMNS and isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return f"{value:+.1%}"
    return value


def counts_view(answer: Answer) -> AnswerView:
    """``18 points ok, 1 degraded (of 19 planned)``, and the counts by status."""
    return AnswerView("counts", [answer.counts.to_dict()], answer.counts.text())


def points_view(answer: Answer) -> AnswerView:
    """One row per point: its status, windows, requests lost and why, and each figure with its interval."""
    rows = []
    for p in answer.points:
        row: dict[str, Any] = {
            "host": p.host,
            "workload": p.workload,
            "label": p.label,
            "load": p.load_label,
            "status": p.status,
            "windows": p.windows,
            "requests": p.requests,
            "lost": p.lost_requests,
        }
        for name in POINT_FIGURES:
            figure = p.figures.get(name)
            row[name] = None if figure is None else figure.value
            row[f"{name}_lo"] = None if figure is None else figure.lo
            row[f"{name}_hi"] = None if figure is None else figure.hi
        accept = p.figures.get("accept_len")
        row["accept_len_source"] = None if accept is None else accept.source
        row["why"] = p.why
        rows.append(row)
    return AnswerView("points", rows)


def loads_view(answer: Answer) -> AnswerView:
    """One row per load: the winner with its figure and interval, those tied with it, those it beats, the
    runner-up and the margin with its interval."""
    rows = [
        {
            "host": lv.host,
            "workload": lv.workload,
            "load": lv.load_label,
            "winner": lv.winner,
            lv.metric: lv.value,
            "lo": lv.lo,
            "hi": lv.hi,
            "tied": lv.tied,
            "beats": lv.beats,
            "runner_up": lv.runner_up,
            "margin": lv.margin,
            "margin_lo": lv.margin_lo,
            "margin_hi": lv.margin_hi,
            "decided": lv.decided,
        }
        for lv in answer.loads
    ]
    return AnswerView("loads", rows)
