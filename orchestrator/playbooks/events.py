"""What a playbook run reports while it runs, besides the sweep events its deploy and load steps emit.

The same observer receives both: these subclass ``SweepEvent``, so one callback can render a playbook's steps
and the health and load progress of its deployments.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.playbooks.expectations import Outcome
from orchestrator.sweep.events import SweepEvent

__all__ = ["OutcomeReady", "PlaybookStarted", "StepStarted"]


@dataclass(frozen=True)
class PlaybookStarted(SweepEvent):
    playbook: str = ""
    experiment: str = ""
    run_dir: str = ""
    steps: int = 0


@dataclass(frozen=True)
class StepStarted(SweepEvent):
    index: int = 0  # 0-based
    total: int = 0
    kind: str = ""
    text: str = ""


@dataclass(frozen=True)
class OutcomeReady(SweepEvent):
    outcome: Outcome | None = None
