"""The report's section on ``load.decide``: per load, decided or the budget ran out, as the answer has it
(``Answer.decisions``, ``orchestrator/analysis/deciding.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.analysis.deciding import decision_text, read_decide_log
from orchestrator.report.render import Block, Heading, Items, Paragraph

if TYPE_CHECKING:
    from orchestrator.analysis.answer import Answer

__all__ = ["decide_blocks"]


def decide_blocks(made: Answer) -> list[Block]:
    """The budget, then one line per load: decided (after how many extra rounds), or the budget ran out first."""
    if not made.decisions:
        return []
    log = read_decide_log(made.path) or {}
    items: list[tuple[str, str, list[str]]] = [
        ("" if d["status"] == "decided" else "warning", decision_text(d), []) for d in made.decisions
    ]
    return [
        Heading("Deciding each load"),
        Paragraph(
            f"load.decide ({log.get('budget') or 'budget unknown'}): after the planned points, each load whose winner "
            "was not told apart from the runner-up got rounds of the configurations still in contention there.",
            "muted",
        ),
        Items(items),
    ]
