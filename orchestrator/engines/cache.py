"""Emptying a server's prefix cache before a load point (``load.flush_cache``), in each engine's own way.

A prefix cache that holds the previous point's prompts makes the next point's first tokens cheaper than a cold
server's would be; a sweep that flushes before every point measures every point from the same state. What each
engine offers (read in its own source):

- SGLang: ``GET`` or ``POST /flush_cache`` (python/sglang/srt/entrypoints/http_server.py ``flush_cache``, 0.5.23):
  200 with the text ``Cache flushed.`` when the scheduler was idle and flushed (the scheduler logs ``Cache flushed
  successfully!``, python/sglang/srt/managers/scheduler.py ``flush_cache``, which also resets the decode-log
  interval's accumulators, ``metrics_reporter.reset_metrics``), else 400 with the reason (``Cache not flushed
  because there are pending requests``). An optional ``timeout`` query waits that long for idleness.
- vLLM: ``POST /reset_prefix_cache`` (vllm/entrypoints/serve/dev/cache/api_router.py, 0.33.0), registered only
  when the server runs with ``VLLM_SERVER_DEV_MODE=1`` (vllm/entrypoints/launchers/api_server/routers.py; a
  404 otherwise). 0.33.0 answers ``{"success": bool}`` (false while blocks are held by running requests);
  0.9.2 answers an empty 200 (vllm/entrypoints/openai/api_server.py). It logs ``Resetting prefix cache...``.
- llama.cpp: ``GET /slots`` lists the slots (``id`` each; on by default, ``--no-slots`` turns it off and it
  answers 501), then ``POST /slots/{id}?action=erase`` per slot (tools/server/server-context.cpp
  ``post_slots``, ``handle_slots_erase``), answered ``{"id_slot": n, "n_erased": tokens}``. The slot actions
  exist only when the server runs with ``--slot-save-path``; without it they answer 501
  ``not_supported_error`` ("This server does not support slots action"). llama.cpp vendored in
  llama-cpp-python 0.3.36.
- The simulator answers them as the engine of its dialect does (orchestrator/sim/dialects/).

:func:`flush_prefix_cache` never raises: what the server answered is the result, recorded in the point's record
(``cache_flush``: ``ok``, the requests made, and a ``note`` saying what to change when the engine refused).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx

from orchestrator.engines.controlplane import request
from orchestrator.engines.registry import get_engine, is_engine

__all__ = ["flush_prefix_cache", "post"]


_client: httpx.Client | None = None
_lock = threading.Lock()

Request = Callable[[str, str, str, str | None], tuple[int | None, str | None]]


def post(method: str, url: str, path: str, api_key: str | None) -> tuple[int | None, str | None]:
    """``(status, body)`` of one control-plane request; ``(None, None)`` when the server did not answer."""
    global _client
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with _lock:
        if _client is None:
            _client = httpx.Client(timeout=30.0, trust_env=False)
        client = _client
    # a flush waits for the server to be idle: 30 s in all, like the per-read timeout it had
    answer = request(client, method, url + path, headers=headers, deadline_s=30.0)
    return answer.status, answer.text


def _short(body: str | None) -> str | None:
    if body is None:
        return None
    text = " ".join(body.split())
    return text[:200]


def flush_prefix_cache(url: str, engine: str, api_key: str | None, *, request: Request = post) -> dict[str, Any]:
    """Empty the prefix cache of the server at ``url`` (see the module docstring); what it answered."""
    kind = get_engine(engine).family if is_engine(engine) else engine
    calls: list[dict[str, Any]] = []

    def call(method: str, path: str) -> tuple[int | None, str | None]:
        status, body = request(method, url, path, api_key)
        calls.append({"method": method, "path": path, "status": status, "body": _short(body)})
        return status, body

    known = get_engine(engine) if is_engine(engine) else None
    answer = known.flush_cache(call) if known is not None else None
    ok, note = answer if answer is not None else (False, f"no prefix-cache flush is known for engine {engine!r}")
    if not calls or all(c["status"] is None for c in calls):
        note = note or "the server did not answer"
    return {"engine": kind, "ok": ok, "requests": calls, "note": note}
