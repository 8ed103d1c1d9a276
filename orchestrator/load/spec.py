"""Per-response speculative-decoding figures over a window: one response body read, many summarized.

What each engine writes into its responses, and where, is the engine's (``orchestrator/engines/<name>/
responses.py``: the source names, their definitions with the engine files, the readers), reached through the
registry (:func:`orchestrator.engines.responses.response_readers`); the shared type is
:class:`~orchestrator.engines.responses.SpecFigures`. One response carries at most one source (the engine
decides which; the load client only asks for what the engine offers, see
:func:`orchestrator.load.settings.engine_request_extras`). :func:`response_spec` reads a whole body,
:func:`summarize_spec` combines the responses of a window.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from orchestrator.engines.integrity import exactness
from orchestrator.engines.responses import (
    ACCEPTED_KEY,
    DRAFTED_KEY,
    SpecFigures,
    _int,
    body_readers,
    response_source,
)

__all__ = ["response_spec", "summarize_spec"]

_WEIGHTING = {
    "accept_len": "token-weighted over the responses: sum of committed tokens / sum of verify steps",
    "accept_len_request_weighted": (
        "the mean over the engine's requests (each response, or each choice of a response with n > 1) of each "
        "one's accept_len"
    ),
    "accept_len_engine": "token-weighted: sum of completion tokens / sum of verify steps",
    "accept_len_engine_request_weighted": (
        "the mean over the engine's requests (each response, or each choice) of each one's accept_len_engine"
    ),
    "acceptance_rate": "sum of accepted drafts / sum of proposed drafts over the responses",
    "per_position_acceptance": (
        "entry i = sum over the responses of the verify steps that accepted at least i + 1 drafts / sum of their "
        "verify steps, from each response's histogram of accepted drafts per step (None unless every response "
        "with verify steps has one that adds up to its steps and accepted drafts)"
    ),
    "tokens_per_pass": "sum over the responses",
    "choices": "a response with several choices: each choice's own figures pooled",
}

#: How exact each figure of the responses is (orchestrator/engines/integrity.py ``exactness``).
_EXACT_NOTES = {
    "accept_len": "integer counts each response carries (completion tokens, verify steps), summed",
    "accept_len_request_weighted": "the mean of ratios of integer counts, one per engine request",
    "accept_len_engine": "integer counts each response carries (completion tokens, verify steps), summed",
    "accept_len_engine_request_weighted": "the mean of ratios of integer counts, one per engine request",
    "acceptance_rate": "integer counts each response carries (accepted and proposed drafts), summed",
    "per_position_acceptance": "integer histograms of accepted drafts per verify step, summed",
    "tokens_per_pass": "integer counts each response carries (completion tokens, accepted drafts), summed",
}

_COMMITTED_NOTE = (
    "integer counts each response carries (completion tokens, verify steps, proposed drafts), summed: drafts "
    "committed per draft proposed; the engine's own rate (accepted drafts, past a request's end too) is "
    "acceptance_rate_engine"
)


def response_spec(response: Mapping[str, Any]) -> tuple[SpecFigures | None, int | None]:
    """The speculative figures and the completion-token count of one whole response body (or the final
    chunks of a stream merged into one mapping), read where the engine that wrote it puts them: the count
    from ``usage``, else from the first engine reader that has one; the figures from the first that has
    them (:func:`orchestrator.engines.responses.body_readers`, in order)."""
    spec: SpecFigures | None = None
    tokens: int | None = None
    usage = response.get("usage")
    if isinstance(usage, dict):
        tokens = _int(usage.get("completion_tokens"))
    for read in body_readers():
        found, count = read(response)
        if spec is None:
            spec = found
        if tokens is None:
            tokens = count
        if spec is not None and tokens is not None:
            break
    return spec, tokens


class _Ratio:
    __slots__ = ("denominator", "numerator", "ratios")

    def __init__(self) -> None:
        self.numerator = 0
        self.denominator = 0
        self.ratios: list[float] = []

    def add(self, terms: tuple[int, int] | None) -> None:
        if terms is not None:
            self.numerator += terms[0]
            self.denominator += terms[1]
            self.ratios.append(terms[0] / terms[1])

    def pooled(self) -> float | None:
        return self.numerator / self.denominator if self.denominator else None

    def mean(self) -> float | None:
        return sum(self.ratios) / len(self.ratios) if self.ratios else None


def _request_terms(spec: SpecFigures, tokens: int, *, engine: bool) -> list[tuple[int, int]]:
    """The terms of each engine request behind one response: the response's own, or each choice's (n > 1)."""
    whole = spec.engine_accept_terms(tokens) if engine else spec.accept_terms(tokens)
    if whole is None:
        return []
    if not spec.choices:
        return [whole]
    terms = [c.engine_accept_terms(0) if engine else c.accept_terms(0) for c in spec.choices if c.verify_steps]
    return [t for t in terms if t is not None]


def _consistent_histogram(spec: SpecFigures) -> tuple[int, ...] | None:
    """The response's histogram of accepted drafts per step when it adds up to its verify steps and accepted
    drafts (as vLLM's RequestSpecDecodeMetrics.to_dict derives both from it), else None."""
    histogram = spec.accepted_histogram
    if histogram is None or spec.verify_steps is None or sum(histogram) != spec.verify_steps:
        return None
    if spec.accepted_drafts is not None and sum(j * h for j, h in enumerate(histogram)) != spec.accepted_drafts:
        return None
    return histogram


def summarize_spec(responses: Iterable[tuple[SpecFigures | None, int]]) -> dict[str, Any]:
    """Window figures over (figures, completion tokens) per response; None where no response had the figure.

    Names as in docs/engines.md. ``accept_len`` is token-weighted (the sum of every response's committed
    tokens over the sum of its verify steps: the weighting of a window of the engine's counters);
    ``accept_len_request_weighted`` is the plain mean of each engine request's own accept length (a response,
    or each choice of a response with several), which weights a short answer as much as a long one.
    ``accept_len_engine`` (and its request-weighted mean) is SGLang's own formula, completion tokens / verify
    steps, the prefill token counted. Responses with no verify step are left out of all four.
    ``acceptance_rate`` is summed accepted drafts over summed proposed drafts. ``per_position_acceptance``
    (entry i: steps that accepted at least i + 1 drafts / steps) comes from the responses' histograms of
    accepted drafts per step (vLLM ``acceptance_histogram``, SGLang ``spec_correct_drafts_histogram``).
    ``definitions`` says, for each figure, what it is and which engine file defines it; ``exactness`` how
    exact it is (every one of them: integer counts the engine wrote, summed).
    """
    accept = _Ratio()
    engine = _Ratio()
    accepted = proposed = 0
    pass_tokens = pass_accepted = 0
    with_spec = with_drafts = with_passes = with_steps = with_choices = 0
    positions: list[int] = []
    position_steps = 0
    histograms_whole = True
    sources: Counter[str] = Counter()
    for spec, tokens in responses:
        if spec is None:
            continue
        with_spec += 1
        sources[spec.source] += 1
        if spec.choices:
            with_choices += 1
        requests = _request_terms(spec, tokens, engine=False)
        if requests:
            with_steps += 1
            for terms in requests:
                accept.add(terms)
            histogram = _consistent_histogram(spec)
            if histogram is None:
                histograms_whole = False
            else:
                position_steps += sum(histogram)
                if len(positions) < len(histogram) - 1:
                    positions.extend([0] * (len(histogram) - 1 - len(positions)))
                at_least = 0
                for j in range(len(histogram) - 1, 0, -1):  # steps that accepted at least j drafts
                    at_least += histogram[j]
                    positions[j - 1] += at_least
        for terms in _request_terms(spec, tokens, engine=True):
            engine.add(terms)
        if spec.proposed_drafts is not None and spec.accepted_drafts is not None:
            accepted += spec.accepted_drafts
            proposed += spec.proposed_drafts
            with_drafts += 1
        source = response_source(spec.source)
        if source is not None and source.tokens_per_pass:
            pass_tokens += tokens
            pass_accepted += spec.accepted_drafts or 0
            with_passes += 1
    per_position = [count / position_steps for count in positions] if histograms_whole and position_steps > 0 else None
    # A source whose accepted drafts count drafts past a request's end (SGLang): the committed rate from the
    # tokens the verify steps committed, the engine's own beside it (ResponseSource.drafts_past_end).
    past_end_sources = [response_source(name) for name in sources]
    committed_rate: float | None = None
    past_end: int | None = None
    if (
        proposed
        and accept.ratios
        and with_drafts == with_steps
        and past_end_sources
        and all(source is not None and source.drafts_past_end for source in past_end_sources)
    ):
        committed = accept.numerator - accept.denominator
        if 0 <= committed <= accepted:
            committed_rate, past_end = committed / proposed, accepted - committed
    figures: dict[str, Any] = {
        "accept_len": accept.pooled(),
        "accept_len_request_weighted": accept.mean(),
        "accept_len_engine": engine.pooled(),
        "accept_len_engine_request_weighted": engine.mean(),
        "acceptance_rate": committed_rate if committed_rate is not None else accepted / proposed if proposed else None,
        "per_position_acceptance": per_position,
        "tokens_per_pass": (
            pass_tokens / (pass_tokens - pass_accepted) if with_passes and pass_tokens > pass_accepted else None
        ),
    }
    return {
        "accept_len": figures["accept_len"],
        "accept_len_request_weighted": figures["accept_len_request_weighted"],
        "accept_len_engine": figures["accept_len_engine"],
        "accept_len_engine_request_weighted": figures["accept_len_engine_request_weighted"],
        "verify_steps": accept.denominator if accept.ratios else None,
        "accepted_drafts": accepted if with_drafts else None,
        "proposed_drafts": proposed if with_drafts else None,
        # The same sums under llama.cpp's names, which the analysis frame's columns use (engines/responses.py).
        DRAFTED_KEY: proposed if with_drafts else None,
        ACCEPTED_KEY: accepted if with_drafts else None,
        "acceptance_rate": figures["acceptance_rate"],
        **(
            {"acceptance_rate_engine": accepted / proposed, "drafts_past_end": past_end}
            if committed_rate is not None
            else {}
        ),
        "per_position_acceptance": per_position,
        "accepted_per_position": positions if per_position is not None else None,
        "tokens_per_pass": figures["tokens_per_pass"],
        "responses_with_metadata": with_spec,
        "responses_with_verify_steps": with_steps,
        "requests_with_verify_steps": len(accept.ratios),
        "responses_with_choices": with_choices,
        "responses_with_drafts": with_drafts,
        "sources": dict(sorted(sources.items())) if sources else None,
        "definitions": _definitions(sources, with_choices > 0) if sources else None,
        "exactness": {
            name: exactness(
                "exact",
                _COMMITTED_NOTE if name == "acceptance_rate" and committed_rate is not None else _EXACT_NOTES[name],
            )
            for name, value in figures.items()
            if value is not None
        },
    }


def _definitions(sources: Counter[str], choices: bool) -> dict[str, str]:
    """figure -> what it is here: the weighting, then each present source's definition with its engine file."""
    definitions: dict[str, Mapping[str, str]] = {}
    for name in sorted(sources):
        source = response_source(name)
        if source is not None:
            definitions[name] = source.definitions
    out: dict[str, str] = {}
    for figure, weighting in _WEIGHTING.items():
        if figure == "choices" and not choices:
            continue
        base = figure.removesuffix("_request_weighted")
        parts = [d[base] for d in definitions.values() if base in d]
        if parts:
            out[figure] = f"{weighting}; per response: " + " | ".join(parts)
    out["source"] = " | ".join(d["where"] for d in definitions.values() if "where" in d)
    return out
