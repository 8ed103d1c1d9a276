"""vLLM's ``/metrics``: the V1 counters give the window's figures exactly; V0's spec counters are not read.

vLLM V0 (<= 0.9.2, vllm/engine/metrics.py PrometheusStatLogger) adds its cumulative spec counts to
``vllm:spec_decode_num_*`` every interval, so their differences are no window's counts: V0 is told by its
emitted-tokens counter, and its spec counters are then not read (its log line is:
:mod:`orchestrator.engines.vllm.log`).
"""

from __future__ import annotations

from typing import Any

from orchestrator.engines.exposition import PromSnapshot, PromWindow, by_name

__all__ = ["PREFIX", "V0_COUNTER", "derive"]

PREFIX = "vllm:"
V0_COUNTER = "vllm:spec_decode_num_emitted_tokens_total"


def derive(window: PromWindow, after: PromSnapshot, generated: float | None, version: str | None) -> None:
    """Undo what the shared counter derivation read from V0's cumulative spec counters."""
    del generated, version
    if by_name(after.values, after.names, V0_COUNTER) is None:
        return
    window.accept_len = window.acceptance_rate = None
    window.per_position = None
    details: dict[str, Any] = window.details
    details.update({"drafts": None, "draft_tokens": None, "accepted": None})
    details["vllm_v0_spec_counters"] = "not read: V0 adds cumulative counts to them every interval"
