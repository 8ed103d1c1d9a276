"""What one load run gives back: its progress reports and its result (``LoadResult.to_dict()`` is the record
the store keeps). Apart from ``run.py`` so that the worker processes (``workers.py``), which ``run_load``
starts, build the same result without importing the runner that imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.load.records import RequestRecord
from orchestrator.load.settings import LoadSettings

__all__ = ["LoadProgress", "LoadResult", "ProgressCallback"]


@dataclass(frozen=True, slots=True)
class LoadProgress:
    """A progress report: requests finished of ``total`` (None when the run is bounded by time)."""

    phase: Literal["warmup", "load", "done"]
    done: int
    total: int | None
    errors: int
    elapsed_s: float
    duration_s: float | None
    live_tok_s: float


ProgressCallback = Callable[[LoadProgress], None]


@dataclass(slots=True)
class LoadResult:
    """What one load run measured. ``to_dict()`` is the JSON-able record the store keeps."""

    settings: LoadSettings
    model: str | None
    figures: dict[str, Any]
    records: list[RequestRecord] = field(repr=False)
    warmup_requests: int = 0
    warmup_errors: int = 0
    cancelled: int = 0
    partial: bool = False
    started_at: float = 0.0
    ended_at: float = 0.0
    event_loop: str = "asyncio"  # the loop that measured it (orchestrator.load.eventloop)

    @property
    def requests(self) -> int:
        return int(self.figures["requests"])

    @property
    def errors(self) -> int:
        return int(self.figures["errors"])

    @property
    def output_tok_s(self) -> float:
        return float(self.figures["output_tok_s"])

    def to_dict(self) -> dict[str, Any]:
        s = self.settings
        return {
            "api": s.api,
            "url": s.url,
            "model": self.model,
            "loop": "open" if s.open_loop else "closed",
            "concurrency": s.concurrency,
            "rate": s.rate,
            "max_in_flight": s.in_flight_cap if s.open_loop else None,
            "stream": s.stream,
            "max_tokens": s.max_tokens,
            "prompts": s.prompts if isinstance(s.prompts, str) else s.prompts.describe(),
            "seed": s.seed,
            **self.figures,
            "warmup_requests": self.warmup_requests,
            "warmup_errors": self.warmup_errors,
            "cancelled": self.cancelled,
            "partial": self.partial,
            "started_at": round(self.started_at, 3),
            "ended_at": round(self.ended_at, 3),
            "event_loop": self.event_loop,
            "workers": s.workers,
        }
