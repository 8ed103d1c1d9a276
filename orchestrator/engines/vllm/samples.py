"""vLLM's samples: what one of its log lines said, as numbers (the shared base: ``orchestrator.engines.samples``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from orchestrator.engines.samples import Sample

__all__ = ["VllmEngineSample", "VllmSpecSample"]


@dataclass(slots=True)
class VllmSpecSample(Sample):
    """One vLLM ``SpecDecoding metrics:`` line (one logging interval), or one V0 ``Speculative metrics:`` line
    turned into its interval's counts. ``drafts`` is recovered, not printed. See orchestrator/engines/vllm/log.py."""

    kind: ClassVar[str] = "vllm_spec"

    accepted: int | None = None
    drafted: int | None = None
    mean_acceptance_length: float | None = None
    accepted_throughput: float | None = None
    drafted_throughput: float | None = None
    draft_acceptance_rate: float | None = None  # as printed, in percent (V0: a fraction, as printed)
    per_position: list[float] = field(default_factory=list)
    drafts: int | None = None
    drafts_exact: bool = False
    form: str = "current"  # "current" (0.10.2+), "mean" (0.8.5-0.10.1), "old" (0.8.3-0.8.4), "v0"
    engine_index: int | None = None  # the engine whose "Engine NNN:" line came just before
    bonus_in_mean: bool | None = None  # does the printed mean count the bonus token (not in vLLM 0.8.5)
    elapsed_s: float | None = None  # the interval's length, recovered from a throughput field
    emitted: int | None = None  # V0: emitted tokens in the interval (accepted prefix + 1 per step)
    num_spec_tokens: int | None = None  # V0: k, as printed
    system_efficiency: float | None = None  # V0, as printed (cumulative)
    cumulative: dict[str, int] = field(default_factory=dict)  # V0: the counts as printed (since engine start)
    # Why the "Engine NNN:" line this spec line pairs with is not in the text (the window was cut between
    # them: orchestrator/engines/vllm/log.py pair_lines); None for a whole pair. Such a line gives no figure.
    cut_pair: str | None = None


@dataclass(slots=True)
class VllmEngineSample(Sample):
    """One vLLM ``[Engine NNN:] Avg prompt throughput: ...`` line (one logging interval)."""

    kind: ClassVar[str] = "vllm_engine"

    engine_index: int | None = None
    prompt_throughput: float | None = None
    generation_throughput: float | None = None
    running: int | None = None
    waiting: int | None = None
    kv_cache_usage: float | None = None  # percent
    prefix_cache_hit_rate: float | None = None  # percent
    timestamp: str | None = None  # vLLM's own "%m-%d %H:%M:%S" (vllm/logger.py _DATE_FORMAT), when printed
    # Why the spec line printed right after this one is not in the text (the window ends between them:
    # orchestrator/engines/vllm/log.py pair_lines); None for a whole pair or an interval without drafts.
    cut_pair: str | None = None
    # The mark above is a guess from the text alone (a tail line without its spec line while the engine's other
    # lines that generated tokens had theirs): a reader that closed the window on this tick and waited for the
    # lines printed with it knows better (parse_window ``closed``), and the mark is withdrawn.
    cut_at_end: bool = False
