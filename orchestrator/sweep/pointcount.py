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
        where = self._where(record)
        planned = self._of.get(where[1], {record.point_id})
        ids = self._final.setdefault(where, set())
        ids.add(record.point_id)
        if len(ids & planned) >= len(planned):
            self._done.add(where)

    def add_all(self, records: Iterable[Record]) -> None:
        for record in records:
            self.add(record)

    @property
    def done(self) -> int:
        return len(self._done)

    def by_status(self, records: Iterable[Record]) -> dict[str, int]:
        """``planned`` (:attr:`total`), and the points of ``records`` (each measurement's last) ``ok`` (a window
        of it succeeded) or ``failed`` (none did), as the answer combines a point's windows."""
        statuses: dict[tuple[str, _Key], set[str]] = {}
        for record in records:
            statuses.setdefault(self._where(record), set()).add(record.status)
        ok = sum(1 for s in statuses.values() if "ok" in s)
        failed = sum(1 for s in statuses.values() if "ok" not in s and "failed" in s)
        return {"planned": self.total, "ok": ok, "failed": failed}

    def _where(self, record: Record) -> tuple[str, _Key]:
        key = _key(record.config_hash, record.mode, record.concurrency, record.rate, getattr(record, "workload", None))
        return (record.host if record.baseline or not self._pooled else "", key)


def targets_per_deployment(schedule: Any) -> dict[str, list[str]]:
    """Deployment id -> the targets that measure it, for each deployment ``schedule`` has measured per target
    (a baseline on each GPU slot of ``slots.baselines: per-slot`` or each host of a pool): this layout's and
    those the resumed run finished it on. {} when every deployment is measured once."""
    targets_of = getattr(schedule, "targets_of", None)  # GPU slots: the slots of the deployment's phases
    if not schedule.pooled and not callable(targets_of):
        return {}
    out: dict[str, list[str]] = {}
    for deployment in schedule.plan.deployments:
        if not deployment.baseline:
            continue
        now = targets_of(deployment) if callable(targets_of) else list(schedule.targets)
        ids = {p.id for p in deployment.load_points}
        before = sorted({t for t, point in schedule.final if point in ids})
        out[deployment.id] = list(dict.fromkeys([*now, *before]))
    return out


def record_planned(run_dir: Any, schedule: Any) -> int | None:
    """Record what ``schedule``'s targets measure in the run's ``layout.json`` (orchestrator/runs/layout.py) and
    return the run's planned points counted from it and the plan, as the answer counts them; None for a search
    (its strategy, not the plan, decides what it measures: its own count stands)."""
    from orchestrator.runs.layout import planned_points, record_layout
    from orchestrator.sweep.searching import SearchSchedule

    if isinstance(schedule, SearchSchedule):
        return None
    try:
        layout = record_layout(run_dir, targets_per_deployment(schedule))
    except OSError:  # a run directory that cannot be written: the schedule's own count
        return None
    return planned_points(schedule.plan.to_json_dict(), layout)
