"""The runs under a results root, in the order they were made (``latest`` is the last), whatever the clock said."""

from __future__ import annotations

from pathlib import Path

from orchestrator.errors import StoreError
from orchestrator.files import read_bounded
from orchestrator.runs.reading import parse_json

__all__ = ["find_latest", "next_sequence", "run_directories", "run_order", "run_sequence", "unreadable_run"]


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
    for run_dir in dirs:
        if run_sequence(run_dir) is None and run_dir.name > latest.name and unreadable_run(run_dir):
            raise StoreError(
                f"the newest run of {experiment!r}, {run_dir}, has a run.json that cannot be read "
                f"({unreadable_run(run_dir)}): latest would be an older run; repair or move it, or name a run "
                "directory instead of latest"
            )
    return latest


def unreadable_run(run_dir: Path) -> str | None:
    """Why ``run_dir``'s run.json cannot be read as a JSON object, or None when it can."""
    try:
        raw = parse_json(read_bounded(run_dir / "run.json", 64 * 1024 * 1024).decode("utf-8"))
    except (OSError, ValueError) as exc:
        return str(getattr(exc, "strerror", None) or exc)
    return None if isinstance(raw, dict) else "not a JSON object"
