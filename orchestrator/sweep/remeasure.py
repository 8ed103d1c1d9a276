"""A point measured again because the server restarted inside its window (issue 27): the first record's error
kind, its evidence, and whether the server came back as the deployment it was."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.runs.store import Record

__all__ = ["REMEASURED", "configuration", "configuration_changed", "first_of_two", "start_lines"]


#: The error kind of a point's first record when the server restarted inside its window and it was measured
#: again (status ``failed``, so every reader leaves its figures out; the next attempt is the point's record).
REMEASURED = "window_restart"


def start_lines(server: dict[str, Any] | None) -> list[str]:
    """The start-up lines of the restart a window holds (``details.restart``, orchestrator/metrics/window.py)."""
    restart = ((server or {}).get("details") or {}).get("restart") or {}
    return [str(line) for start in restart.get("starts") or () for line in start.get("lines") or ()][:20]


def configuration(info: dict[str, Any] | None) -> str:
    info = info or {}
    settings = ", ".join(f"{k}={v}" for k, v in (info.get("settings") or {}).items())
    return f"version {info.get('version')}" + (f", {settings}" if settings else "")


def configuration_changed(before: dict[str, Any] | None, after: dict[str, Any] | None) -> bool:
    """Whether the server says of itself another version or settings than when it was deployed (unknown: no)."""
    if not before or not after or before.get("version") is None or after.get("version") is None:
        return False
    return before.get("version") != after.get("version") or before.get("settings") != after.get("settings")


def first_of_two(record: Record, why: str) -> Record:
    """The point's record of a window the server restarted in, kept as its first: failed (``window_restart``),
    with the restart's start-up lines as evidence and the status it was measured with."""
    return record.model_copy(
        update={
            "status": "failed",
            "error": {
                "kind": REMEASURED,
                "message": f"{why}; the point is measured again (attempt {record.attempt + 1})",
                "evidence": start_lines(record.server),
                "status_measured": record.status,
            },
        }
    )
