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

import json
import threading
from collections.abc import Callable
from typing import Any

import httpx

__all__ = ["FLUSH_PATHS", "flush_prefix_cache", "post"]

#: The request each engine's flush is (llama.cpp: one per slot, after ``GET /slots``).
FLUSH_PATHS = {
    "sglang": "/flush_cache",
    "vllm": "/reset_prefix_cache",
    "llamacpp": "/slots/{id}?action=erase",
}

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
    try:
        response = client.request(method, url + path, headers=headers)
    except httpx.HTTPError:
        return None, None
    return response.status_code, response.text


def _short(body: str | None) -> str | None:
    if body is None:
        return None
    text = " ".join(body.split())
    return text[:200]


def flush_prefix_cache(url: str, engine: str, api_key: str | None, *, request: Request = post) -> dict[str, Any]:
    """Empty the prefix cache of the server at ``url`` (see the module docstring); what it answered."""
    kind = "sglang" if engine == "sim" else engine
    calls: list[dict[str, Any]] = []

    def call(method: str, path: str) -> tuple[int | None, str | None]:
        status, body = request(method, url, path, api_key)
        calls.append({"method": method, "path": path, "status": status, "body": _short(body)})
        return status, body

    note: str | None = None
    ok = False
    if kind == "sglang":
        status, body = call("POST", "/flush_cache")
        ok = status == 200
        if status == 400:
            note = "SGLang did not flush: requests were still running or waiting"
        elif status == 404:
            note = "the server has no /flush_cache (not SGLang?)"
    elif kind == "vllm":
        status, body = call("POST", "/reset_prefix_cache")
        if status == 200:
            try:
                answer = json.loads(body) if body else {}
            except ValueError:
                answer = {}
            ok = not isinstance(answer, dict) or answer.get("success", True) is not False
            if not ok:
                note = "vLLM did not reset its prefix cache: blocks were still held"
        elif status == 404:
            note = "vLLM has no /reset_prefix_cache unless the server runs with VLLM_SERVER_DEV_MODE=1"
    elif kind == "llamacpp":
        status, body = call("GET", "/slots")
        slots: list[int] = []
        if status == 200 and body:
            try:
                listed = json.loads(body)
            except ValueError:
                listed = []
            if isinstance(listed, list):
                slots = [s["id"] for s in listed if isinstance(s, dict) and isinstance(s.get("id"), int)]
        if status == 501:
            note = "llama-server lists no slots (started with --no-slots): nothing was erased"
        elif slots:
            answers = [call("POST", f"/slots/{slot}?action=erase")[0] for slot in slots]
            ok = all(a == 200 for a in answers)
            if any(a == 501 for a in answers):
                note = "llama-server erases slots only when started with --slot-save-path"
    else:
        note = f"no prefix-cache flush is known for engine {engine!r}"
    if not calls or all(c["status"] is None for c in calls):
        note = note or "the server did not answer"
    return {"engine": kind, "ok": ok, "requests": calls, "note": note}
