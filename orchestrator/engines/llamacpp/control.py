"""llama.cpp's control endpoints beyond health: erasing every slot's cache.

``GET /slots`` lists the slots, then ``POST /slots/{id}?action=erase`` per slot (tools/server/server-context.cpp
``post_slots``, ``handle_slots_erase``); the slot actions need ``--slot-save-path`` (501 without it).
"""

from __future__ import annotations

import json

from orchestrator.engines.base import Call

__all__ = ["flush_cache"]


def flush_cache(call: Call) -> tuple[bool, str | None]:
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
        return False, "llama-server lists no slots (started with --no-slots): nothing was erased"
    if not slots:
        return False, None
    answers = [call("POST", f"/slots/{slot}?action=erase")[0] for slot in slots]
    note = "llama-server erases slots only when started with --slot-save-path" if 501 in answers else None
    return all(a == 200 for a in answers), note
