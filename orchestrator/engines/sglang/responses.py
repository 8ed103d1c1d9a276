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

    ``n > 1`` (serving_chat.py ``_build_chat_response`` / ``_generate_chat_stream``, serving_completions.py
    ``_build_completion_response`` / ``_generate_completion_stream``): ``spec_tokens_details`` is a list, one
    entry per choice whose ``meta_info`` had speculative fields (a choice with no verify step has none and is
    left out of the list: tokenizer_manager.py ``_calculate_spec_decoding_metrics`` writes them only when
    ``spec_verify_ct > 0``), while ``usage.completion_tokens`` sums every choice (usage_processor.py
    ``UsageProcessor.calculate_response_usage`` / ``calculate_streaming_usage``). Inside the engine each
    choice is a request of its own, with its own prefill token and verify steps, and SGLang's counters
    (observability/metrics_collector.py ``observe_one_finished_request``) add them up one request at a time;
    so the response's figures are each choice's, pooled: verify steps, correct and proposed drafts summed
    over the choices, and each choice's completion tokens, which the details do not print but which
    ``spec_accept_length`` = completion_tokens / spec_verify_ct gives back exactly (an integer times the
    float's own rounding: ``round(spec_accept_length * spec_verify_ct)``). With ``n == 1`` and several
    prompts (``/v1/completions`` with a list), the object is the first prompt's only (``spec_details[0]``),
    and again its own completion tokens, not the usage of all prompts, go with it.
``sglang:meta_info``
    SGLang's native ``/generate``: ``meta_info`` of the final chunk (python/sglang/srt/managers/
    tokenizer_manager.py ``_calculate_spec_decoding_metrics``, called once the request finished). Names by
    version (read wheel by wheel): ``spec_verify_ct`` only (0.4.10.post2); plus ``spec_accept_token_num`` /
    ``spec_draft_token_num`` (0.5.9); ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts`` (0.5.12,
    0.5.14, 0.5.16, 0.5.18, 0.5.19 with the aliases ``spec_accepted_drafts`` / ``spec_proposed_drafts``;
    0.5.23 without them). From 0.5.9 on the fields appear only when ``spec_verify_ct > 0``. SGLang's
    OpenAI endpoints put ``meta_info`` nowhere at top level; a non-streamed chat response carries it in
    ``choices[i].meta_info`` only when the request sets ``return_meta_info`` (serving_chat.py
    ``_build_chat_response``; refused with streaming), read here under the same names, every choice's (each
    with its own ``completion_tokens``) pooled as above.

In :class:`~orchestrator.engines.responses.SpecFigures`: ``verify_steps`` is ``spec_verify_ct``,
``accepted_drafts`` / ``proposed_drafts`` are ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts`` (and
their older names), ``engine_accept_len`` is ``spec_accept_length``, ``completion_tokens`` is ``meta_info``'s
or the one ``spec_accept_length`` gives back, ``accepted_histogram`` is ``spec_correct_drafts_histogram``
(entry j = verify steps that accepted exactly j drafts: ``Req.update_spec_correct_drafts_histogram``,
managers/schedule_batch.py, called once per verify step by batch_result_processor.py; as long as the largest
count seen plus one), ``choices`` holds each choice's figures when the response had several.

With a tree (``--speculative-eagle-topk`` > 1) ``spec_num_proposed_drafts`` = spec_verify_ct x
(speculative_num_draft_tokens - 1) counts every drafted node of the tree
(speculative/eagle_utils.py ``organize_draft_results`` keeps the ``num_draft_token - 1`` best-scored nodes,
verified together with the bonus token), while at most one path of ``speculative_num_steps`` drafts can be
accepted per step: the rate is accepted drafts per tree node, at most steps / (num_draft_tokens - 1), not a
chain's per-draft rate (with topk = 1 SGLang sets num_draft_tokens = num_steps + 1, arg_groups/
speculative_hook.py ``_handle_eagle_family``, and the two meanings agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.engines.responses import (
    ResponseFields,
    ResponseSource,
    SpecFigures,
    _first,
    _float,
    _histogram,
    _int,
)

__all__ = [
    "DEFINITIONS",
    "FIELDS",
    "SGLANG_META_INFO",
    "SGLANG_SGLEXT",
    "SOURCES",
    "TREE_RATE",
    "from_choices_meta_info",
    "from_meta_info",
    "from_spec_tokens_details",
    "read_meta_info",
    "read_sglext",
    "request_extras",
]

SGLANG_SGLEXT = "sglang:sglext"
SGLANG_META_INFO = "sglang:meta_info"

_SGLANG_FILE = "python/sglang/srt/managers/tokenizer_manager.py _calculate_spec_decoding_metrics"
#: What SGLang's acceptance rate means with a tree (module docstring); every source of it has this denominator
#: (the Decode line's and the spec_accept_rate gauge's: metrics_reporter.py report_decode_stats).
TREE_RATE = (
    "With a tree (--speculative-eagle-topk > 1) speculative_num_draft_tokens - 1 is every drafted tree node "
    "(python/sglang/srt/speculative/eagle_utils.py organize_draft_results), of which one path of at most "
    "speculative_num_steps can be accepted per step: the rate is accepted drafts per tree node, not comparable "
    "with a chain's per-draft rate (they agree only at topk = 1, where SGLang sets num_draft_tokens = "
    "num_steps + 1: python/sglang/srt/arg_groups/speculative_hook.py _handle_eagle_family)"
)
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
        "SGLang, drafts committed per draft proposed: (sum of (completion_tokens - 1) - sum of spec_verify_ct) / "
        "sum of spec_num_proposed_drafts (older names spec_proposed_drafts, spec_draft_token_num), as the "
        "counters count it (each verify step commits one token of its own and the drafts it keeps); proposed = "
        f"spec_verify_ct x (speculative_num_draft_tokens - 1) ({_SGLANG_FILE}). SGLang's own spec_accept_rate, "
        "spec_num_correct_drafts / spec_num_proposed_drafts, also counts drafts accepted past a request's end "
        "(orchestrator/engines/sglang/overshoot.py): acceptance_rate_engine, and drafts_past_end the difference. "
        f"{TREE_RATE}"
    ),
    "per_position_acceptance": (
        "SGLang: from spec_correct_drafts_histogram h (h[j] = verify steps that accepted exactly j drafts, "
        "python/sglang/srt/managers/schedule_batch.py Req.update_spec_correct_drafts_histogram): entry i = "
        "sum(h[j] for j > i) / sum(h), the share of steps that accepted at least i + 1 drafts"
    ),
    "choices": (
        "n > 1: one spec_tokens_details (or choices[i].meta_info) per choice that verified, usage summing every "
        "choice (python/sglang/srt/entrypoints/openai/serving_chat.py, serving_completions.py, usage_processor.py); "
        "each choice is one request inside SGLang, so its own prefill token, verify steps and drafts are pooled "
        "with the others' (as observe_one_finished_request adds them into SGLang's counters); a choice's "
        "completion tokens = round(spec_accept_length x spec_verify_ct)"
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
    name: ResponseSource(
        DEFINITIONS[name], accept=_accept_terms, engine_accept=_engine_accept_terms, drafts_past_end=True
    )
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


def _completion_from_length(accept_length: float | None, verify: int | None) -> int | None:
    """A choice's completion tokens from SGLang's ``spec_accept_length = completion_tokens / spec_verify_ct``
    (tokenizer_manager.py ``_calculate_spec_decoding_metrics``): an integer divided and multiplied back by the
    same integer, so the product is within far less than 0.5 of it. None when it is not (not that formula)."""
    if not verify or accept_length is None or accept_length <= 0:
        return None
    product = accept_length * verify
    tokens = round(product)
    return tokens if abs(product - tokens) < 1e-6 * max(1.0, product) and tokens >= 1 else None


def _one_detail(details: Mapping[str, Any]) -> SpecFigures:
    verify = _int(details.get("spec_verify_ct"))
    length = _float(details.get("spec_accept_length"))
    return SpecFigures(
        SGLANG_SGLEXT,
        verify_steps=verify,
        accepted_drafts=_int(details.get("spec_num_correct_drafts")),
        proposed_drafts=_int(details.get("spec_num_proposed_drafts")),
        engine_accept_len=length,
        completion_tokens=_completion_from_length(length, verify),
        accepted_histogram=_histogram(details.get("spec_correct_drafts_histogram")),
    )


def _pooled(source: str, parts: list[SpecFigures]) -> SpecFigures:
    """One response's figures from its choices' (the class docstring of SpecFigures): sums, each choice kept."""

    def total(values: list[int | None]) -> int | None:
        return sum(v for v in values if v is not None) if all(v is not None for v in values) else None

    histograms = [p.accepted_histogram for p in parts]
    histogram: tuple[int, ...] | None = None
    if parts and all(h is not None for h in histograms):
        width = max(len(h) for h in histograms if h is not None)
        histogram = tuple(sum(h[j] for h in histograms if h is not None and j < len(h)) for j in range(width))
    return SpecFigures(
        source,
        verify_steps=total([p.verify_steps for p in parts]),
        accepted_drafts=total([p.accepted_drafts for p in parts]),
        proposed_drafts=total([p.proposed_drafts for p in parts]),
        engine_accept_len=None,  # SGLang writes one per choice only
        completion_tokens=total([p.completion_tokens for p in parts]),
        accepted_histogram=histogram,
        choices=tuple(parts),
    )


def from_spec_tokens_details(details: object) -> SpecFigures | None:
    """SGLang's ``sglext.spec_tokens_details``: an object, or (``n > 1``) a list of one per choice that verified,
    pooled as SGLang's counters pool its requests (module docstring)."""
    if isinstance(details, list):
        parts = [_one_detail(d) for d in details if isinstance(d, dict)]
        return _pooled(SGLANG_SGLEXT, parts) if parts else None
    if not isinstance(details, dict):
        return None
    return _one_detail(details)


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
        completion_tokens=_int(meta.get("completion_tokens")),
        accepted_histogram=_histogram(meta.get("spec_correct_drafts_histogram")),
    )


def from_choices_meta_info(choices: object) -> SpecFigures | None:
    """Every ``choices[i].meta_info`` of a non-streamed SGLang chat answer asked with ``return_meta_info``
    (serving_chat.py ``_build_chat_response``): one choice's figures, or several pooled (module docstring)."""
    if not isinstance(choices, list):
        return None
    metas = [c.get("meta_info") for c in choices if isinstance(c, dict)]
    parts = [f for f in (from_meta_info(m) for m in metas if isinstance(m, dict)) if f is not None]
    if not parts:
        return None
    return parts[0] if len(choices) == 1 else _pooled(SGLANG_META_INFO, parts)


def read_sglext(response: Mapping[str, Any]) -> tuple[SpecFigures | None, int | None]:
    """A whole body's ``sglext.spec_tokens_details`` (no token count: that is in ``usage``)."""
    sglext = response.get("sglext")
    if isinstance(sglext, dict):
        return from_spec_tokens_details(sglext.get("spec_tokens_details")), None
    return None, None


def read_meta_info(response: Mapping[str, Any]) -> tuple[SpecFigures | None, int | None]:
    """A whole body's ``meta_info`` and its ``completion_tokens``: inside the choices of an OpenAI-shaped
    body (SGLang chat with ``return_meta_info``; every choice's, pooled), never at its top level; at the top
    level of ``/generate``'s."""
    choices = response.get("choices")
    if isinstance(choices, list):
        spec = from_choices_meta_info(choices)
        return spec, spec.completion_tokens if spec is not None else None
    if "object" not in response and "usage" not in response:
        meta = response.get("meta_info")  # SGLang /generate
        if isinstance(meta, dict):
            return from_meta_info(meta), _int(meta.get("completion_tokens"))
    return None, None


def _sglext(value: object) -> tuple[SpecFigures | None, int | None]:
    """An OpenAI chunk's or body's ``sglext``: its ``spec_tokens_details`` (no prompt count)."""
    if isinstance(value, dict):
        return from_spec_tokens_details(value.get("spec_tokens_details")), None
    return None, None


def _generate_meta_info(meta: Mapping[str, Any]) -> SpecFigures | None:
    """``/generate``'s ``meta_info`` when it has ``spec_verify_ct``, which every SGLang version writes with the
    other speculative fields."""
    return from_meta_info(meta) if "spec_verify_ct" in meta else None


#: What SGLang writes into its responses (``Engine.response_fields``): ``sglext`` beside an OpenAI answer's
#: ``usage``, ``meta_info`` in ``/generate`` and in the choices of a chat answer asked with
#: ``return_meta_info``; ``meta_info`` is read last of every engine's whole-body fields.
FIELDS = ResponseFields(
    sources=SOURCES,
    extensions={"sglext": _sglext},
    body_readers=(read_sglext,),
    late_body_readers=(read_meta_info,),
    meta_info=_generate_meta_info,
    choices=from_choices_meta_info,
)
