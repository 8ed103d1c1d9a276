"""A point's status in the analysis: the record's (``ok``, ``failed``, ``skipped``), or ``degraded`` for an ok
point that lost more than ``checks.degraded_requests`` of its requests (``orchestrator/analysis/answer.py``)."""

from __future__ import annotations

__all__ = ["MEASURED", "STATUSES"]

#: Every status a point of the answer may have, in the order counts are shown.
STATUSES = ("ok", "degraded", "failed", "skipped")
#: The statuses of a point with figures (a degraded point keeps its figures; it is not ranked unless asked).
MEASURED = ("ok", "degraded")
