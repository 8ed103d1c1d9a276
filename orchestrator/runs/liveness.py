"""Whether a run that says ``running`` still is: its controller holds the run lock (``runs/runlock.py``, ``flock``
on ``<run>/.lock``, dropped by the kernel with the process). A run whose ``run.json`` says ``running`` while no
process holds its lock was killed (``kill -9``, a lost machine): it reads as ``interrupted``, and can be
resumed."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
from pathlib import Path

from orchestrator.runs.runlock import _HELD, LOCK_FILE

__all__ = ["VERIFY_FILE", "effective_state", "is_verification_file", "resume_hint", "still_running"]

#: The verification experiment ``specsweep verify-schedule`` writes into the run it derives a schedule from.
VERIFY_FILE = "verify-schedule.yaml"


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
    """How to continue an interrupted run, as a command that runs as printed. A verification run (its experiment
    is ``verify-schedule.yaml`` inside the run it was derived from) is continued by ``verify-schedule --resume``:
    its experiment reads the source's inline secrets from variables only verify-schedule sets (issue 58, S9)."""
    if experiment_file and is_verification_file(experiment_file):
        return f"specsweep verify-schedule --resume {shlex.quote(str(run_dir))}"
    return f"specsweep sweep {shlex.quote(experiment_file or 'EXPERIMENT.yaml')} --resume {shlex.quote(str(run_dir))}"


def is_verification_file(experiment_file: str | Path) -> bool:
    """Whether ``experiment_file`` is the verification experiment verify-schedule wrote into a run."""
    path = Path(experiment_file)
    return path.name == VERIFY_FILE and (path.parent / "run.json").is_file()
