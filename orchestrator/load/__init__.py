"""The load generator: an asyncio streaming client for OpenAI-compatible, SGLang and llama.cpp servers.

    from orchestrator.load import LoadSettings, run_load
    result = await run_load(LoadSettings(url="http://127.0.0.1:30001", model="sim", concurrency=8, requests=64))
    result.to_dict()   # concurrency, requests, errors, output_tok_s, ttft_ms {mean,p50,p90,p99}, spec, ...

Modules, each with one job: ``settings`` (what to run), ``workloads`` (prompts), ``sse`` (the event-stream
reader), ``decoders`` (what each API's responses mean), ``records`` (one request as measured), ``client`` (HTTP,
error kinds), ``loops`` (closed and open loop), ``stats`` (the figures and their definitions), ``run`` (glue),
``workers`` (one point shared by several processes, one merged result), ``eventloop`` (uvloop when installed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.faces import lazy_face
from orchestrator.load.settings import API_PATHS, LoadSettings

if TYPE_CHECKING:
    from orchestrator.load.records import RequestRecord
    from orchestrator.load.run import LoadProgress, LoadResult, run_load
    from orchestrator.load.workloads import Prompt, Workload, load_workload

# aiohttp takes most of a second to import: the rest loads on first use (PEP 562), so commands that only
# need the settings (`specsweep --help`, `validate`, `plan`) start fast.
_LAZY = {
    "RequestRecord": "orchestrator.load.records",
    "LoadProgress": "orchestrator.load.run",
    "LoadResult": "orchestrator.load.run",
    "run_load": "orchestrator.load.run",
    "Prompt": "orchestrator.load.workloads",
    "Workload": "orchestrator.load.workloads",
    "load_workload": "orchestrator.load.workloads",
}


__getattr__ = lazy_face(__name__, _LAZY)


__all__ = [
    "API_PATHS",
    "LoadProgress",
    "LoadResult",
    "LoadSettings",
    "Prompt",
    "RequestRecord",
    "Workload",
    "load_workload",
    "run_load",
]
