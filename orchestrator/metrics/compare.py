"""Where several sources say the same thing, compute each and keep how far they disagree.

Sources for one window: the journal (``WindowMetrics``), Prometheus (``PromWindow``), per-response metadata
(``response_figures``: SGLang ``sglext.spec_tokens_details`` on chat/completions and ``meta_info`` on
``/generate``, vLLM ``metrics.speculative_decoding``, llama.cpp ``timings``), and the client
(its measured tokens/s as ``{"gen_throughput": ...}``). ``compare_sources`` lines them up per figure against
a reference (the first source, in the order given, that has the figure) and records each relative
difference, the largest, and whether it is within tolerance, as plain values the analysis can check.

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from orchestrator.load.spec import response_spec, summarize_spec

__all__ = ["HasFigures", "compare_sources", "response_figures"]


@runtime_checkable
class HasFigures(Protocol):
    def figures(self) -> Mapping[str, float | None]: ...


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _exactness(data: HasFigures | Mapping[str, Any]) -> Mapping[str, Any]:
    """A source's ``exactness`` (orchestrator/engines/integrity.py): an attribute of a window, a key of a
    mapping; empty for a source that says nothing of it."""
    found = getattr(data, "exactness", None) if isinstance(data, HasFigures) else data.get("exactness")
    return found if isinstance(found, Mapping) else {}


def _bounds(entry: Any) -> tuple[float, float] | None:
    bounds = entry.get("bounds") if isinstance(entry, Mapping) else None
    if isinstance(bounds, list | tuple) and len(bounds) == 2:
        low, high = _number(bounds[0]), _number(bounds[1])
        if low is not None and high is not None:
            return low, high
    return None


def compare_sources(sources: Mapping[str, HasFigures | Mapping[str, Any]], *, rel_tol: float = 0.05) -> dict[str, Any]:
    """Per figure: each source's value, relative differences to the reference, and agreement.

    Returns ``{"rel_tol": t, "figures": {figure: {"values": {source: v}, "reference": source,
    "rel_diff": {source: (v - ref) / |ref|}, "max_rel_diff": d, "agree": bool | None, "exactness":
    {source: kind}, "bounds": {source: [low, high]}}}, "disagreements": [figure, ...]}``. ``agree`` is None
    when fewer than two sources have the figure; a relative difference against a reference of 0 is None (and
    disagrees unless the value is 0 too).

    A source says how exact each of its figures is (``exactness``: exact, rounded, gauge, bounded). The
    reference is the first source whose figure is ``exact``, else the first that is not ``bounded`` or a
    ``gauge``, else the first: a bounded figure (an estimate within bounds) never stands for the others. A
    bounded figure agrees when the reference lies within its bounds (widened by ``rel_tol``), whatever its
    estimate; its relative difference is still reported.
    """
    table: dict[str, dict[str, float]] = {}
    kinds: dict[str, dict[str, str]] = {}
    spans: dict[str, dict[str, tuple[float, float]]] = {}
    for source, data in sources.items():
        figures = data.figures() if isinstance(data, HasFigures) else data
        exact = _exactness(data)
        for figure, raw in figures.items():
            value = _number(raw)
            if value is not None:
                table.setdefault(figure, {})[source] = value
                entry = exact.get(figure)
                kind = entry.get("kind") if isinstance(entry, Mapping) else None
                if isinstance(kind, str):
                    kinds.setdefault(figure, {})[source] = kind
                bounds = _bounds(entry)
                if kind == "bounded" and bounds is not None:
                    spans.setdefault(figure, {})[source] = bounds
    out: dict[str, Any] = {}
    disagreements: list[str] = []
    for figure, values in table.items():
        said = kinds.get(figure, {})
        reference = next(
            (s for s in values if said.get(s) == "exact"),
            next((s for s in values if said.get(s) not in ("bounded", "gauge")), next(iter(values))),
        )
        ref = values[reference]
        diffs: dict[str, float | None] = {}
        agree = True
        for source, value in values.items():
            if source == reference:
                continue
            span = spans.get(figure, {}).get(source)
            if ref == 0:
                diffs[source] = 0.0 if value == 0 else None
            else:
                diffs[source] = (value - ref) / abs(ref)
            if span is not None:
                slack = rel_tol * abs(ref)
                agree = agree and span[0] - slack <= ref <= span[1] + slack
            elif ref == 0:
                agree = agree and value == 0
            else:
                agree = agree and abs(value - ref) <= rel_tol * abs(ref)
        known = [abs(d) for d in diffs.values() if d is not None]
        entry = {
            "values": values,
            "reference": reference,
            "rel_diff": diffs,
            "max_rel_diff": max(known) if known else None,
            "agree": agree if diffs else None,
            "exactness": dict(said),
            "bounds": {s: list(b) for s, b in spans.get(figure, {}).items()},
        }
        if diffs and not agree:
            disagreements.append(figure)
        out[figure] = entry
    return {"rel_tol": rel_tol, "figures": out, "disagreements": disagreements}


def response_figures(responses: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Window figures from whole response bodies, as a source for ``compare_sources``.

    Each response is read where the engine that wrote it puts its speculative figures
    (:func:`orchestrator.load.spec.response_spec`): SGLang's ``sglext.spec_tokens_details`` with
    ``usage.completion_tokens`` (OpenAI chat/completions), SGLang's ``meta_info`` (``/generate``: a body
    without ``choices``, ``object`` or ``usage``; or ``choices[0].meta_info`` of a chat answer asked with
    ``return_meta_info``), vLLM's ``metrics.speculative_decoding``, llama.cpp's ``timings``. A top-level
    ``meta_info`` on an OpenAI-shaped body is ignored: no engine writes one. The figures and their
    definitions are those of :func:`orchestrator.load.spec.summarize_spec`: ``accept_len`` token-weighted,
    ``accept_len_request_weighted`` the mean over responses, ``accept_len_engine`` SGLang's own formula,
    ``acceptance_rate`` from accepted / proposed drafts (SGLang's: drafts committed, its own in
    ``details.acceptance_rate_engine``), ``per_position_acceptance`` from the responses' histograms
    of accepted drafts per step (its counts in ``details.accepted_per_position``); ``details`` counts the
    responses; ``exactness`` says each figure is exact (integer counts the engine wrote).
    """
    read = [response_spec(response) for response in responses]
    summary = summarize_spec((spec, tokens or 0) for spec, tokens in read)
    return {
        "accept_len": summary["accept_len"],
        "accept_len_request_weighted": summary["accept_len_request_weighted"],
        "accept_len_engine": summary["accept_len_engine"],
        "accept_len_engine_request_weighted": summary["accept_len_engine_request_weighted"],
        "acceptance_rate": summary["acceptance_rate"],
        "per_position_acceptance": summary["per_position_acceptance"],
        "details": {
            "responses": len(read),
            "responses_with_verify_steps": summary["responses_with_verify_steps"],
            "responses_with_drafts": summary["responses_with_drafts"],
            "verify_steps": summary["verify_steps"],
            "accepted_drafts": summary["accepted_drafts"],
            "proposed_drafts": summary["proposed_drafts"],
            # SGLang: its own rate (drafts past a request's end counted) beside the committed acceptance_rate
            "acceptance_rate_engine": summary.get("acceptance_rate_engine"),
            "drafts_past_end": summary.get("drafts_past_end"),
            "sources": summary["sources"],
            "accepted_per_position": summary["accepted_per_position"],
        },
        "definitions": summary["definitions"],
        "exactness": summary["exactness"],
    }
