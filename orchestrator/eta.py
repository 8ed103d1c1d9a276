"""A sweep's remaining time, learned while it runs.

Before anything is measured, the plan's estimates stand (``server.expected_load_time`` plus each point's
estimated measurement time). Each observed model load replaces the expected load time by the mean observed
one, and each finished point rescales the remaining points' estimates by observed/estimated so far.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

__all__ = ["EtaModel"]


@dataclass
class EtaModel:
    expected_load_seconds: float
    remaining_loads: int
    remaining_point_estimates: float
    _loads: list[float] = field(default_factory=list)
    _observed_points: float = 0.0
    _estimated_points: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def load_observed(self, seconds: float) -> None:
        with self._lock:
            self._loads.append(seconds)
            self.remaining_loads = max(0, self.remaining_loads - 1)

    def load_skipped(self) -> None:
        with self._lock:
            self.remaining_loads = max(0, self.remaining_loads - 1)

    def point_observed(self, estimated: float, seconds: float) -> None:
        with self._lock:
            self._observed_points += seconds
            self._estimated_points += estimated
            self.remaining_point_estimates = max(0.0, self.remaining_point_estimates - estimated)

    def remaining(self, parallel: int = 1) -> float:
        with self._lock:
            load = sum(self._loads) / len(self._loads) if self._loads else self.expected_load_seconds
            scale = self._observed_points / self._estimated_points if self._estimated_points > 0 else 1.0
            total = self.remaining_loads * load + self.remaining_point_estimates * scale
        return total / max(1, parallel)
