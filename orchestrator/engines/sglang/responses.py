"""SGLang's per-response speculative-decoding figures, read exactly where and as SGLang writes them.

``sglang:sglext``
    SGLang's OpenAI ``/v1/chat/completions`` and ``/v1/completions`` (0.5.19 and later), only when the
    request sets the top-level body field ``"return_spec_tokens_details": true`` (``ChatCompletionRequest``
    / ``CompletionRequest`` in python/sglang/srt/entrypoints/openai/protocol.py; :func:`request_extras`).
    The response then carries ``"sglext": {"spec_tokens_details": {...}}`` at response level (``SglExt``,
    ``SpecTokensDetails`` in the same file; a list for ``n > 1``): in a whole body next to ``usage``; in a
    stream in a chunk of its own with ``"choices": []``, after the finish-reason chunk and before the usage
    chunk (serving_chat.py ``_generate_chat_stream``, serving_completions.py ``_generate_completion_stream``).
    Fields: ``spec_verify_ct``, ``spec_num_correct_drafts``, ``spec_num_proposed_drafts``,
    ``spec_accept_length``, ``spec_accept_rate``, histograms (zeros where the engine had no value:
    utils.py ``spec_tokens_details_from_meta_info``). Absent when the server runs without speculation.
``sglang:meta_info``
    SGLang's native ``/generate``: ``meta_info`` of the final chunk (python/sglang/srt/managers/
    tokenizer_manager.py ``_calculate_spec_decoding_metrics``, called once the request finished). Names by
    version (read wheel by wheel): ``spec_verify_ct`` only (0.4.10.post2); plus ``spec_accept_token_num`` /
    ``spec_draft_token_num`` (0.5.9); ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts`` (0.5.12,
    0.5.14, 0.5.16, 0.5.18, 0.5.19 with the aliases ``spec_accepted_drafts`` / ``spec_proposed_drafts``;
    0.5.23 without them). From 0.5.9 on the fields appear only when ``spec_verify_ct > 0``. SGLang's
    OpenAI endpoints put ``meta_info`` nowhere at top level; a non-streamed chat response carries it in
    ``choices[i].meta_info`` only when the request sets ``return_meta_info`` (serving_chat.py
    ``_build_chat_response``; refused with streaming), read here under the same names.

In :class:`~orchestrator.engines.responses.SpecFigures`: ``verify_steps`` is ``spec_verify_ct``,
``accepted_drafts`` / ``proposed_drafts`` are ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts`` (and
their older names), ``engine_accept_len`` is ``spec_accept_length``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.engines.responses import ResponseSource, SpecFigures, _first, _float, _int

__all__ = [
    "DEFINITIONS",
    "SGLANG_META_INFO",
    "SGLANG_SGLEXT",
    "SOURCES",
    "from_meta_info",
    "from_spec_tokens_details",
    "read_meta_info",
    "read_sglext",
    "request_extras",
]

SGLANG_SGLEXT = "sglang:sglext"
SGLANG_META_INFO = "sglang:meta_info"

_SGLANG_FILE = "python/sglang/srt/managers/tokenizer_manager.py _calculate_spec_decoding_metrics"
_SGLANG = {
    "accept_len": (
        "SGLang: (completion_tokens - 1) / spec_verify_ct, tokens committed per verify step, bonus token included, "
        f"the prefill's first token left out ({_SGLANG_FILE})"
    ),
    "accept_len_engine": (
        "SGLang's own per-request formula, completion_tokens / spec_verify_ct, which counts the prefill token too "
        f"(its spec_accept_length, 'includes bonus token'; {_SGLANG_FILE})"
    ),
    "acceptance_rate": (
        "SGLang: spec_num_correct_drafts / spec_num_proposed_drafts (older names spec_accepted_drafts / "
        "spec_proposed_drafts, spec_accept_token_num / spec_draft_token_num), drafts only; proposed = "
        f"spec_verify_ct x (speculative_num_draft_tokens - 1) ({_SGLANG_FILE})"
    ),
}
DEFINITIONS: dict[str, dict[str, str]] = {
    SGLANG_SGLEXT: {
        "where": (
            "sglext.spec_tokens_details of SGLang's OpenAI chat/completions response, asked for with the request "
            "field return_spec_tokens_details (python/sglang/srt/entrypoints/openai/protocol.py SpecTokensDetails; "
            "serving_chat.py, serving_completions.py)"
        ),
        **_SGLANG,
    },
    SGLANG_META_INFO: {
        "where": "meta_info of SGLang's /generate final chunk (python/sglang/srt/managers/tokenizer_manager.py)",
        **_SGLANG,
    },
}


def _accept_terms(figures: SpecFigures, steps: int, completion_tokens: int) -> tuple[int, int]:
    return max(0, completion_tokens - 1), steps  # the first token came from prefill, not a verify step


def _engine_accept_terms(figures: SpecFigures, steps: int, completion_tokens: int) -> tuple[int, int]:
    return completion_tokens, steps  # SGLang's spec_accept_length: the prefill token counted


SOURCES: dict[str, ResponseSource] = {
    name: ResponseSource(DEFINITIONS[name], accept=_accept_terms, engine_accept=_engine_accept_terms)
    for name in (SGLANG_SGLEXT, SGLANG_META_INFO)
}


def request_extras(api: str) -> dict[str, Any]:
    """The request-body fields that make SGLang return its per-response speculative figures on ``api``.

    ``chat``/``completions``: ``{"return_spec_tokens_details": true}``, a top-level field of
    ``ChatCompletionRequest`` and ``CompletionRequest`` (python/sglang/srt/entrypoints/openai/protocol.py,
    SGLang 0.5.19 and later; 0.5.18 and older ignore the unknown field, pydantic's default for their request
    models). The answer comes back in ``sglext.spec_tokens_details``. ``/generate`` needs nothing: its
    ``meta_info`` always carries them.
    """
    if api in ("chat", "completions"):
        return {"return_spec_tokens_details": True}
    return {}


def from_spec_tokens_details(details: object) -> SpecFigures | None:
    """SGLang's ``sglext.spec_tokens_details`` (an object, or a list of them for ``n > 1``: the first)."""
    if isinstance(details, list):
        details = details[0] if details else None
    if not isinstance(details, dict):
        return None
    return SpecFigures(
        SGLANG_SGLEXT,
        verify_steps=_int(details.get("spec_verify_ct")),
        accepted_drafts=_int(details.get("spec_num_correct_drafts")),
        proposed_drafts=_int(details.get("spec_num_proposed_drafts")),
        engine_accept_len=_float(details.get("spec_accept_length")),
    )


def from_meta_info(meta: Mapping[str, Any]) -> SpecFigures | None:
    """SGLang's ``meta_info`` (``/generate``), under any version's names; None when it has no speculative field."""
    verify = _int(meta.get("spec_verify_ct"))
    accepted = _first(
        meta.get("spec_num_correct_drafts"), meta.get("spec_accepted_drafts"), meta.get("spec_accept_token_num")
    )
    proposed = _first(
        meta.get("spec_num_proposed_drafts"), meta.get("spec_proposed_drafts"), meta.get("spec_draft_token_num")
    )
    if verify is None and accepted is None and proposed is None:
        return None
    return SpecFigures(
        SGLANG_META_INFO,
        verify_steps=verify,
        accepted_drafts=accepted,
        proposed_drafts=proposed,
        engine_accept_len=_float(meta.get("spec_accept_length")),
    )


def read_sglext(response: Mapping[str, Any]) -> tuple[SpecFigures | None, int | None]:
    """A whole body's ``sglext.spec_tokens_details`` (no token count: that is in ``usage``)."""
    sglext = response.get("sglext")
    if isinstance(sglext, dict):
        return from_spec_tokens_details(sglext.get("spec_tokens_details")), None
    return None, None


def read_meta_info(response: Mapping[str, Any]) -> tuple[SpecFigures | None, int | None]:
    """A whole body's ``meta_info`` and its ``completion_tokens``: inside the first choice of an OpenAI-shaped
    body (SGLang chat with ``return_meta_info``), never at its top level; at the top level of ``/generate``'s."""
    choices = response.get("choices")
    if isinstance(choices, list):
        choice = choices[0] if choices else None
        meta = choice.get("meta_info") if isinstance(choice, dict) else None
    elif "object" not in response and "usage" not in response:
        meta = response.get("meta_info")  # SGLang /generate
    else:
        meta = None
    if not isinstance(meta, dict):
        return None, None
    return from_meta_info(meta), _int(meta.get("completion_tokens"))
