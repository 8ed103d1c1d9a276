"""``answer.json`` as ``ls`` reads it: the file's name and schema, what it was made from (each input file's size
and modification time) and its point counts when it is current. Without pandas, so ``ls`` of runs that
all have a current answer imports none of the analysis (``answer.py`` writes the file and re-exports these)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.files import read_bounded, read_start
from orchestrator.runs.reading import parse_json

__all__ = ["ANSWER_FILE", "ANSWER_SCHEMA", "cached_counts", "fingerprint", "read_head"]

ANSWER_FILE = "answer.json"
ANSWER_SCHEMA = 1


def fingerprint(run_dir: Path) -> list[Any]:
    """What the answer was made from: each input file's size and modification time."""
    out: list[Any] = []
    for name in ("records.jsonl", "experiment.yaml", "plan.json", "run.json", "layout.json"):
        try:
            stat = (run_dir / name).stat()
        except OSError:
            out.append([name, None])
            continue
        out.append([name, stat.st_size, stat.st_mtime_ns])
    return out


_HEAD_BYTES = 64 * 1024
#: An answer.json without its head first (written before it was) is read whole only up to this size; a larger
#: one is not a current answer (``ls`` counts the run's records instead).
_MAX_WHOLE = 256 * 1024 * 1024


def read_head(path: Path) -> dict[str, Any] | None:
    """``schema``, ``made_from`` and ``counts`` of an ``answer.json`` from its first bytes alone (``answer`` writes
    them first, each a top-level key on its own line: a key inside a string would be escaped); None when the
    head does not hold all three."""
    try:  # a regular file only, its first bytes only: a FIFO or a link to /dev/zero never holds ls (issue 58)
        text = read_start(path, _HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    decoder = json.JSONDecoder()
    out: dict[str, Any] = {}
    for key in ("schema", "made_from", "counts"):
        marker = f'\n "{key}": '
        at = text.find(marker)
        if at < 0:
            return None
        try:
            out[key], _end = decoder.raw_decode(text, at + len(marker))
        except ValueError:
            return None
    return out


def cached_counts(run_dir: str | Path) -> dict[str, int] | None:
    """The point counts of ``answer.json`` when it was made from the run's files as they are now, else None."""
    path = Path(run_dir)
    stored = read_head(path / ANSWER_FILE)
    if stored is None:  # an answer.json written before its head came first: read it whole
        try:
            stored = parse_json(read_bounded(path / ANSWER_FILE, _MAX_WHOLE).decode("utf-8"))
        except (OSError, ValueError):
            return None
    if not isinstance(stored, dict) or stored.get("schema") != ANSWER_SCHEMA:
        return None
    if stored.get("made_from") != json.loads(json.dumps(fingerprint(path))):
        return None
    counts = stored.get("counts")
    return {str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else None
