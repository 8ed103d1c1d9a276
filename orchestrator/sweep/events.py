"""What a sweep reports while it runs: small immutable events passed to one observer callback.

Core code never prints; the CLI turns these into progress bars (``orchestrator/cli/commands/sweep.py``), tests
collect them in a list, and a future web front end could stream them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DeploymentFailed",
    "DeploymentReady",
    "DeploymentStarted",
    "HealthProgress",
    "HostRestored",
    "LoadProgress",
    "Notice",
    "Observer",
    "PhaseProgress",
    "PointFinished",
    "PointStarted",
    "SweepEvent",
    "SweepStarted",
    "point_summary",
]


@dataclass(frozen=True)
class SweepEvent:
    """Base of every event; ``host`` names the host it concerns ('' for the whole sweep)."""

    host: str = ""


@dataclass(frozen=True)
class SweepStarted(SweepEvent):
    run_dir: str = ""
    #: Points as the answer counts them (a configuration at a load, its repeats and restarts combined:
    #: orchestrator/sweep/pointcount.py), and those not yet done.
    total_points: int = 0
    pending_points: int = 0
    deployments: int = 0
    eta_seconds: float = 0.0
    resumed: bool = False
    #: The deployments that still have points to measure (all of them, but on a resume).
    pending_deployments: int | None = None


@dataclass(frozen=True)
class DeploymentStarted(SweepEvent):
    deployment_id: str = ""
    label: str = ""
    index: int = 0
    total: int = 0
    attempt: int = 1


@dataclass(frozen=True)
class HealthProgress(SweepEvent):
    deployment_id: str = ""
    elapsed: float = 0.0
    timeout: float = 0.0
    last_line: str = ""


@dataclass(frozen=True)
class DeploymentReady(SweepEvent):
    deployment_id: str = ""
    label: str = ""
    load_seconds: float = 0.0


@dataclass(frozen=True)
class DeploymentFailed(SweepEvent):
    deployment_id: str = ""
    label: str = ""
    reason: str = ""
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class PhaseProgress(SweepEvent):
    """How far a phase that is not a point is: a deployment's warm-up (``warm-up``: requests done of
    ``total``), its lossless probe (``lossless probe``: answers), or a decide round (``decide round``: ``done`` is
    the round's number, ``total`` the budget's most rounds). Sent when the phase starts and as it goes on;
    ``eta_seconds`` is the sweep's remaining time as known then."""

    deployment_id: str = ""
    phase: str = ""
    done: int = 0
    total: int | None = None
    eta_seconds: float | None = None

    @property
    def text(self) -> str:
        """``lossless probe: 3 of 10 answers``, ``warm-up: 1 of 2``, ``decide round 1 of at most 2``."""
        if self.phase == "decide round":
            most = f" of at most {self.total}" if self.total else ""
            return f"decide round {self.done}{most}"
        unit = " answers" if self.phase == "lossless probe" else ""
        return f"{self.phase}: {self.done} of {self.total}{unit}" if self.total else f"{self.phase}: {self.done}{unit}"


@dataclass(frozen=True)
class PointStarted(SweepEvent):
    deployment_id: str = ""
    point_id: str = ""
    label: str = ""
    requests: int | None = None


@dataclass(frozen=True)
class LoadProgress(SweepEvent):
    point_id: str = ""
    done: int = 0
    total: int | None = None
    live_tok_s: float = 0.0


@dataclass(frozen=True)
class PointFinished(SweepEvent):
    deployment_id: str = ""
    point_id: str = ""
    label: str = ""
    status: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    eta_seconds: float = 0.0
    #: Measurements this run finished (a repeat counts on its own).
    points_done: int = 0
    #: Points done, as :attr:`SweepStarted.total_points` counts them (the run's resumed ones included).
    points_complete: int = 0


def point_summary(record: Any, degraded_requests: float | None = None) -> dict[str, Any]:
    """A finished point's :attr:`PointFinished.summary`, from its record (orchestrator/runs/store.py); with
    ``degraded_requests`` (``checks.degraded_requests``), whether the window lost more of its requests than
    that, as the answer judges a point (``orchestrator/analysis/result.py``, ``mark_degraded``)."""
    from orchestrator.analysis.frame import record_accept_len
    from orchestrator.analysis.rowfacts import lost_requests

    client = record.client or {}
    error = record.error or {}
    # The accept length the record holds as the analysis reads it (the most exact source), not the log's own.
    accept, source, _exactness = record_accept_len(record)
    lost, sent = lost_requests(client)
    degraded = (
        record.status == "ok" and degraded_requests is not None and bool(sent) and lost / sent > degraded_requests
    )
    return {
        "output_tok_s": client.get("output_tok_s"),
        "accept_len": accept,
        "accept_len_source": source,
        "requests": client.get("requests"),
        "errors": client.get("errors"),
        "lost": lost,
        "sent": sent,
        "degraded": degraded,
        "error": error.get("message"),
        # What the console line of a failed point names: the cause as the record has it.
        "error_kind": error.get("kind"),
        "evidence": list(error.get("evidence") or []),
        "requests_file": record.requests_file,
    }


@dataclass(frozen=True)
class HostRestored(SweepEvent):
    detail: str = ""


@dataclass(frozen=True)
class Notice(SweepEvent):
    """Something the user should know that is not a failure (a leftover restored, a retry)."""

    message: str = ""
    level: str = "info"


Observer = Callable[[SweepEvent], None]
