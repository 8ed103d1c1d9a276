"""``records.index.jsonl``: beside ``records.jsonl``, the few fields of each record a run's counts need.

``ls`` shows the counts of a run without a current ``answer.json`` (``orchestrator/analysis/quickcounts.py``).
Reading them from ``records.jsonl`` reads every byte of every record: a real sweep's records are 20-35 KB a
line (the per-request detail, the server's samples), so a results root of 100 runs of 4,875 points is 16 GB of
text and ``ls`` took 81 CPU s (bench/RESULTS-scale.md). The store therefore writes, after each record, one short
line here: the record's identity, status, load and client counts as written (:data:`FIELDS`), whether the store's
own reading keeps the record (``kept``: ``record.read_record_line``, the rule every reader applies), and the byte
span of the record's line in ``records.jsonl`` (``start``, ``end``).

The index is trusted only where it is surely the records' (:func:`covers`, applied by its reader): its spans
follow one another from byte 0 to the records file's size, and it was written no earlier than the records file
was last changed. A record appended without its index line (a kill between the two writes), a torn line
terminated, ``records.jsonl`` rewritten (``supersede``) or edited by hand, or a run written before the index
existed: the reader reads ``records.jsonl`` itself, as before. Writing the index never fails a point.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from orchestrator.errors import StoreError

__all__ = ["CLIENT_FIELDS", "FIELDS", "INDEX_NAME", "append_index", "build_index", "covers", "index_line"]

INDEX_NAME = "records.index.jsonl"

#: The record's fields the counts read (quickcounts' ``_Line``), copied as written.
FIELDS = (
    "schema_version",
    "host",
    "point_id",
    "status",
    "variant",
    "mode",
    "params",
    "concurrency",
    "rate",
    "workload",
    "baseline_source",
)
#: The client counts a degraded point is judged by (``rowfacts.lost_requests``).
CLIENT_FIELDS = ("errors", "cancelled", "requests")


def index_line(line: str, start: int, end: int, *, kept: bool) -> bytes:
    """The index line of the record ``line`` (its JSON text, as written), whose bytes in ``records.jsonl`` are
    ``[start, end)``; ``kept``: whether the store's reading keeps it."""
    raw: Any = json.loads(line)
    entry: dict[str, Any] = {key: raw[key] for key in FIELDS if key in raw} if isinstance(raw, dict) else {}
    client = raw.get("client") if isinstance(raw, dict) else None
    if isinstance(client, dict):
        entry["client"] = {key: client[key] for key in CLIENT_FIELDS if key in client}
    entry.update(start=start, end=end, kept=kept)
    return (json.dumps(entry, separators=(",", ":"), default=str) + "\n").encode("utf-8")


def append_index(run_dir: Path, data: bytes) -> None:
    """Append ``data`` (index lines) to the run's index; an error leaves the index behind the records, which its
    reader then does not trust (:func:`covers`): never a reason to fail the point whose record is written."""
    with contextlib.suppress(OSError):
        fd = os.open(run_dir / INDEX_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)


def covers(spans: list[tuple[int, int]], records: os.stat_result, index: os.stat_result) -> bool:
    """Whether index lines of these ``(start, end)`` spans are the whole of a records file of stat ``records``:
    spans that follow one another from 0 to its size, and the index no older than its last change."""
    at = 0
    for start, end in spans:
        if start != at or end <= start:
            return False
        at = end
    return at == records.st_size and index.st_mtime_ns >= records.st_mtime_ns


def build_index(run_dir: Path) -> bool:
    """Write the index of the run's whole ``records.jsonl`` at once, replacing any (a run written before the
    index existed, or a bench's synthesised one); False, with no index written, when a line is blank, torn or not
    JSON (its reader then reads the records, as the store does)."""
    from orchestrator.runs.record import Record, read_record_line  # the store's own rule for each line

    target = run_dir / "records.jsonl"
    out: list[bytes] = []
    start = 0
    try:
        (run_dir / INDEX_NAME).unlink(missing_ok=True)
        with target.open("rb") as stream:
            for raw in stream:
                text = raw.decode("utf-8", errors="replace")
                if not raw.endswith(b"\n") or not text.strip():
                    return False
                try:
                    kept = isinstance(read_record_line(text, 0, target), Record)
                    out.append(index_line(text, start, start + len(raw), kept=kept))
                except (ValueError, StoreError):  # not JSON, or of another schema (SchemaVersionError)
                    return False
                start += len(raw)
    except OSError:
        return False
    append_index(run_dir, b"".join(out))
    return True
