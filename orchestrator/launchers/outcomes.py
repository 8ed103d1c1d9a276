"""What ``specsweep doctor`` and ``specsweep restore`` answer, whatever the launcher: a doctor's checks of one
place (:class:`HostReport` of :class:`Check` s) and what a restore found and did there (:class:`RestoreOutcome`).
Values only: the launchers' kinds make them (:class:`~orchestrator.launchers.base.LauncherKind`), the CLI draws them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from orchestrator.services.base import Leftover

__all__ = ["Check", "HostReport", "RestoreOutcome", "Status"]

Status = Literal["ok", "warn", "fail", "skip"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str = ""


@dataclass
class HostReport:
    host: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)


@dataclass(frozen=True)
class RestoreOutcome:
    """What ``restore`` found and did on one host."""

    host: str
    service: str
    leftover: Leftover | None
    restored: bool = False
    error: str | None = None

    @property
    def summary(self) -> str:
        if self.error:
            prefix = f"{self.host}: "
            return self.error[len(prefix) :] if self.error.startswith(prefix) else self.error
        if self.leftover is None:
            return "nothing to restore"
        what = self.leftover.describe().split(": ", 2)[-1]
        return ("restored: " if self.restored else "found: ") + what
