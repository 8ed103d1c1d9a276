"""The points of the ``drafter_corpus`` check (orchestrator/analysis/checks.py): points whose drafter keeps a corpus
across requests and may already have known the point's prompts (orchestrator/sweep/corpus.py writes
``server.drafter_corpus`` per point).

A drafter that learns from every request (SGLang's NGRAM) drafts a repeated prompt from its own earlier answer, so
such a point measures what the server remembers, not the drafter, and a second run on the same server can differ
from the first: each such point is a warning that says why (not emptied before the point, or prompts repeated in
it). Points whose corpus was emptied first and whose prompts were each sent once say nothing.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["corpus_points"]

CLEAN = "server_drafter_corpus_clean"
NOTE = "server_drafter_corpus_note"
REASON = "server_drafter_corpus_keeps_corpus"


def corpus_points(ok: pd.DataFrame) -> list[tuple[dict[str, Any], str, list[str]]]:
    """(row, message, evidence) for each measured point whose drafter's corpus may have held its prompts' answers."""
    if CLEAN not in ok.columns:
        return []
    rows: list[dict[str, Any]] = ok[ok[CLEAN].eq(False)].to_dict("records")  # type: ignore[assignment]
    message = "the drafter's corpus may already have held this point's prompts: "
    return [(row, message + str(row.get(NOTE)), [str(row.get(REASON))]) for row in rows]
