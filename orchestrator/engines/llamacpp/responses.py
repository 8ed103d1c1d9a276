"""llama.cpp's per-response speculative-decoding figures, read exactly where and as llama.cpp writes them.

``llamacpp:timings``
    llama.cpp's ``timings`` object (tools/server/server-common.cpp ``server_slot_stats::to_json``) on the
    last chunk of a stream or in a whole body, native ``/completion`` and OpenAI endpoints alike
    (tools/server/server-task.cpp), in every final chunk: nothing to ask for.
    ``draft_n`` and ``draft_n_accepted`` (:data:`DRAFTED_KEY`, :data:`ACCEPTED_KEY`) appear only when the
    slot drafted something; there is no verify-step count. ``prompt_n`` + ``cache_n`` are the prompt's tokens.

In :class:`~orchestrator.engines.responses.SpecFigures`: ``accepted_drafts`` / ``proposed_drafts`` are
``draft_n_accepted`` / ``draft_n``; ``verify_steps`` and ``engine_accept_len`` are None. The per-response
summary (:func:`orchestrator.load.spec.summarize_spec`) also writes the drafted and accepted sums under these
two names (``orchestrator.engines.responses``, where the summary and the analysis frame's columns take them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.engines.responses import ACCEPTED_KEY, DRAFTED_KEY, ResponseFields, ResponseSource, SpecFigures, _int

__all__ = [
    "ACCEPTED_KEY",
    "DEFINITIONS",
    "DRAFTED_KEY",
    "FIELDS",
    "LLAMACPP_TIMINGS",
    "SOURCES",
    "from_timings",
    "read_timings",
]

LLAMACPP_TIMINGS = "llamacpp:timings"
#: The fields of ``timings`` with the drafted and the accepted draft tokens (server_slot_stats::to_json):
#: ``DRAFTED_KEY`` and ``ACCEPTED_KEY``, defined with the shared response types (the summary's names too).

DEFINITIONS: dict[str, dict[str, str]] = {
    LLAMACPP_TIMINGS: {
        "where": (
            "timings of llama.cpp's last chunk or body (tools/server/server-common.cpp server_slot_stats::to_json)"
        ),
        "accept_len": "llama.cpp: none, its timings carry no verify-step count",
        "acceptance_rate": f"llama.cpp: {ACCEPTED_KEY} / {DRAFTED_KEY}, drafts only (absent when nothing was drafted)",
        "tokens_per_pass": (
            f"llama.cpp: completion tokens / (completion tokens - {ACCEPTED_KEY}): every target pass yields its "
            "accepted drafts plus one token"
        ),
    },
}

SOURCES: dict[str, ResponseSource] = {
    LLAMACPP_TIMINGS: ResponseSource(DEFINITIONS[LLAMACPP_TIMINGS], tokens_per_pass=True)
}


def from_timings(timings: Mapping[str, Any]) -> SpecFigures | None:
    """llama.cpp's ``timings``; None when the slot drafted nothing (the engine then omits both fields)."""
    drafted = _int(timings.get(DRAFTED_KEY))
    accepted = _int(timings.get(ACCEPTED_KEY))
    if drafted is None and accepted is None:
        return None
    return SpecFigures(LLAMACPP_TIMINGS, accepted_drafts=accepted, proposed_drafts=drafted)


def read_timings(response: Mapping[str, Any]) -> tuple[SpecFigures | None, int | None]:
    """A whole body's ``timings`` and its token count (``tokens_predicted`` of ``/completion``, else the
    timings' ``predicted_n``)."""
    timings = response.get("timings")
    if not isinstance(timings, dict):
        return None, None
    return from_timings(timings), _int(response.get("tokens_predicted")) or _int(timings.get("predicted_n"))


def _timings(value: object) -> tuple[SpecFigures | None, int | None]:
    """``timings`` of a chunk or body (the last one wins: with ``timings_per_token`` every chunk has one): its
    figures and the prompt's tokens, ``prompt_n`` + ``cache_n`` (server_slot_stats::to_json)."""
    if not isinstance(value, dict):
        return None, None
    prompt_n = value.get("prompt_n")
    cache_n = value.get("cache_n")
    cached = cache_n if isinstance(cache_n, int) and not isinstance(cache_n, bool) else 0
    return from_timings(value), (prompt_n + cached if isinstance(prompt_n, int) else None)


#: What llama.cpp writes into its responses (``Engine.response_fields``): ``timings`` on the last chunk or the
#: body, OpenAI and native ``/completion`` alike.
FIELDS = ResponseFields(sources=SOURCES, extensions={"timings": _timings}, body_readers=(read_timings,))
