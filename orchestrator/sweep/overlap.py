"""Other sweeps on this machine while this one measures: a warning, and each point measured beside one marked.

    watch = OverlapWatch(experiment.name, hosts, store, emit)
    watch.at_start()          a warning per other live controller (before anything is deployed)
    watch.register()          once the host's lock is taken: this controller becomes visible to the others
    watch.look()              at a point's start: who runs beside it (a warning for each new one)
    watch.between(t0, t1)     at a point's end: who ran at any time in its window, those that came and went
                              inside it too (a warning for each new one)
    watch.release()           at the run's end

The registry is orchestrator/runs/neighbours.py. Every other controller is named, by pid and run, a
controller of the same experiment too (two folders of one experiment on two ports run side by side); only
this process's own entries are left out. A controller the host's lock refuses never registers (this one
registers only after its lock is taken), so it never marks the other's points.

Each record measured while another controller ran carries ``overlapped`` (that controller's pid, machine,
experiment, hosts, run directory, start), the ``overlapping_runs`` check makes it a warning finding of the run,
and ``events.jsonl`` has an ``overlap`` event per controller seen.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.runs.neighbours import Neighbour, Registration, controllers_between, live_controllers
from orchestrator.sweep.events import Notice, SweepEvent

if TYPE_CHECKING:
    from orchestrator.runs.store import RunStore

__all__ = ["OverlapWatch", "merged", "overlap_message"]


def overlap_message(neighbour: Neighbour, hosts: list[str], *, started: bool) -> str:
    """The warning for one other controller: who, and why both runs' figures suffer."""
    verb = "started beside this one" if started else "is running"
    if neighbour.ended is not None:
        verb = "ran beside this one (and has ended)"
    shared = neighbour.shares_a_host(hosts)
    here = [h for h in shared if h.endswith("(this machine)")]
    away = [h for h in shared if h not in here]
    also = ", and both run their servers on this machine" if here else ""
    also += f", and the GPUs of {', '.join(away)}, which both drive" if away else ""
    return (
        f"another specsweep sweep {verb} on this machine: {neighbour.describe()}. The two share this machine's "
        f"CPU and network (load generation, client timings){also}: the figures of both runs are contaminated, "
        "and every point measured beside it is marked (finding overlapping_runs). For clean figures run one "
        "sweep at a time"
    )


class OverlapWatch:
    """This run's view of the other controllers on the machine (module docstring)."""

    def __init__(self, experiment: str, hosts: list[str], store: RunStore, emit: Callable[[SweepEvent], None]) -> None:
        self.experiment = experiment
        self.hosts = list(hosts)
        self.store = store
        self.emit = emit
        self._registration: Registration | None = None
        self._registered = False
        self._seen: set[str] = set()
        self._guard = threading.Lock()

    def _relevant(self) -> list[Neighbour]:
        return live_controllers(exclude_pid=os.getpid())

    def _note(self, found: list[Neighbour], *, started: bool) -> None:
        with self._guard:
            new = [n for n in found if n.token not in self._seen]
            self._seen.update(n.token for n in new)
        for neighbour in new:
            self.store.event("overlap", **neighbour.to_json_dict())
            self.emit(Notice(message=overlap_message(neighbour, self.hosts, started=started), level="warning"))

    def at_start(self) -> None:
        """Before the host's lock is taken: a controller of the same experiment on one of this run's hosts is
        left to the lock, which refuses one of the two when they drive the same server; where they do not (two
        folders, two ports), the first point's look names it."""
        found = [n for n in self._relevant() if not (n.experiment == self.experiment and n.shares_a_host(self.hosts))]
        self._note(found, started=False)

    def register(self) -> None:
        """Make this controller visible to the others (idempotent; after the host's lock is taken)."""
        with self._guard:
            if self._registered:
                return
            self._registered = True  # an unwritable registry: not visible to the others, still watching them
            self._registration = Registration.take(
                experiment=self.experiment, hosts=self.hosts, run_dir=self.store.path
            )

    def look(self) -> list[Neighbour]:
        """The other controllers running now; a warning for each seen for the first time."""
        found = self._relevant()
        self._note(found, started=True)
        return found

    def between(self, t0: float, t1: float) -> list[Neighbour]:
        """The other controllers alive at any time from ``t0`` to ``t1`` (epoch seconds: a point's window),
        those that started and ended inside it too; a warning for each seen for the first time."""
        found = controllers_between(t0, t1, exclude_pid=os.getpid())
        self._note(found, started=True)
        return found

    def release(self) -> None:
        with self._guard:
            registration, self._registration = self._registration, None
        if registration is not None:
            registration.release()


def merged(*groups: list[Neighbour]) -> list[dict[str, object]]:
    """The controllers of ``groups`` once each, as a record's ``overlapped`` holds them."""
    out: dict[str, Neighbour] = {}
    for group in groups:
        for neighbour in group:
            out.setdefault(neighbour.token, neighbour)
    return [n.to_json_dict() for n in out.values()]
