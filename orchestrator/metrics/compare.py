"""Where several sources say the same thing, compute each and keep how far they disagree.

Sources for one window: the journal (``WindowMetrics``), Prometheus (``PromWindow``), per-response metadata
(``response_figures``: SGLang ``meta_info.spec_verify_ct``, llama.cpp ``timings.draft_n``), and the client
(its measured tokens/s as ``{"gen_throughput": ...}``). ``compare_sources`` lines them up per figure against
a reference (the first source, in the order given, that has the figure) and records each relative
difference, the largest, and whether it is within tolerance, as plain values the analysis can check.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["HasFigures", "compare_sources", "response_figures"]


@runtime_checkable
class HasFigures(Protocol):
    def figures(self) -> Mapping[str, float | None]: ...


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def compare_sources(sources: Mapping[str, HasFigures | Mapping[str, Any]], *, rel_tol: float = 0.05) -> dict[str, Any]:
    """Per figure: each source's value, relative differences to the reference, and agreement.

    Returns ``{"rel_tol": t, "figures": {figure: {"values": {source: v}, "reference": source,
    "rel_diff": {source: (v - ref) / |ref|}, "max_rel_diff": d, "agree": bool | None}},
    "disagreements": [figure, ...]}``. ``agree`` is None when fewer than two sources have the figure; a
    relative difference against a reference of 0 is None (and disagrees unless the value is 0 too).
    """
    table: dict[str, dict[str, float]] = {}
    for source, data in sources.items():
        figures = data.figures() if isinstance(data, HasFigures) else data
        for figure, raw in figures.items():
            value = _number(raw)
            if value is not None:
                table.setdefault(figure, {})[source] = value
    out: dict[str, Any] = {}
    disagreements: list[str] = []
    for figure, values in table.items():
        reference = next(iter(values))
        ref = values[reference]
        diffs: dict[str, float | None] = {}
        agree = True
        for source, value in values.items():
            if source == reference:
                continue
            if ref == 0:
                diffs[source] = 0.0 if value == 0 else None
                agree = agree and value == 0
            else:
                diffs[source] = (value - ref) / abs(ref)
                agree = agree and abs(value - ref) <= rel_tol * abs(ref)
        known = [abs(d) for d in diffs.values() if d is not None]
        entry = {
            "values": values,
            "reference": reference,
            "rel_diff": diffs,
            "max_rel_diff": max(known) if known else None,
            "agree": agree if diffs else None,
        }
        if diffs and not agree:
            disagreements.append(figure)
        out[figure] = entry
    return {"rel_tol": rel_tol, "figures": out, "disagreements": disagreements}


def _find(response: Mapping[str, Any], key: str) -> float | None:
    for where in (response, response.get("meta_info"), response.get("usage"), response.get("timings")):
        if isinstance(where, Mapping) and key in where:
            return _number(where[key])
    return None


def response_figures(responses: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Window figures from per-response metadata, as a source for ``compare_sources``.

    Each response may carry, at top level or under ``meta_info``/``usage``/``timings``: ``completion_tokens``
    and ``spec_verify_ct`` (SGLang: accept length = sum(completion tokens) / sum(verify steps), bonus
    included; the first token comes from prefill, so this slightly overstates short answers), and
    ``draft_n`` / ``draft_n_accepted`` (llama.cpp: acceptance rate = sum(accepted) / sum(drafted)).
    """
    completion = verify = drafted = accepted = 0.0
    counted = with_verify = with_drafts = 0
    for response in responses:
        counted += 1
        tokens, steps = _find(response, "completion_tokens"), _find(response, "spec_verify_ct")
        if tokens is not None and steps:
            completion += tokens
            verify += steps
            with_verify += 1
        n_draft, n_accepted = _find(response, "draft_n"), _find(response, "draft_n_accepted")
        if n_draft and n_accepted is not None:
            drafted += n_draft
            accepted += n_accepted
            with_drafts += 1
    return {
        "accept_len": completion / verify if verify > 0 else None,
        "acceptance_rate": accepted / drafted if drafted > 0 else None,
        "details": {
            "responses": counted,
            "responses_with_verify_ct": with_verify,
            "responses_with_drafts": with_drafts,
        },
    }
