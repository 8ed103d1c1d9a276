"""llama.cpp's samples: what its log said of one finished request, or one statistics line, as numbers (the shared
base: ``orchestrator.engines.samples``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from orchestrator.engines.samples import Sample

__all__ = ["LlamaRequestSample", "LlamaSpecStatsSample"]


@dataclass(slots=True)
class LlamaRequestSample(Sample):
    """One finished llama-server request, assembled from its ``print_timing`` lines."""

    kind: ClassVar[str] = "llamacpp_request"

    slot: int | None = None
    task: int | None = None
    accepted: int | None = None
    generated: int | None = None  # draft tokens generated (proposed)
    draft_acceptance: float | None = None  # as printed: accepted / generated
    mean_len: float | None = None  # as printed: 1 + accepted / verify steps
    acc_per_pos: list[float] = field(default_factory=list)
    verify_steps: int | None = None  # recovered from accepted, mean_len and acc_per_pos
    # Every step count the printed figures allow (orchestrator/engines/llamacpp/log.py recover_request_steps):
    # verify_steps is exact when the two are equal; None when nothing bounds it.
    verify_steps_low: int | None = None
    verify_steps_high: int | None = None
    prompt_tokens: int | None = None
    prompt_ms: float | None = None
    eval_tokens: int | None = None
    eval_ms: float | None = None
    eval_tps: float | None = None
    total_ms: float | None = None
    total_tokens: int | None = None
    # Whether the window holds its "launch_slot_: ... processing task" line (None: the window holds none of any
    # request, as a build that does not print them): False is a request that began before the window.
    launched_in_window: bool | None = None
    # False: the request's slot was released ("release: ... stop processing") without its print_timings lines (a
    # request cancelled in flight: server-context.cpp SERVER_TASK_TYPE_CANCEL calls slot.release() alone), so
    # the engine's counters hold its drafts (callback_on_reset -> metrics_on_prediction) and the log does not.
    timings_logged: bool = True


@dataclass(slots=True)
class LlamaSpecStatsSample(Sample):
    """One ``statistics <impl>:`` line of llama.cpp's speculative module (cumulative, printed at trace level)."""

    kind: ClassVar[str] = "llamacpp_spec_stats"

    impl: str = ""
    gen_drafts: int | None = None
    acc_drafts: int | None = None
    gen_tokens: int | None = None
    acc_tokens: int | None = None
    mean_acc_len: float | None = None
    acc_rate_per_pos: list[float] = field(default_factory=list)
