"""The records a run planned (issue 49).

A record of a point its run never planned (a line added to records.jsonl by hand or by another tool) is left
out of the analysis, as a skipped line that says so (:func:`within_plan`): counted, it made "9 ok of 8
planned" and a point row no plan names.
"""

from __future__ import annotations

from typing import Any

from orchestrator.runs.record import Record
from orchestrator.runs.store import SkippedLine

__all__ = ["within_plan"]


def within_plan(
    records: list[Record], plan: dict[str, Any], kind: str | None
) -> tuple[list[Record], list[SkippedLine]]:
    """``records`` without those of a point ``plan`` does not hold, and a skipped line for each left out.

    Only a sweep's plan names every point it measures (a search deploys what its strategy proposes; a baseline
    reused from an earlier run, ``baseline_source``, left the plan); a run without a plan keeps every record."""
    deployments = plan.get("deployments") if isinstance(plan, dict) else None
    if kind not in (None, "sweep") or not isinstance(deployments, list) or not deployments:
        return records, []
    planned = {
        point.get("id")
        for dep in deployments
        if isinstance(dep, dict)
        for point in dep.get("load_points") or []
        if isinstance(point, dict)
    }
    planned.update(plan.get("decide_point_ids") or [])  # the rounds of load.decide (orchestrator/plan/deciding.py)
    kept: list[Record] = []
    outside: list[SkippedLine] = []
    for record in records:
        if record.point_id in planned or record.baseline_source:
            kept.append(record)
            continue
        outside.append(
            SkippedLine(
                0,
                f"a record of point {record.point_id!r} (deployment {record.deployment_id!r}, host "
                f"{record.host!r}), which plan.json does not hold: left out of every count",
                f"{record.variant} {record.params}",
            )
        )
    return kept, outside
