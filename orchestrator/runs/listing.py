"""The runs under a results root, in the order they were made (``latest`` is the last), whatever the clock said."""

from __future__ import annotations

from pathlib import Path

from orchestrator.errors import StoreError
from orchestrator.files import read_bounded
from orchestrator.runs.reading import parse_json

__all__ = [
    "find_latest",
    "newer_unreadable",
    "next_sequence",
    "refuse_unreadable",
    "run_directories",
    "run_order",
    "run_sequence",
    "unreadable_run",
]


def run_sequence(run_dir: Path) -> int | None:
    """The ``sequence`` of a run directory's run.json, None when it has none (or cannot be read)."""
    try:
        raw = parse_json(read_bounded(run_dir / "run.json", 64 * 1024 * 1024).decode("utf-8"))
    except (OSError, ValueError):
        return None
    value = raw.get("sequence") if isinstance(raw, dict) else None
    return value if type(value) is int else None


def run_order(run_dir: Path) -> tuple[int, int, str, str]:
    """The key that sorts run directories oldest first: by ``sequence`` (the order they were made in, whatever
    the clock said), runs without one first and by their name (their UTC start time)."""
    sequence = run_sequence(run_dir)
    return (0 if sequence is None else 1, sequence or 0, run_dir.name, run_dir.parent.name)


def next_sequence(root: Path) -> int:
    """1 + the largest sequence of the runs under ``root`` (``root/<experiment>/<run id>/run.json``)."""
    found = [run_sequence(p.parent) for p in root.glob("*/*/run.json")]
    return 1 + max((s for s in found if s is not None), default=0)


def run_directories(root: str | Path, experiment: str) -> list[Path]:
    """Every run directory of ``experiment`` under ``root``, oldest first (:func:`run_order`)."""
    base = Path(root) / experiment
    try:
        candidates = sorted((p for p in base.iterdir() if (p / "run.json").is_file()), key=run_order)
    except FileNotFoundError as exc:
        raise StoreError(f"no runs of experiment {experiment!r} under {Path(root)}") from exc
    except OSError as exc:
        raise StoreError(f"cannot list {base}: {exc.strerror or exc}") from exc
    if not candidates:
        raise StoreError(f"no runs of experiment {experiment!r} under {base}")
    return candidates


def find_latest(root: str | Path, experiment: str) -> Path:
    """The newest run directory of ``experiment`` under ``root`` (:func:`run_order`).

    A run directory whose run.json cannot be read sorts first (its sequence is unknown), so the newest run with
    a broken run.json would silently make ``latest`` an older run (and ``--resume latest`` continue a finished
    one): refused instead, naming it, when its name (its UTC start) is newer than the run found."""
    dirs = run_directories(root, experiment)
    latest = dirs[-1]
    refuse_unreadable(dirs, latest, experiment)
    return latest


def refuse_unreadable(runs: list[Path], chosen: Path, experiment: str) -> None:
    """StoreError naming the run.json of a run newer than ``chosen`` that cannot be read (:func:`newer_unreadable`),
    or of ``chosen`` itself."""
    broken = newer_unreadable(runs, chosen) or (chosen if unreadable_run(chosen) else None)
    if broken is not None:
        raise StoreError(
            f"the newest run of {experiment!r} has a run.json that cannot be read as a run's: {broken / 'run.json'} "
            f"({unreadable_run(broken)}); latest would be an older run: repair or move it, or name a run "
            "directory instead of latest"
        )


_STATES = ("running", "done", "interrupted", "failed", "stopped")


def unreadable_run(run_dir: Path) -> str | None:
    """Why ``run_dir``'s run.json cannot be read as a run's (JSON, an object, and the shape of
    ``orchestrator.runs.store.RunInfo``: what identifies and orders a run), or None when it can."""
    try:
        raw = parse_json(read_bounded(run_dir / "run.json", 64 * 1024 * 1024).decode("utf-8"))
    except (OSError, ValueError) as exc:
        return str(getattr(exc, "strerror", None) or exc)
    if not isinstance(raw, dict):
        return "not a JSON object"
    for key in ("run_id", "experiment", "started_at"):
        if not isinstance(raw.get(key), str):
            return f"its {key} is {'missing' if key not in raw else 'not a string'}"
    if not isinstance(raw.get("controller"), dict):
        return "its controller is not an object"
    if raw.get("state", "running") not in _STATES:
        return f"its state {raw.get('state')!r} is none of {', '.join(_STATES)}"
    if raw.get("sequence") is not None and type(raw.get("sequence")) is not int:
        return f"its sequence {raw.get('sequence')!r} is not a whole number"
    return None


def newer_unreadable(runs: list[Path], chosen: Path) -> Path | None:
    """A run of ``runs`` started after ``chosen`` (its directory name is its UTC start) whose run.json cannot
    be read as a run's: it sorts first (no sequence known), so ``latest`` would silently be ``chosen``."""
    for run_dir in runs:
        if run_dir.name > chosen.name and run_dir.parent == chosen.parent and unreadable_run(run_dir):
            return run_dir
    return None
