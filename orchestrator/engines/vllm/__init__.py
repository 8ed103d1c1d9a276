"""vLLM: everything specsweep knows about it, each definition with the vLLM source file it comes from.

``log`` (``SpecDecoding metrics:`` and ``Engine NNN:`` interval lines, V0's ``Speculative metrics:``),
``prometheus`` (V1 counters; V0's cumulative spec counters left unread), ``responses`` (the per-request
``metrics.speculative_decoding``), ``simdialect`` (the simulator's imitation of it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.engines.base import ADDRESS, Call, Edges, EngineBase, WindowFigures

if TYPE_CHECKING:
    from orchestrator.engines.samples import ParseResult

__all__ = ["ENGINE", "VLLM"]


@dataclass(frozen=True)
class VLLM(EngineBase):
    def flush_cache(self, call: Call) -> tuple[bool, str | None] | None:
        from orchestrator.engines.vllm.control import flush_cache

        return flush_cache(call)

    def parse_log(self, text: str) -> ParseResult:
        from orchestrator.engines.vllm.log import parse_vllm

        return parse_vllm(text)

    def aggregate(self, result: ParseResult, *, edges: Edges, version: str | None) -> WindowFigures:
        from orchestrator.engines.samples import VllmEngineSample, VllmSpecSample
        from orchestrator.engines.vllm.log import DEFINITIONS, aggregate_vllm

        spec, dropped, kept = edges([s for s in result.samples if isinstance(s, VllmSpecSample)])
        engines, e_dropped, e_kept = edges([s for s in result.samples if isinstance(s, VllmEngineSample)])
        figures = aggregate_vllm(spec, engines)
        return WindowFigures(figures, dict(DEFINITIONS), dropped + e_dropped, kept + e_kept)

    def derive_prometheus(self, window: Any, after: Any, generated: float | None, version: str | None) -> None:
        from orchestrator.engines.vllm.prometheus import derive

        derive(window, after, generated, version)


def _engine() -> VLLM:
    from orchestrator.engines.exposition import COUNTER_DEFINITIONS
    from orchestrator.engines.vllm.log import MARKERS
    from orchestrator.engines.vllm.prometheus import PREFIX

    return VLLM(
        name="vllm",
        summary="vLLM (vllm serve): SpecDecoding metrics lines, vllm: metrics",
        markers=MARKERS,
        prometheus_prefix=PREFIX,
        prometheus_definitions=COUNTER_DEFINITIONS,
        # vllm/entrypoints/serve/dev/cache/api_router.py (0.33.0), only with VLLM_SERVER_DEV_MODE=1
        flush_path="/reset_prefix_cache",
        # vllm/entrypoints/openai/api_server.py: GET /version -> {"version": ...}
        health_paths=("/health", "/v1/models"),
        info_paths=("/version",),
        version_key="version",
        # vllm/entrypoints/openai/api_server.py: "Starting vLLM API server %d on %s" before serve_http listens
        listening_patterns=(("vllm", re.compile(r"Starting vLLM (?:API )?server(?: \d+)? on " + ADDRESS)),),
    )


ENGINE = _engine()
