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
        from orchestrator.engines.vllm.log import DEFINITIONS, aggregate_vllm, log_rounds

        spec, dropped, kept = edges([s for s in result.samples if isinstance(s, VllmSpecSample)])
        engines, e_dropped, e_kept = edges([s for s in result.samples if isinstance(s, VllmEngineSample)])
        # The throughput is the rounds' (one log() call each), cut at the window's start as a whole round.
        figures = aggregate_vllm(spec, engines, rounds=log_rounds(result.samples), edges=edges)
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
        start_patterns=(
            # Once per API server start: 0.33.0 entrypoints/launchers/launcher.py setup_server ->
            # entrypoints/common/startup.py log_version_and_model, "vLLM server version %s, serving model %s"
            # (VLLM_DISABLE_LOG_LOGO, or a logger without vLLM's formatter), else the logo, whose second line
            # ends "█ ▀▄▀ █  version %s" (colour codes around it on a terminal); 0.8.x-0.9.x
            # entrypoints/openai/api_server.py run_server, "vLLM API server version %s".
            ("vllm", re.compile(r"vLLM (?:API )?server version \S+")),
            ("vllm", re.compile(r"█ ▀▄▀ █(?:\x1b\[[0-9;]*m)?\s+version\b")),
            # Process identity: 0.33.0 vllm/logger.py _FORMAT "(%(vllm_process_name)s pid=%(process)d) LEVEL ..."
            # before every message; the API server is "APIServer" (launchers/api_server/entry.py decorate_logs)
            # or "ApiServer_<i>" with several (v1/utils.py APIServerProcessManager): a new pid is a new process.
            (
                "vllm",
                re.compile(
                    r"\((?P<proc>APIServer|ApiServer_\d+) pid=(?P<pid>\d+)\) (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
                ),
            ),
        ),
    )


ENGINE = _engine()
