"""vLLM's per-response speculative-decoding figures, read exactly where and as vLLM writes them.

``vllm:metrics``
    vLLM's OpenAI chat/completions (0.33.0; absent in 0.10.2), only when the server runs with
    ``--per-request-spec-decode-metrics summary|detailed`` (vllm/config/observability.py); no request field
   . Top-level ``"metrics": {"speculative_decoding": {...}}`` (``PerRequestMetrics``
    / ``SpeculativeDecodingMetrics`` in vllm/entrypoints/generate/base/protocol.py), in a stream on the final
    usage chunk only (so only with ``stream_options.include_usage``), only for ``n == 1``. Fields
    ``num_spec_steps``, ``num_accepted_draft_tokens``, ``num_draft_tokens``, ``mean_acceptance_length``,
    ``draft_acceptance_rate`` (``RequestSpecDecodeMetrics.to_dict`` in vllm/v1/metrics/stats.py).

In :class:`~orchestrator.engines.responses.SpecFigures`: ``verify_steps`` is ``num_spec_steps``,
``accepted_drafts`` / ``proposed_drafts`` are ``num_accepted_draft_tokens`` / ``num_draft_tokens``,
``engine_accept_len`` is ``mean_acceptance_length``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.engines.responses import ResponseSource, SpecFigures, _float, _int

__all__ = ["DEFINITIONS", "SOURCES", "VLLM_METRICS", "from_vllm_metrics", "read_metrics"]

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
    )


def read_metrics(response: Mapping[str, Any]) -> tuple[SpecFigures | None, int | None]:
    """A whole body's top-level ``metrics`` (no token count: that is in ``usage``)."""
    if "metrics" in response:
        return from_vllm_metrics(response["metrics"]), None
    return None, None
