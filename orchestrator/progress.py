"""Rendering a sweep's events with rich: overall points and ETA, the deployment loading, the point under load."""

from __future__ import annotations

import threading
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from orchestrator.durations import format_duration
from orchestrator.events import (
    DeploymentFailed,
    DeploymentReady,
    DeploymentStarted,
    HealthProgress,
    HostRestored,
    LoadProgress,
    Notice,
    PointFinished,
    PointStarted,
    SweepEvent,
    SweepStarted,
)

__all__ = ["SweepProgress"]


class SweepProgress:
    """An observer for ``run_sweep`` that draws progress bars on ``console`` (stderr)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=30),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
            refresh_per_second=4,
        )
        self._lock = threading.Lock()
        self._overall: TaskID | None = None
        self._deploy: dict[str, TaskID] = {}
        self._point: dict[str, TaskID] = {}
        self._point_total: dict[str, int | None] = {}

    def __enter__(self) -> SweepProgress:
        self.progress.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.progress.stop()

    def _task(self, table: dict[str, TaskID], host: str, description: str, total: float | None) -> TaskID:
        task = table.get(host)
        if task is None:
            task = self.progress.add_task(description, total=total, detail="")
            table[host] = task
        else:
            self.progress.reset(task, total=total, description=description, detail="")
        return task

    def observe(self, event: SweepEvent) -> None:
        with self._lock:
            self._observe(event)

    def _observe(self, event: SweepEvent) -> None:
        prefix = f"[{event.host}] " if event.host and event.host != "local" else ""
        if isinstance(event, SweepStarted):
            self.console.print(f"run directory: {event.run_dir}" + (" (resumed)" if event.resumed else ""))
            self._overall = self.progress.add_task(
                "points", total=event.total_points, detail=f"ETA {format_duration(event.eta_seconds)}"
            )
            self.progress.update(self._overall, completed=event.total_points - event.pending_points)
        elif isinstance(event, DeploymentStarted):
            attempt = f" (attempt {event.attempt})" if event.attempt > 1 else ""
            self._task(
                self._deploy, event.host, f"{prefix}deploy {event.index}/{event.total} {event.label}{attempt}", None
            )
        elif isinstance(event, HealthProgress):
            task = self._deploy.get(event.host)
            if task is not None:
                line = event.last_line.strip()
                line = line if len(line) <= 60 else line[:59] + "…"
                self.progress.update(
                    task,
                    total=event.timeout,
                    completed=event.elapsed,
                    detail=f"loading {event.elapsed:.0f}s of {event.timeout:.0f}s {line}",
                )
        elif isinstance(event, DeploymentReady):
            task = self._deploy.get(event.host)
            if task is not None:
                self.progress.update(task, total=1, completed=1, detail=f"ready in {event.load_seconds:.1f}s")
        elif isinstance(event, DeploymentFailed):
            self.console.print(f"[red]{prefix}{event.label}: did not start: {event.reason}[/red]")
        elif isinstance(event, PointStarted):
            self._point_total[event.host] = event.requests
            self._task(self._point, event.host, f"{prefix}  {event.label}", event.requests)
        elif isinstance(event, LoadProgress):
            task = self._point.get(event.host)
            if task is not None:
                self.progress.update(
                    task, completed=event.done, total=event.total, detail=f"{event.live_tok_s:,.0f} tok/s"
                )
        elif isinstance(event, PointFinished):
            point_task = self._point.get(event.host)
            if point_task is not None and self._point_total.get(event.host):
                self.progress.update(point_task, completed=self._point_total[event.host])
            if self._overall is not None:
                self.progress.update(self._overall, advance=1, detail=f"ETA {format_duration(event.eta_seconds)}")
            tok_s = event.summary.get("output_tok_s")
            accept = event.summary.get("accept_len")
            figures = []
            if tok_s is not None:
                figures.append(f"{tok_s:,.1f} tok/s")
            if accept is not None:
                figures.append(f"accept len {accept:.2f}")
            if event.status != "ok":
                figures.append(f"[red]{event.status}: {event.summary.get('error') or ''}[/red]")
            self.console.print(f"{prefix}{event.label}: " + ", ".join(figures))
        elif isinstance(event, HostRestored):
            self.console.print(f"{prefix}host restored")
        elif isinstance(event, Notice):
            style = "yellow" if event.level != "info" else "cyan"
            self.console.print(f"[{style}]{prefix}{event.message}[/{style}]")
