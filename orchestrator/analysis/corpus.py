"""The ``drafter_corpus`` check: points whose drafter keeps a corpus across requests and may already have known
the point's prompts (orchestrator/sweep/corpus.py writes ``server.drafter_corpus`` per point).

A drafter that learns from every request (SGLang's NGRAM) drafts a repeated prompt from its own earlier answer, so
such a point measures what the server remembers, not the drafter, and a second run on the same server can differ
from the first: each such point is a warning that says why (not emptied before the point, or prompts repeated in
it). Points whose corpus was emptied first and whose prompts were each sent once say nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.analysis.checks import CheckContext, Finding

__all__ = ["drafter_corpus"]

CLEAN = "server_drafter_corpus_clean"
NOTE = "server_drafter_corpus_note"
REASON = "server_drafter_corpus_keeps_corpus"


def drafter_corpus(ctx: CheckContext) -> list[Finding]:
    """A warning per measured point whose drafter's corpus may have held its prompts' answers."""
    from orchestrator.analysis.checks import _finding, _rows

    ok = ctx.ok
    if CLEAN not in ok.columns:
        return []
    out: list[Finding] = []
    for row in _rows(ok[ok[CLEAN].eq(False)]):
        message = f"the drafter's corpus may already have held this point's prompts: {row.get(NOTE)}"
        out.append(_finding("drafter_corpus", row, "warning", message, [str(row.get(REASON))]))
    return out
