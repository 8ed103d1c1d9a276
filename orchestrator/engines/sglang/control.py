"""SGLang's control endpoints beyond health: emptying the prefix cache.

``POST /flush_cache`` (python/sglang/srt/entrypoints/http_server.py ``flush_cache``, 0.5.23): 200 when the
scheduler was idle and flushed, else 400 with the reason.
"""

from __future__ import annotations

from orchestrator.engines.base import Call

__all__ = ["flush_cache"]


def flush_cache(call: Call) -> tuple[bool, str | None]:
    status, _ = call("POST", "/flush_cache")
    if status == 400:
        return False, "SGLang did not flush: requests were still running or waiting"
    if status == 404:
        return False, "the server has no /flush_cache (not SGLang?)"
    return status == 200, None
