"""Rendering a sweep's events with rich: overall points and ETA, the deployment loading, the point under load.

In a terminal, live bars (points and ETA, the deployment loading, the point under load) with a line per finished
point above them. Outside one (a pipe, a file, a CI log) there are no bars, only lines, and each line names
what it is about: ``[3/18] ddtree(budget=7, topk=1) C=4: 356.4 tok/s, accept len 3.36 (ETA 1m05s)``, a line
when a deployment starts and when it is ready, and, while a server loads, one line every
``LOADING_EVERY`` seconds so a log shows it is alive.

The phases of a deployment that are not points (``warm-up: 1 of 2`` before them, ``lossless probe: 3 of 10
answers`` after them) and the decide rounds (``decide round 1 of at most 2``) are a row of their own in a
terminal and a line when they start outside one. Whatever runs, a line says so at least every ``LOADING_EVERY`` seconds
outside a terminal (:meth:`SweepProgress.tick`, from a background thread: a probe answer or a point of a slow
engine sends no event for minutes): what runs, how far it is, for how long, and the ETA. A stop request asks
:meth:`SweepProgress.stopping_text` what the sweep waits for before it restores the host.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from orchestrator.experiment.durations import format_duration
from orchestrator.sweep.events import (
    DeploymentFailed,
    DeploymentReady,
    DeploymentStarted,
    HealthProgress,
    HostRestored,
    LoadProgress,
    Notice,
    PhaseProgress,
    PointFinished,
    PointStarted,
    SweepEvent,
    SweepStarted,
)

__all__ = ["LOADING_EVERY", "SweepProgress"]

#: Seconds between two "still loading" lines outside a terminal.
LOADING_EVERY = 30.0


class SweepProgress:
    """An observer for ``run_sweep`` that draws progress bars on ``console`` (stderr), or, when ``console`` is
    not a terminal (or ``lines`` is set), prints one line per event instead (module docstring)."""

    def __init__(self, console: Console, *, lines: bool | None = None) -> None:
        self.console = console
        self.lines = (not console.is_terminal) if lines is None else lines
        self._labels: dict[str, str] = {}  # deployment id -> configuration label
        self._loading_said: dict[str, float] = {}
        self._total = 0
        self._done = 0
        # The count the last point line showed, and the points it had counted (configuration, load): a line
        # whose measurement counts no new point says why its counter did not move.
        self._shown_done: int | None = None
        self._counted: set[tuple[str, str]] = set()
        self._run_dir: str | None = None
        # A new run's directory, said once the run holds its host (its first event after the start and the
        # notices): a sweep the host's lock refuses removes its empty directory, which it must not have named.
        self._unsaid_dir: str | None = None
        self._start_failed: dict[str, str] = {}  # deployment id -> why it did not start (printed once)
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
        # What runs now on each host (a phase, a point under load, a server loading), since when (monotonic), and
        # when a line last said anything (the heartbeat's clock).
        self._now: dict[str, tuple[str, float]] = {}
        self._said = time.monotonic()
        self._eta: float | None = None
        self._point_label: dict[str, str] = {}  # host -> the point under load ("ddtree(budget=7) C=4")
        self._phase_row: dict[str, str] = {}  # host -> the phase its row shows now (a terminal)
        self._beat: threading.Thread | None = None
        self._beat_stop = threading.Event()

    def __enter__(self) -> SweepProgress:
        if not self.lines:
            self.progress.start()
        else:
            self._beat = threading.Thread(target=self._beating, name="progress-heartbeat", daemon=True)
            self._beat.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._beat_stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
        if not self.lines:
            self.progress.stop()
        if self._unsaid_dir is not None and Path(self._unsaid_dir).is_dir():  # ended early, and kept: say where
            self.console.print(f"run directory: {escape(self._unsaid_dir)}", soft_wrap=True)
            self._unsaid_dir = None

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
            self._note_running(event)
            self._observe(event)

    # -- what runs now: the heartbeat and the stop ---------------------------------------------------

    def _running(self, host: str, text: str, *, keep_since: bool = False) -> None:
        since = self._now[host][1] if keep_since and host in self._now else time.monotonic()
        self._now[host] = (text, since)

    def _note_running(self, event: SweepEvent) -> None:
        host = event.host
        if isinstance(event, SweepStarted | PointFinished | PhaseProgress):
            self._eta = event.eta_seconds if event.eta_seconds is not None else self._eta
        if isinstance(event, DeploymentStarted):
            self._running(host, f"deploy {event.index}/{event.total} {event.label}: starting")
        elif isinstance(event, HealthProgress):
            label = self._labels.get(event.deployment_id, "")
            self._running(host, f"{label}: loading, {event.elapsed:.0f} s of {event.timeout:.0f} s", keep_since=True)
        elif isinstance(event, PhaseProgress):
            same = host in self._now and self._now[host][0].startswith(event.phase)
            self._running(host, event.text, keep_since=same)
        elif isinstance(event, PointStarted):
            self._point_label[host] = f"{self._labels.get(event.deployment_id, '')} {event.label}".strip()
            self._running(host, f"{self._point_label[host]}: load running")
        elif isinstance(event, LoadProgress):
            label = self._point_label.get(host, event.point_id)
            of = f" of {event.total}" if event.total else ""
            self._running(host, f"{label}: {event.done}{of} requests, {event.live_tok_s:,.0f} tok/s", keep_since=True)
        elif isinstance(event, PointFinished | HostRestored | DeploymentFailed):
            self._now.pop(host, None)

    def _beating(self) -> None:
        while not self._beat_stop.wait(1.0):
            self.tick()

    def tick(self, now: float | None = None) -> None:
        """Outside a terminal: when nothing was said for ``LOADING_EVERY`` seconds, a line of what runs (how far,
        for how long) and the ETA (module docstring). ``now``: the monotonic clock (a test's own)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if not self.lines or not self._now or now - self._said < LOADING_EVERY:
                return
            eta = f" (ETA {format_duration(self._eta)})" if self._eta is not None else ""
            for host, (text, since) in self._now.items():
                prefix = f"[{host}] " if host and host != "local" else ""
                line = f"{prefix}still running: {text}, for {format_duration(max(0.0, now - since))}{eta}"
                self.console.print(escape(line), soft_wrap=True, highlight=False)
            self._said = now

    def stopping_text(self, stop_timeout: float | None = None) -> str:
        """What a stop request waits for, and for how long at most: ``stopping: cancelling the lossless probe's
        answer in flight, then restoring the host (stopping the server: at most 30 s)``."""
        # No lock: a signal handler asks, maybe while the main thread holds it; a copy of the values is enough.
        try:
            running = [text for text, _since in list(self._now.values())]
        except RuntimeError:  # changed while copied (another thread's event): say the general case
            running = []
        waits = []
        for text in running:
            if text.startswith("lossless probe"):
                waits.append("cutting the lossless probe's answer in flight (at once, wherever it waits)")
            elif text.startswith("warm-up"):
                waits.append("cancelling the warm-up's request in flight")
            elif ": loading," in text or text.endswith(": starting"):
                waits.append("no longer waiting for the server to load")
            elif "requests," in text or text.endswith("load running"):
                waits.append(
                    "cancelling the point's requests in flight (the point is measured again on resume) and "
                    "closing its window (at most the engine's next stats line)"
                )
        first = "stopping: " + ("; ".join(dict.fromkeys(waits)) + ", then " if waits else "")
        bound = f" (stopping the server: at most {stop_timeout:.0f} s)" if stop_timeout else ""
        return f"{first}restoring the host{bound}; a second Ctrl-C skips the waiting, still restoring"

    def _observe(self, event: SweepEvent) -> None:
        if isinstance(event, DeploymentStarted):
            self._labels[event.deployment_id] = event.label
        if isinstance(event, SweepStarted):
            self._total = event.total_points
            self._done = event.total_points - event.pending_points
            self._shown_done = self._done
            self._run_dir = event.run_dir
        if isinstance(event, PointFinished):
            self._done = event.points_complete  # points, as the answer counts them (not measurements)
        if isinstance(event, DeploymentFailed):
            reason = event.reason  # "<host>: <why>": the host stays in the lines that repeat it
            self._start_failed[event.deployment_id] = reason.removeprefix(f"{event.host}: ")
        if isinstance(event, Notice):  # "stopping the sweep: <a reason already printed>": said once
            event = Notice(host=event.host, message=self.once(event.message), level=event.level)
        if self._unsaid_dir is not None and not isinstance(event, SweepStarted | Notice):
            self.console.print(f"run directory: {escape(self._unsaid_dir)}", soft_wrap=True)
            self._unsaid_dir = None
        if self.lines:
            self._line(event)
            return
        prefix = escape(f"[{event.host}] ") if event.host and event.host != "local" else ""
        if isinstance(event, SweepStarted):
            if event.resumed:
                self.console.print(f"run directory: {escape(event.run_dir)} (resumed)")
            else:
                self._unsaid_dir = event.run_dir
            if event.resumed:
                self.console.print(_started_text(event))
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
        elif isinstance(event, PhaseProgress):
            label = self._labels.get(event.deployment_id, "")
            title = "decide round" if event.phase == "decide round" else f"{prefix}  {event.phase}"
            task = self._point.get(event.host)
            if task is None or self._phase_row.get(event.host) != event.phase:
                self._phase_row[event.host] = event.phase
                task = self._task(self._point, event.host, escape(title), event.total)
            self.progress.update(
                task,
                completed=event.done,
                total=event.total,
                detail=escape(event.text + (f" ({label})" if label and event.phase != "decide round" else "")),
            )
            if self._overall is not None and event.eta_seconds is not None:
                self.progress.update(self._overall, detail=f"ETA {format_duration(event.eta_seconds)}")
            if event.phase == "decide round":
                self.console.print(escape(f"{event.text} (ETA {format_duration(event.eta_seconds or 0.0)})"))
        elif isinstance(event, PointStarted):
            self._phase_row.pop(event.host, None)
            self._point_total[event.host] = event.requests
            self._task(self._point, event.host, f"{prefix}  {event.label}", event.requests)
        elif isinstance(event, LoadProgress):
            task = self._point.get(event.host)
            if task is not None:
                # Tokens per second (each request's tokens settled when it ends); the accept length the record
                # will hold is known only when the window closes.
                self.progress.update(
                    task,
                    completed=event.done,
                    total=event.total,
                    detail=f"{event.live_tok_s:,.0f} tok/s, accept len pending",
                )
        elif isinstance(event, PointFinished):
            point_task = self._point.get(event.host)
            if point_task is not None and self._point_total.get(event.host):
                self.progress.update(point_task, completed=self._point_total[event.host])
            if self._overall is not None:
                self.progress.update(
                    self._overall, completed=self._done, detail=f"ETA {format_duration(event.eta_seconds)}"
                )
            self.console.print(f"{prefix}{self._point_text(event)}")
        elif isinstance(event, HostRestored):
            self.console.print(f"{prefix}host restored")
        elif isinstance(event, Notice):
            style = "yellow" if event.level != "info" else "cyan"
            self.console.print(f"[{style}]{prefix}{event.message}[/{style}]")

    def once(self, text: str) -> str:
        """``text`` with the reasons of deployments that did not start, already printed, as ``see above``."""
        for reason in self._start_failed.values():
            if reason and reason in text:
                text = text.replace(reason, "see above")
        return text

    # -- outside a terminal: one line per event ---------------------------------------------------------

    def _counter_note(self, event: PointFinished) -> str:
        """Why the ``[n/N]`` of this line did not move, or nothing: the counter counts points as the answer does
        (a configuration at a load, its repeats and restarts combined), so a repeat measured before the others,
        or a point measured again (a later round of a search or of ``load.decide``), adds none. It read ``[0/10]``
        twice across repeats and ``[20/20]`` three times on a search, and said nothing of why."""
        label = re.sub(r" \[restart \d+\]$", "", self._labels.get(event.deployment_id, ""))
        key = (label, re.sub(r" #\d+$", "", event.label))
        before, self._shown_done = self._shown_done, self._done
        if before is None or self._done > before:
            self._counted.add(key)
            return ""
        if event.status == "skipped":
            return ""
        if key in self._counted:
            return "; a point counted already, measured again"
        return "; the point counts once all its measurements are done"

    def _point_text(self, event: PointFinished) -> str:
        """``ddtree(budget=7, topk=1) C=4: 356.4 tok/s, accept len 3.36`` (rich markup, user text escaped)."""
        label = self._labels.get(event.deployment_id, "")
        tok_s = event.summary.get("output_tok_s")
        accept = event.summary.get("accept_len")
        figures = []
        if tok_s is not None:
            figures.append(f"{tok_s:,.1f} tok/s")
        if accept is not None:
            source = event.summary.get("accept_len_source")
            figures.append(f"accept len {accept:.2f}" + (f" ({source})" if source else ""))
        errors, requests = event.summary.get("errors"), event.summary.get("requests")
        if event.status == "ok" and event.summary.get("degraded"):
            lost, sent = event.summary.get("lost"), event.summary.get("sent")
            figures.append(f"[red]degraded: {lost} of {sent} requests lost (not ranked)[/red]")
        elif event.status == "ok" and errors:
            figures.append(f"[yellow]{errors} of {requests} requests failed[/yellow]")
        if event.status != "ok":
            figures.append(f"[red]{escape(self._cause(event))}[/red]")
        return f"{escape(label)} {escape(event.label)}: " + (", ".join(figures) or "no figures")

    def _cause(self, event: PointFinished) -> str:
        """Why a point did not succeed, as its record has it: ``failed: all_requests_failed (http_500:16):
        HTTP 500: <the engine's error line>``; a server that died ends with the last line of its log."""
        summary = event.summary
        kind = summary.get("error_kind")
        if event.deployment_id in self._start_failed:  # its reason is on the "did not start" line, once
            return f"{event.status}: {kind or 'did not start'} (the deployment did not start: see above)"
        evidence = [str(e) for e in summary.get("evidence") or []]
        text = f"{event.status}: {kind or summary.get('error') or 'unknown'}"
        if kind == "all_requests_failed":
            counts = ", ".join(e.replace(": ", ":") for e in evidence)
            line = self._first_request_error(summary.get("requests_file"))
            return text + (f" ({counts})" if counts else "") + (f": {line}" if line else "")
        last = next((e.strip() for e in reversed(evidence) if e.strip()), "")
        message = str(summary.get("error") or "")
        if message and message != kind:
            text += f" ({message})"
        return text + (f": {last[:200]}" if last else "")

    def _first_request_error(self, requests_file: object) -> str:
        """The first failed request's error (the engine's own words, ``HTTP 500: …``) from the point's
        requests file in the run directory; empty when there is none to read."""
        if not isinstance(requests_file, str) or self._run_dir is None:
            return ""
        try:
            with open(Path(self._run_dir) / requests_file, encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(row, dict) and not row.get("ok") and row.get("error"):
                        return " ".join(str(row["error"]).split())[:200]
        except OSError:
            return ""
        return ""

    def _line(self, event: SweepEvent) -> None:
        prefix = escape(f"[{event.host}] ") if event.host and event.host != "local" else ""
        # Whole lines, never wrapped by us: a log is read with grep as often as with eyes.
        printed = functools.partial(self.console.print, soft_wrap=True)

        def say(text: str) -> None:
            self._said = time.monotonic()
            printed(text)

        if isinstance(event, SweepStarted):
            if event.resumed:
                say(f"run directory: {escape(event.run_dir)} (resumed)")
            else:
                self._unsaid_dir = event.run_dir
            say(_started_text(event))
        elif isinstance(event, DeploymentStarted):
            attempt = f" (attempt {event.attempt})" if event.attempt > 1 else ""
            self._loading_said[event.host] = time.monotonic()
            say(f"{prefix}deploy {event.index}/{event.total} {escape(event.label)}{attempt}")
        elif isinstance(event, HealthProgress):
            now = time.monotonic()
            if now - self._loading_said.get(event.host, now) >= LOADING_EVERY:
                self._loading_said[event.host] = now
                label = escape(self._labels.get(event.deployment_id, ""))
                last = escape(event.last_line.strip()[:100])
                say(
                    f"{prefix}{label}: loading, {event.elapsed:.0f} s of {event.timeout:.0f} s"
                    + (f": {last}" if last else ""),
                )
        elif isinstance(event, DeploymentReady):
            say(f"{prefix}{escape(event.label)}: ready in {event.load_seconds:.1f} s")
        elif isinstance(event, PhaseProgress):
            # A line when a phase starts (and a round when it starts); the heartbeat says how far it goes.
            if event.phase == "decide round" or event.done == 0:
                label = self._labels.get(event.deployment_id, "")
                about = f"{label}: " if label and event.phase != "decide round" else ""
                eta = f" (ETA {format_duration(event.eta_seconds)})" if event.eta_seconds is not None else ""
                say(f"{prefix}{escape(about + event.text)}{eta}")
        elif isinstance(event, DeploymentFailed):
            say(f"[red]{prefix}{escape(event.label)}: did not start: {escape(event.reason)}[/red]")
        elif isinstance(event, PointFinished):
            where = f"[{self._done}/{self._total}] " if self._total else ""
            why = self._counter_note(event)
            say(
                f"{prefix}{escape(where)}{self._point_text(event)} "
                f"(ETA {format_duration(event.eta_seconds)}{escape(why)})"
            )
        elif isinstance(event, HostRestored):
            say(f"{prefix}host restored")
        elif isinstance(event, Notice):
            style = "yellow" if event.level != "info" else "cyan"
            say(f"[{style}]{prefix}{escape(event.message)}[/{style}]")


def _started_text(event: SweepStarted) -> str:
    """The sweep's first line: what it will measure; a resume also says what is already done."""
    deployments = event.deployments if event.pending_deployments is None else event.pending_deployments
    eta = format_duration(event.eta_seconds)
    if event.resumed:
        done = event.total_points - event.pending_points
        return (
            f"{done} of {event.total_points} points already done; {event.pending_points} to measure in "
            f"{deployments} deployment(s), ETA {eta}"
        )
    return f"{event.pending_points} of {event.total_points} points to measure in {deployments} deployment(s), ETA {eta}"
