"""llama.cpp's ``llama-server``: everything specsweep knows about it, each definition with its source file.

``log`` (``print_timings`` and the speculative statistics lines, assembled per request), ``responses``
(``timings`` of the last chunk), ``simdialect`` (the simulator's imitation of it). Its ``/metrics`` counters
are read by the shared counter derivation under the ``llamacpp:`` prefix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.engines.base import ADDRESS, Call, Edges, EngineBase, WindowFigures

if TYPE_CHECKING:
    from orchestrator.engines.responses import ResponseFields
    from orchestrator.engines.samples import ParseResult
    from orchestrator.engines.starter import Starter
    from orchestrator.sim.dialects.base import Dialect

__all__ = ["ENGINE", "LlamaCpp"]


@dataclass(frozen=True)
class LlamaCpp(EngineBase):
    def flush_cache(self, call: Call) -> tuple[bool, str | None] | None:
        from orchestrator.engines.llamacpp.control import flush_cache

        return flush_cache(call)

    def response_fields(self) -> ResponseFields:
        from orchestrator.engines.llamacpp.responses import FIELDS

        return FIELDS

    def starter(self, host: str) -> Starter:
        from orchestrator.engines.llamacpp.starter import llamacpp_starter

        return llamacpp_starter(host)

    def sim_dialect(self) -> type[Dialect]:
        from orchestrator.engines.llamacpp.simdialect import LlamaCppDialect

        return LlamaCppDialect

    def parse_log(self, text: str) -> ParseResult:
        from orchestrator.engines.llamacpp.log import parse_llamacpp

        return parse_llamacpp(text)

    def aggregate(self, result: ParseResult, *, edges: Edges, version: str | None) -> WindowFigures:
        from orchestrator.engines.llamacpp.log import DEFINITIONS, aggregate_llamacpp
        from orchestrator.engines.llamacpp.samples import LlamaRequestSample

        # One sample per request, already assembled: no interval edges. Whether the window's start cuts into
        # what ran before it (a sweep's window) or the log is read whole (`specsweep parse`) decides whether a
        # request launched before the text is left out (DEFINITIONS' window_edge): ``edges`` leaves out a
        # group's first line exactly when the window was cut at its start.
        requests = [s for s in result.samples if isinstance(s, LlamaRequestSample)]
        probe = LlamaRequestSample()
        cut = len(edges([probe, probe])[0]) < 2
        return WindowFigures(aggregate_llamacpp(requests, cut=cut), dict(DEFINITIONS), intervals=False)

    def derive_prometheus(self, window: Any, after: Any, generated: float | None, version: str | None) -> None:
        from orchestrator.engines.llamacpp.prometheus import derive

        derive(window, after, generated, version)


def _engine() -> LlamaCpp:
    from orchestrator.engines.exposition import COUNTER_DEFINITIONS
    from orchestrator.engines.llamacpp.log import MARKERS

    return LlamaCpp(
        name="llamacpp",
        summary="llama.cpp (llama-server): print_timings and draft statistics lines, llamacpp: metrics",
        markers=MARKERS,
        prometheus_prefix="llamacpp:",
        prometheus_definitions=COUNTER_DEFINITIONS,
        # tools/server/server-context.cpp post_slots: one POST per slot after GET /slots
        flush_path="/slots/{id}?action=erase",
        # tools/server: GET /props -> build_info
        health_paths=("/health",),
        info_paths=("/props",),
        version_key="build_info",
        info_settings=("model_path", "total_slots", "n_ctx"),
        info_settings_object="default_generation_settings",
        # tools/server/server.cpp: "server is listening on http://HOST:PORT" (older builds "listening on ...")
        listening_patterns=(("llama.cpp", re.compile(r"(?:^|\s|:)(?:server is )?listening on " + ADDRESS)),),
        start_patterns=(
            # Once per start (the tree vendored in llama-cpp-python 0.3.36): tools/server/server.cpp prints
            # SRV_INF("initializing ...") after parsing its arguments ("srv  llama_server: initializing ..."),
            # then calls common/common.cpp common_params_print_info, which prints "verbosity = %d (adjust with
            # the `-lv N` CLI arg)" at INFO and, at trace level (-lv 4), "build %d (%s) with %s for %s" and
            # common_params_get_system_info's "system_info: n_threads = %d ..." (earlier trees printed
            # "build: %d (%s) with %s for %s" and "system info: n_threads = ..." from server.cpp at INFO).
            ("llama.cpp", re.compile(r"srv +\S+: initializing \.\.\.[ \t]*$", re.MULTILINE)),
            ("llama.cpp", re.compile(r"common_params_print_info: verbosity = \d+")),
            ("llama.cpp", re.compile(r"build:? \d+ \([^)\n]*\) with [^\n]* for ")),
            ("llama.cpp", re.compile(r"system[_ ]info: n_threads = \d+")),
        ),
        no_batch_schedule=(
            "llama.cpp's server takes static draft bounds only (--spec-draft-n-max, --spec-draft-n-min), "
            "nothing per batch size"
        ),
    )


ENGINE = _engine()
