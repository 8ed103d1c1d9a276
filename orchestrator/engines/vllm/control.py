"""vLLM's control endpoints beyond health: resetting the prefix cache.

``POST /reset_prefix_cache`` (vllm/entrypoints/serve/dev/cache/api_router.py, 0.33.0), registered only with
``VLLM_SERVER_DEV_MODE=1``; 0.33.0 answers ``{"success": bool}``, 0.9.2 an empty 200.
"""

from __future__ import annotations

import json

from orchestrator.engines.base import Call

__all__ = ["flush_cache"]


def flush_cache(call: Call) -> tuple[bool, str | None]:
    status, body = call("POST", "/reset_prefix_cache")
    if status == 200:
        try:
            answer = json.loads(body) if body else {}
        except ValueError:
            answer = {}
        ok = not isinstance(answer, dict) or answer.get("success", True) is not False
        return ok, None if ok else "vLLM did not reset its prefix cache: blocks were still held"
    if status == 404:
        return False, "vLLM has no /reset_prefix_cache unless the server runs with VLLM_SERVER_DEV_MODE=1"
    return False, None
