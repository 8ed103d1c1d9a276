"""The failure policy: when going on with a sweep would only waste its hosts.

A baseline that cannot start (with ``stop_on_baseline_failure``), or ``max_consecutive_failed_deployments``
deployments in a row on one target that never became healthy, stop the sweep: :meth:`FailureTracker.failed`
returns the reason once, the workers stop at their next deployment or point boundary, every host is restored
and the run is ``stopped`` with that reason. A deployment that became healthy resets its target's count.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.experiment.schema import FailurePolicySpec
    from orchestrator.plan.deployments import Deployment

__all__ = ["FailureTracker"]


class FailureTracker:
    """Counts the deployments in a row that could not start, per target, and decides when the sweep stops."""

    def __init__(self, policy: FailurePolicySpec) -> None:
        self.policy = policy
        #: Why the sweep stops; set once.
        self.halted: str | None = None
        self._in_a_row: dict[str, int] = {}
        self._lock = threading.Lock()

    def succeeded(self, target: str) -> None:
        with self._lock:
            self._in_a_row[target] = 0

    def failed(self, target: str, deployment: Deployment, reason: str) -> str | None:
        """``deployment`` never became healthy on ``target`` (``reason``: the one line saying why); the reason
        the sweep stops when this is what stops it (returned once), else None."""
        with self._lock:
            count = self._in_a_row.get(target, 0) + 1
            self._in_a_row[target] = count
            why = None
            if deployment.baseline and self.policy.stop_on_baseline_failure:
                why = f"the baseline {deployment.label} cannot start on {target}"
            elif 0 < self.policy.max_consecutive_failed_deployments <= count:
                why = f"{count} deployments in a row could not start on {target}, the last {deployment.label}"
            if why is None or self.halted is not None:
                return None
            reason = reason.removeprefix(f"{target}: ")
            self.halted = f"{why}: {reason}" if reason else why
            return self.halted
