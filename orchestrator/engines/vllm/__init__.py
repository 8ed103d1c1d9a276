"""vLLM: everything specsweep knows about it, each definition with the vLLM source file it comes from.

``log`` (``SpecDecoding metrics:`` and ``Engine NNN:`` interval lines, V0's ``Speculative metrics:``),
``prometheus`` (V1 counters; V0's cumulative spec counters left unread), ``responses`` (the per-request
``metrics.speculative_decoding``), ``simdialect`` (the simulator's imitation of it).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.engines.base import ADDRESS, Call, Edges, EngineBase, WindowFigures

if TYPE_CHECKING:
    from orchestrator.engines.responses import ResponseFields
    from orchestrator.engines.samples import ParseResult
    from orchestrator.engines.starter import Starter
    from orchestrator.sim.dialects.base import Dialect

__all__ = ["DEFAULT_STATS_INTERVAL", "ENGINE", "VLLM", "stats_interval"]

#: vllm/envs.py (0.32.0, line 48 and 866): ``VLLM_LOG_STATS_INTERVAL`` is 10.0 unless the environment sets a
#: number above 0 (0 or less falls back to 10.0). The API server's lifespan task logs every engine's stats that
#: often: vllm/entrypoints/launchers/utils/server_utils.py ``_force_log`` (``asyncio.sleep`` then
#: ``engine_client.do_log_stats()``), only when log stats are on (``--disable-log-stats`` turns them off,
#: vllm/engine/arg_utils.py).
DEFAULT_STATS_INTERVAL = 10.0
_INTERVAL_VAR = "VLLM_LOG_STATS_INTERVAL"
_ASSIGNED = re.compile(r"(?:^|[\s'\"])" + _INTERVAL_VAR + r"=([^\s'\";]+)")
# The simulator's spelling of the same setting for its vLLM dialect (orchestrator/sim/config.py).
_SIM_FLAG = re.compile(r"--log-stats-interval[= ]([0-9.]+)")
# The stats tick up to its first figure (LoggingStatLogger.log, vllm/v1/metrics/loggers.py): "Engine %03d: "
# before it when the logger has an engine index.
_TICK = r"^.*?(?:\bEngine (?P<engine>\d+): )?\bAvg prompt throughput: "


def stats_interval(command: str | None, environment: Mapping[str, str]) -> float | None:
    """Seconds between vLLM's stats ticks for a server started with ``command`` and ``environment`` (see
    DEFAULT_STATS_INTERVAL); None when the command turns log stats off. A ``VLLM_LOG_STATS_INTERVAL=N`` in the
    command (``sh -c 'VAR=N exec ...'``, ``env VAR=N ...``) wins over the environment, as the shell does."""
    text = command or ""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    if "--disable-log-stats" in words or "--disable-log-stats" in text:
        return None
    found = _ASSIGNED.findall(text) or _SIM_FLAG.findall(text)
    raw = found[-1] if found else environment.get(_INTERVAL_VAR)
    try:
        value = float(raw) if raw is not None else DEFAULT_STATS_INTERVAL
    except ValueError:
        value = DEFAULT_STATS_INTERVAL
    return value if value > 0 else DEFAULT_STATS_INTERVAL


@dataclass(frozen=True)
class VLLM(EngineBase):
    def flush_cache(self, call: Call) -> tuple[bool, str | None] | None:
        from orchestrator.engines.vllm.control import flush_cache

        return flush_cache(call)

    def stats_interval(self, command: str | None, environment: Mapping[str, str]) -> float | None:
        return stats_interval(command, environment)

    def response_fields(self) -> ResponseFields:
        from orchestrator.engines.vllm.responses import FIELDS

        return FIELDS

    def starter(self, host: str) -> Starter:
        from orchestrator.engines.vllm.starter import vllm_starter

        return vllm_starter(host)

    def sim_dialect(self) -> type[Dialect]:
        from orchestrator.engines.vllm.simdialect import VLLMDialect

        return VLLMDialect

    def parse_log(self, text: str) -> ParseResult:
        from orchestrator.engines.vllm.log import parse_vllm

        return parse_vllm(text)

    def aggregate(self, result: ParseResult, *, edges: Edges, version: str | None) -> WindowFigures:
        from orchestrator.engines.vllm.log import DEFINITIONS, aggregate_vllm, log_rounds
        from orchestrator.engines.vllm.samples import VllmEngineSample, VllmSpecSample

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
        # The tick: LoggingStatLogger.log prints "Engine %03d: Avg prompt throughput: ..." every interval
        # (vllm/v1/metrics/loggers.py line 335 in 0.32.0; at DEBUG when this and the previous interval were idle),
        # and SpecDecodingLogging.log the interval's spec line right after it (vllm/v1/spec_decode/metrics.py line
        # 120). "Avg prompt throughput" alone: V0 and aggregated logging print no engine index.
        tick_patterns=(re.compile(_TICK, re.MULTILINE),),
        # An empty engine's idle interval (both throughputs print 0.0; LoggingStatLogger._update_stats calls the
        # engine idle when they and the previous interval's are 0, and log() then uses logger.debug).
        idle_tick_patterns=(
            re.compile(
                _TICK + r"0\.0 tokens/s, Avg generation throughput: 0\.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs\b",
                re.MULTILINE,
            ),
        ),
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
