"""SGLang's samples: what one of its log lines said, as numbers (the shared base: ``orchestrator.engines.samples``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from orchestrator.engines.samples import Sample, Value

__all__ = ["SglangDecodeSample"]


@dataclass(slots=True)
class SglangDecodeSample(Sample):
    """One SGLang ``Decode batch`` line: the engine's figures over one decode-log interval."""

    kind: ClassVar[str] = "sglang_decode"

    running_req: int | None = None
    gen_throughput: float | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    token: int | None = None
    token_usage: float | None = None
    queue_req: int | None = None
    graph: str | None = None  # "cuda", "cpu", "npu"...
    graph_used: bool | None = None
    iteration: int | None = None  # the " [N]" forward count some versions print
    timestamp: str | None = None
    ranks: str | None = None
    extra: dict[str, Value] = field(default_factory=dict)  # every other "key: number" field (hybrid tokens...)
