"""Whether a run that says ``running`` still is: its controller holds the run lock (``runs/runlock.py``, ``flock``
on ``<run>/.lock``, dropped by the kernel with the process). A run whose ``run.json`` says ``running`` while no
process holds its lock was killed (``kill -9``, a lost machine): it reads as ``interrupted``, and can be
resumed."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from orchestrator.runs.runlock import _HELD, LOCK_FILE

__all__ = ["effective_state", "resume_hint", "still_running"]


def still_running(run_dir: str | Path) -> bool:
    """True when a controller holds the run's lock (this process or another); False when none does."""
    path = Path(run_dir) / LOCK_FILE
    if str(Path(run_dir).resolve()) in _HELD:
        return True
    try:
        # Non-blocking: a FIFO planted as the lock would hold the open forever (no writer ever comes).
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False  # no lock file: no controller ever locked it (or the run predates the lock)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def effective_state(run_dir: str | Path, state: str) -> str:
    """``state`` as ``run.json`` has it, but ``interrupted`` for a ``running`` run that no controller holds."""
    if state == "running" and not still_running(run_dir):
        return "interrupted"
    return state


def resume_hint(run_dir: str | Path, experiment_file: str | None) -> str:
    """How to continue an interrupted run."""
    return f"specsweep sweep {experiment_file or 'EXPERIMENT.yaml'} --resume {run_dir}"
