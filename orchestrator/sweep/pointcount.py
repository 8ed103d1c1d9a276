"""The sweep's count of points as the answer counts them (issue 37): a configuration at a load, on a host, its
repeats and restarts combined (``orchestrator/analysis/frame.py``, ``planned_points``), not its measurements.

The schedule works in measurements (a repeat, a restart, a measurement taken again are each a load point of
their own); the live progress line says ``[n/N]`` in points, so it agrees with ``ls``, the ending and the plan:
a point counts as done when every measurement the plan holds of it is final (each counted once, however often
it was measured), and ``N`` is the schedule's measurements with each point's measurements counted once. A
shared point of a pool of hosts (measured on one of them) is one point; a baseline measured on every host is
one point per host, as the records hold it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from orchestrator.plan.deployments import Plan
    from orchestrator.runs.store import Record

__all__ = ["PointCount"]

_Key = tuple[str, str, Any, Any, str]


def _key(config_hash: str, mode: str, concurrency: Any, rate: Any, workload: Any) -> _Key:
    return (
        config_hash,
        mode,
        concurrency if mode == "concurrency" else None,
        rate if mode == "rate" else None,
        str(workload or ""),
    )


class PointCount:
    """Points of one sweep: how many there are (:attr:`total`) and how many are done (:attr:`done`)."""

    def __init__(self, plan: Plan, measurements: int, *, pooled: bool) -> None:
        self._pooled = pooled
        self._of: dict[_Key, set[str]] = {}
        for deployment in plan.deployments:
            for point in deployment.load_points:
                key = _key(deployment.config_hash, point.mode, point.concurrency, point.rate, point.workload)
                self._of.setdefault(key, set()).add(point.id)
        per_point = plan.load_point_count / len(self._of) if self._of else 1.0
        #: The points to measure: the schedule's ``measurements`` (a pool's baselines once per host), each
        #: point's measurements counted once.
        self.total = round(measurements / per_point) if per_point else measurements
        self._final: dict[tuple[str, _Key], set[str]] = {}
        self._done: set[tuple[str, _Key]] = set()

    def add(self, record: Record) -> None:
        """A final record (ok or failed; a skipped one measured nothing): its point is done once every one of
        its planned measurements is."""
        if record.status == "skipped":
            return
        key = _key(record.config_hash, record.mode, record.concurrency, record.rate, getattr(record, "workload", None))
        where = record.host if record.baseline or not self._pooled else ""
        ids = self._final.setdefault((where, key), set())
        ids.add(record.point_id)
        if len(ids & self._of.get(key, {record.point_id})) >= len(self._of.get(key, {record.point_id})):
            self._done.add((where, key))

    def add_all(self, records: Iterable[Record]) -> None:
        for record in records:
            self.add(record)

    @property
    def done(self) -> int:
        return len(self._done)
