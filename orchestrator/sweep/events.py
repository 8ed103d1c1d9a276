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
    points_done: int = 0


def point_summary(record: Any) -> dict[str, Any]:
    """A finished point's :attr:`PointFinished.summary`, from its record (orchestrator/runs/store.py)."""
    from orchestrator.analysis.frame import record_accept_len

    client = record.client or {}
    error = record.error or {}
    # The accept length the record holds as the analysis reads it (the most exact source), not the log's own.
    accept, source, _exactness = record_accept_len(record)
    return {
        "output_tok_s": client.get("output_tok_s"),
        "accept_len": accept,
        "accept_len_source": source,
        "requests": client.get("requests"),
        "errors": client.get("errors"),
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
