"""The records a run planned (issue 49).

A record of a point its run never planned (a line added to records.jsonl by hand or by another tool) is left
out of the analysis, as a skipped line that says so (:func:`within_plan`): counted, it made "9 ok of 8
planned" and a point row no plan names. So is a record of a planned point at another load than the plan's
(issue 58, S10: a point planned at C=8 whose record says C=16 became a load of its own, with a winner); a load
of no request (a concurrency below 1, a rate not above 0) is refused by the record's own validation.
"""

from __future__ import annotations

from typing import Any

from orchestrator.runs.record import Record
from orchestrator.runs.store import SkippedLine

__all__ = ["load_of", "within_plan"]


def load_of(mode: Any, concurrency: Any, rate: Any) -> tuple[Any, ...]:
    """A load as a point names it: (mode, its concurrency or its rate), to compare a record's with its plan's."""
    if mode == "rate":
        return (mode, float(rate) if isinstance(rate, int | float) and not isinstance(rate, bool) else rate)
    return (mode, concurrency)


def within_plan(
    records: list[Record], plan: dict[str, Any], kind: str | None
) -> tuple[list[Record], list[SkippedLine]]:
    """``records`` without those of a point ``plan`` does not hold, and a skipped line for each left out.

    Only a sweep's plan names every point it measures (a search deploys what its strategy proposes; a baseline
    reused from an earlier run, ``baseline_source``, left the plan); a run without a plan keeps every record."""
    deployments = plan.get("deployments") if isinstance(plan, dict) else None
    if kind not in (None, "sweep") or not isinstance(deployments, list) or not deployments:
        return records, []
    loads = {
        point.get("id"): load_of(point.get("mode"), point.get("concurrency"), point.get("rate"))
        for dep in deployments
        if isinstance(dep, dict)
        for point in dep.get("load_points") or []
        if isinstance(point, dict)
    }
    planned = set(loads)
    planned.update(plan.get("decide_point_ids") or [])  # the rounds of load.decide (orchestrator/plan/deciding.py)
    kept: list[Record] = []
    outside: list[SkippedLine] = []
    for record in records:
        if record.baseline_source:
            kept.append(record)
            continue
        load = load_of(record.mode, record.concurrency, record.rate)
        if record.point_id in planned and loads.get(record.point_id, load) != load:
            outside.append(
                SkippedLine(
                    0,
                    f"a record of point {record.point_id!r} (deployment {record.deployment_id!r}, host "
                    f"{record.host!r}) at {_said(load)}, which plan.json plans at "
                    f"{_said(loads[record.point_id])}: left out of every count",
                    f"{record.variant} {record.params}",
                )
            )
            continue
        if record.point_id in planned:
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


def _said(load: tuple[Any, ...]) -> str:
    mode, value = load
    return f"C={value}" if mode == "concurrency" else f"{value} requests/s" if mode == "rate" else f"{mode} {value}"
