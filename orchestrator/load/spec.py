"""Per-response speculative-decoding figures, read exactly where and as each engine writes them.

One response carries at most one of these sources (the engine decides which; the load client only asks for
what the engine offers, see :func:`orchestrator.load.settings.engine_request_extras`):

``sglang:sglext``
    SGLang's OpenAI ``/v1/chat/completions`` and ``/v1/completions`` (0.5.19 and later), only when the
    request sets the top-level body field ``"return_spec_tokens_details": true`` (``ChatCompletionRequest``
    / ``CompletionRequest`` in python/sglang/srt/entrypoints/openai/protocol.py). The response then carries
    ``"sglext": {"spec_tokens_details": {...}}`` at response level (``SglExt``, ``SpecTokensDetails`` in
    the same file; a list for ``n > 1``): in a whole body next to ``usage``; in a stream in a chunk of its
    own with ``"choices": []``, after the finish-reason chunk and before the usage chunk
    (serving_chat.py ``_generate_chat_stream``, serving_completions.py ``_generate_completion_stream``).
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
``vllm:metrics``
    vLLM's OpenAI chat/completions (0.33.0; absent in 0.10.2), only when the server runs with
    ``--per-request-spec-decode-metrics summary|detailed`` (vllm/config/observability.py); no request field.
    Top-level ``"metrics": {"speculative_decoding": {...}}`` (``PerRequestMetrics`` /
    ``SpeculativeDecodingMetrics`` in vllm/entrypoints/generate/base/protocol.py), in a stream on the final
    usage chunk only (so only with ``stream_options.include_usage``), only for ``n == 1``. Fields
    ``num_spec_steps``, ``num_accepted_draft_tokens``, ``num_draft_tokens``, ``mean_acceptance_length``,
    ``draft_acceptance_rate`` (``RequestSpecDecodeMetrics.to_dict`` in vllm/v1/metrics/stats.py).
``llamacpp:timings``
    llama.cpp's ``timings`` object (tools/server/server-common.cpp ``server_slot_stats::to_json``) on the
    last chunk of a stream or in a whole body, native ``/completion`` and OpenAI endpoints alike
    (tools/server/server-task.cpp). ``draft_n`` and ``draft_n_accepted`` appear only when the slot drafted
    something; there is no verify-step count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFINITIONS",
    "LLAMACPP_TIMINGS",
    "SGLANG_META_INFO",
    "SGLANG_SGLEXT",
    "VLLM_METRICS",
    "SpecFigures",
    "from_meta_info",
    "from_spec_tokens_details",
    "from_timings",
    "from_vllm_metrics",
    "response_spec",
    "summarize_spec",
]

SGLANG_SGLEXT = "sglang:sglext"
SGLANG_META_INFO = "sglang:meta_info"
VLLM_METRICS = "vllm:metrics"
LLAMACPP_TIMINGS = "llamacpp:timings"

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
    VLLM_METRICS: {
        "where": (
            "metrics.speculative_decoding of vLLM's OpenAI response, with the server flag "
            "--per-request-spec-decode-metrics (vllm/entrypoints/generate/base/protocol.py SpeculativeDecodingMetrics)"
        ),
        "accept_len": (
            "vLLM: 1 + num_accepted_draft_tokens / num_spec_steps, bonus token included, over the steps that verified "
            "drafts (vllm/v1/metrics/stats.py RequestSpecDecodeMetrics.to_dict mean_acceptance_length)"
        ),
        "acceptance_rate": (
            "vLLM: num_accepted_draft_tokens / num_draft_tokens, drafts only, grammar-invalidated drafts not proposed "
            "(vllm/v1/metrics/stats.py draft_acceptance_rate; vllm/v1/core/sched/scheduler.py)"
        ),
    },
    LLAMACPP_TIMINGS: {
        "where": (
            "timings of llama.cpp's last chunk or body (tools/server/server-common.cpp server_slot_stats::to_json)"
        ),
        "accept_len": "llama.cpp: none, its timings carry no verify-step count",
        "acceptance_rate": "llama.cpp: draft_n_accepted / draft_n, drafts only (absent when nothing was drafted)",
        "tokens_per_pass": (
            "llama.cpp: completion tokens / (completion tokens - draft_n_accepted): every target pass yields its "
            "accepted drafts plus one token"
        ),
    },
}

_WEIGHTING = {
    "accept_len": "token-weighted over the responses: sum of committed tokens / sum of verify steps",
    "accept_len_request_weighted": "the mean over responses of each response's accept_len",
    "accept_len_engine": "token-weighted: sum of completion tokens / sum of verify steps",
    "accept_len_engine_request_weighted": "the mean over responses of each response's accept_len_engine",
    "acceptance_rate": "sum of accepted drafts / sum of proposed drafts over the responses",
    "tokens_per_pass": "sum over the responses",
}


@dataclass(slots=True)
class SpecFigures:
    """What one response said about its speculation, under the engine's own counts.

    ``verify_steps``: SGLang ``spec_verify_ct``, vLLM ``num_spec_steps`` (None from llama.cpp).
    ``accepted_drafts`` / ``proposed_drafts``: SGLang ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts``
    (and their older names), vLLM ``num_accepted_draft_tokens`` / ``num_draft_tokens``, llama.cpp
    ``draft_n_accepted`` / ``draft_n``. ``engine_accept_len``: the engine's own per-response figure as written
    (SGLang ``spec_accept_length``, vLLM ``mean_acceptance_length``), kept to check ours against.
    """

    source: str
    verify_steps: int | None = None
    accepted_drafts: int | None = None
    proposed_drafts: int | None = None
    engine_accept_len: float | None = None

    def accept_terms(self, completion_tokens: int) -> tuple[int, int] | None:
        """(tokens committed by verify steps, verify steps): ``accept_len`` of this response is their ratio."""
        steps = self.verify_steps
        if not steps:
            return None
        if self.source == VLLM_METRICS:
            return steps + (self.accepted_drafts or 0), steps
        if self.source in (SGLANG_SGLEXT, SGLANG_META_INFO):
            return max(0, completion_tokens - 1), steps  # the first token came from prefill, not a verify step
        return None

    def engine_accept_terms(self, completion_tokens: int) -> tuple[int, int] | None:
        """SGLang's own (completion tokens, verify steps), where the engine's formula differs from accept_len."""
        if self.verify_steps and self.source in (SGLANG_SGLEXT, SGLANG_META_INFO):
            return completion_tokens, self.verify_steps
        return None

    def accept_len(self, completion_tokens: int) -> float | None:
        terms = self.accept_terms(completion_tokens)
        return terms[0] / terms[1] if terms else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "verify_steps": self.verify_steps,
            "accepted_drafts": self.accepted_drafts,
            "proposed_drafts": self.proposed_drafts,
            "engine_accept_len": self.engine_accept_len,
        }


def _int(value: object) -> int | None:
    return value if type(value) is int else None


def _float(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _first(*values: object) -> int | None:
    for value in values:
        if type(value) is int:
            return value
    return None


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


def from_vllm_metrics(metrics: object) -> SpecFigures | None:
    """vLLM's top-level ``metrics`` object; None unless it has ``speculative_decoding``."""
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(spec, dict):
        return None
    return SpecFigures(
        VLLM_METRICS,
        verify_steps=_int(spec.get("num_spec_steps")),
        accepted_drafts=_int(spec.get("num_accepted_draft_tokens")),
        proposed_drafts=_int(spec.get("num_draft_tokens")),
        engine_accept_len=_float(spec.get("mean_acceptance_length")),
    )


def from_timings(timings: Mapping[str, Any]) -> SpecFigures | None:
    """llama.cpp's ``timings``; None when the slot drafted nothing (the engine then omits both fields)."""
    drafted = _int(timings.get("draft_n"))
    accepted = _int(timings.get("draft_n_accepted"))
    if drafted is None and accepted is None:
        return None
    return SpecFigures(LLAMACPP_TIMINGS, accepted_drafts=accepted, proposed_drafts=drafted)


def response_spec(response: Mapping[str, Any]) -> tuple[SpecFigures | None, int | None]:
    """The speculative figures and the completion-token count of one whole response body (or the final
    chunks of a stream merged into one mapping), read where the engine that wrote it puts them."""
    spec: SpecFigures | None = None
    tokens: int | None = None
    usage = response.get("usage")
    if isinstance(usage, dict):
        tokens = _int(usage.get("completion_tokens"))
    sglext = response.get("sglext")
    if isinstance(sglext, dict):
        spec = from_spec_tokens_details(sglext.get("spec_tokens_details"))
    if spec is None and "metrics" in response:
        spec = from_vllm_metrics(response["metrics"])
    timings = response.get("timings")
    if isinstance(timings, dict):
        if spec is None:
            spec = from_timings(timings)
        if tokens is None:
            tokens = _int(response.get("tokens_predicted")) or _int(timings.get("predicted_n"))
    choices = response.get("choices")
    if isinstance(choices, list):
        # OpenAI-shaped: meta_info only inside a choice (SGLang chat with return_meta_info), never at top level.
        choice = choices[0] if choices else None
        meta = choice.get("meta_info") if isinstance(choice, dict) else None
        if isinstance(meta, dict):
            if spec is None:
                spec = from_meta_info(meta)
            if tokens is None:
                tokens = _int(meta.get("completion_tokens"))
    elif "object" not in response and "usage" not in response:
        meta = response.get("meta_info")  # SGLang /generate
        if isinstance(meta, dict):
            spec = spec or from_meta_info(meta)
            if tokens is None:
                tokens = _int(meta.get("completion_tokens"))
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


def summarize_spec(responses: Iterable[tuple[SpecFigures | None, int]]) -> dict[str, Any]:
    """Window figures over (figures, completion tokens) per response; None where no response had the figure.

    Names as in docs/engines.md. ``accept_len`` is token-weighted (the sum of every response's committed
    tokens over the sum of its verify steps: the weighting of a window of the engine's counters);
    ``accept_len_request_weighted`` is the plain mean of each response's own accept length, which weights a
    short answer as much as a long one. ``accept_len_engine`` (and its request-weighted mean) is SGLang's own
    formula, completion tokens / verify steps, the prefill token counted. Responses with no verify step are
    left out of all four. ``acceptance_rate`` is summed accepted drafts over summed proposed drafts.
    ``definitions`` says, for each figure, what it is and which engine file defines it.
    """
    accept = _Ratio()
    engine = _Ratio()
    accepted = proposed = 0
    llama_tokens = llama_accepted = 0
    with_spec = with_drafts = with_llama = 0
    sources: Counter[str] = Counter()
    for spec, tokens in responses:
        if spec is None:
            continue
        with_spec += 1
        sources[spec.source] += 1
        accept.add(spec.accept_terms(tokens))
        engine.add(spec.engine_accept_terms(tokens))
        if spec.proposed_drafts is not None and spec.accepted_drafts is not None:
            accepted += spec.accepted_drafts
            proposed += spec.proposed_drafts
            with_drafts += 1
        if spec.source == LLAMACPP_TIMINGS:
            llama_tokens += tokens
            llama_accepted += spec.accepted_drafts or 0
            with_llama += 1
    return {
        "accept_len": accept.pooled(),
        "accept_len_request_weighted": accept.mean(),
        "accept_len_engine": engine.pooled(),
        "accept_len_engine_request_weighted": engine.mean(),
        "verify_steps": accept.denominator if accept.ratios else None,
        "accepted_drafts": accepted if with_drafts else None,
        "proposed_drafts": proposed if with_drafts else None,
        # The same sums under llama.cpp's names, which the analysis frame's columns use.
        "draft_n": proposed if with_drafts else None,
        "draft_n_accepted": accepted if with_drafts else None,
        "acceptance_rate": accepted / proposed if proposed else None,
        "tokens_per_pass": (
            llama_tokens / (llama_tokens - llama_accepted) if with_llama and llama_tokens > llama_accepted else None
        ),
        "responses_with_metadata": with_spec,
        "responses_with_verify_steps": len(accept.ratios),
        "responses_with_drafts": with_drafts,
        "sources": dict(sorted(sources.items())) if sources else None,
        "definitions": _definitions(sources) if sources else None,
    }


def _definitions(sources: Counter[str]) -> dict[str, str]:
    """figure -> what it is here: the weighting, then each present source's definition with its engine file."""
    out: dict[str, str] = {}
    for figure, weighting in _WEIGHTING.items():
        base = figure.removesuffix("_request_weighted")
        parts = [DEFINITIONS[s][base] for s in sorted(sources) if base in DEFINITIONS.get(s, {})]
        if parts:
            out[figure] = f"{weighting}; per response: " + " | ".join(parts)
    out["source"] = " | ".join(DEFINITIONS[s]["where"] for s in sorted(sources) if s in DEFINITIONS)
    return out
