"""What the running server says about itself: the engine's version and the settings that change definitions.

Read once per deployment, right after the server is healthy, and kept in every record of that deployment
(``Record.engine_info``), so a figure whose definition changed between engine versions (SGLang's ``accept
rate``, see docs/engines.md) is read with the right one, and a report can say what ran.

Where each engine says it (docs/engines.md, "Engine version"):

- SGLang: ``GET /server_info`` (0.5.23; ``/get_server_info`` before, kept as a deprecated alias) returns
  ``{**server_args, **scheduler_info, "internal_states": [...], "version": __version__}``
  (python/sglang/srt/entrypoints/http_server.py, ``get_server_info``). The
  server arguments include the speculative settings (``speculative_algorithm``,
  ``speculative_num_draft_tokens`` ...) and the parallelism (``tp_size``, ``dp_size``,
  ``enable_dp_attention``), which are kept as read.
- vLLM: ``GET /version`` returns ``{"version": VLLM_VERSION}`` (vllm/entrypoints/openai/api_server.py; 0.33:
  vllm/entrypoints/serve/instrumentator/basic.py).
- llama.cpp: ``GET /props`` returns ``build_info`` (``b<build>-<commit>``) among its properties
  (tools/server/server.cpp, ``handle_props``).
- The simulator answers ``/get_server_info`` like SGLang, with its own version.

Nothing here raises: an engine that does not answer gives ``version: None`` and the reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from orchestrator.engines.registry import get_engine, is_engine

__all__ = ["engine_info_from", "read_engine_info"]


def engine_info_from(engine: str, path: str, status: int | None, body: str | None) -> dict[str, Any]:
    """The engine info record from one answer of the engine's info endpoint (pure; tested on real bodies)."""
    known = get_engine(engine) if is_engine(engine) else None
    key = known.version_key if known is not None else "version"
    info: dict[str, Any] = {"engine": engine, "version": None, "source": f"GET {path} .{key}", "settings": {}}
    if body is None or status != 200:
        info["error"] = "no answer" if status is None else f"HTTP {status}"
        return info
    try:
        data = json.loads(body)
    except ValueError:
        info["error"] = "the answer is not JSON"
        return info
    if not isinstance(data, dict):
        info["error"] = "the answer is not a JSON object"
        return info
    version = data.get(key)
    info["version"] = str(version) if isinstance(version, str | int | float) else None
    kept = known.info_settings if known is not None else ()
    nested = known.info_settings_object if known is not None else None
    settings = data.get(nested) if nested else None
    for name in kept:
        if name in data and isinstance(data[name], str | int | float | bool | type(None)):
            info["settings"][name] = data[name]
        elif isinstance(settings, dict) and name in settings:
            info["settings"][name] = settings[name]
    if info["version"] is None:
        info["error"] = f"no {key!r} in the answer"
    return info


def read_engine_info(engine: str, fetch: Callable[[str], tuple[int | None, str | None]]) -> dict[str, Any]:
    """Ask the server through ``fetch(path) -> (status, body)`` (``(None, None)`` when it did not answer),
    each of the engine's paths in turn until one gives a version."""
    paths = get_engine(engine).info_paths if is_engine(engine) else ("/version",)
    info: dict[str, Any] = {}
    for path in paths:
        status, body = fetch(path)
        info = engine_info_from(engine, path, status, body)
        if info["version"] is not None or status is None:
            break
    return info
