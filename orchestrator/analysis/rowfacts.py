"""A point's label and its lost requests, without pandas: what the frame (``frame.py``), the result
(``result.py``) and the listing's quick counts (``quickcounts.py``, which ``ls`` runs without importing pandas)
all say the same way, from one definition."""

from __future__ import annotations

from typing import Any

from orchestrator.quoting import visible

__all__ = ["config_label", "lost_requests"]


def config_label(variant: str, params: dict[str, Any]) -> str:
    """``ddtree(budget=7, topk=1)``: the same text as the plan's deployment label."""
    if not params:
        return visible(variant)
    return visible(variant + "(" + ", ".join(f"{k}={_text(v)}" for k, v in params.items()) + ")")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _number(value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    return number if number == number else 0.0


def lost_requests(row: dict[str, object]) -> tuple[int, int]:
    """(requests lost, requests sent) of one point: failed plus cancelled, of every request it sent."""
    errors, cancelled, requests = (_number(row.get(k)) for k in ("errors", "cancelled", "requests"))
    return int(errors + cancelled), int(requests + cancelled)
