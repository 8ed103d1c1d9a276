"""``ls`` of real-sized runs (issue 58, N16): the store writes each record's few counted fields beside
``records.jsonl`` (orchestrator/runs/recordindex.py), the quick counts read them instead of the records, and
trust them only where they are surely the whole file's; the counts stay the answer's."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis import quickcounts
from orchestrator.analysis.answer import answer
from orchestrator.analysis.quickcounts import quick_counts
from orchestrator.runs.recordindex import INDEX_NAME
from orchestrator.runs.store import Record, RunStore

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


def _stored(tmp_path: Path, name: str = "sim-demo") -> tuple[Path, RunStore, list[dict[str, Any]]]:
    """A copy of a test run whose records are written again through the store (so with their index)."""
    run = shutil.copytree(RUNS / name, tmp_path / "results" / name / "20260101T000000Z-aaaaaa")
    lines = (run / "records.jsonl").read_text(encoding="utf-8").splitlines()
    raws = [json.loads(line) for line in lines if line.strip()]
    (run / "records.jsonl").unlink()
    store = RunStore.open(run)
    for raw in raws:
        store.append(Record.model_validate(raw))
    return run, store, raws


class _Reads:
    """Counts the reads of records.jsonl itself (quickcounts' block reader)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = quickcounts._blocks

        def blocks(path: Path) -> Any:
            self.count += 1
            return real(path)

        monkeypatch.setattr(quickcounts, "_blocks", blocks)


@pytest.mark.parametrize("name", ["sim-demo", "field-report", "clean"])
def test_the_index_gives_the_answers_counts_without_reading_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    run, _store, raws = _stored(tmp_path, name)
    index = (run / INDEX_NAME).read_text(encoding="utf-8").splitlines()
    assert len(index) == len(raws)
    assert sum(map(len, index)) * 5 < (run / "records.jsonl").stat().st_size  # a small part of the records
    reads = _Reads(monkeypatch)
    assert quick_counts(run) == answer(run).counts.to_dict()
    assert reads.count == 0


def test_a_record_the_store_refuses_is_indexed_as_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, store, raws = _stored(tmp_path)
    before = answer(run).counts.to_dict()
    impossible = {**raws[1], "point_id": raws[1]["point_id"], "attempt": 9, "status": "failed"}
    impossible["client"] = {**raws[1]["client"], "output_tok_s": 1e300}
    # A figure no measurement gives: the model refuses it, so it is built unchecked, as a bug upstream could.
    store.append(Record.model_construct(**impossible))
    assert json.loads((run / INDEX_NAME).read_text(encoding="utf-8").splitlines()[-1])["kept"] is False
    reads = _Reads(monkeypatch)
    assert quick_counts(run) == answer(run).counts.to_dict() == before
    assert reads.count == 0


def _append_raw(run: Path, raw: dict[str, Any]) -> None:
    with (run / "records.jsonl").open("a", encoding="utf-8") as stream:
        stream.write(json.dumps(raw) + "\n")


def test_a_record_written_without_its_index_line_is_read_from_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill between the two writes (or a hand-written line): the index no longer covers the file."""
    run, _store, raws = _stored(tmp_path)
    _append_raw(run, {**raws[2], "status": "failed", "attempt": 5, "error": {"kind": "server_died", "message": "x"}})
    reads = _Reads(monkeypatch)
    counts = quick_counts(run)
    assert reads.count == 1
    assert counts == answer(run).counts.to_dict() and counts is not None and counts["failed"] >= 1


def test_records_changed_after_the_index_are_read_from_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit that keeps the file's size (a status changed in place): the index is older than the records."""
    run, _store, _raws = _stored(tmp_path)
    target = run / "records.jsonl"
    text = target.read_text(encoding="utf-8")
    edited = text.replace('"status":"ok"', '"status":"ko"', 1).replace('"status": "ok"', '"status": "ko"', 1)
    assert edited != text and len(edited) == len(text)
    stamp = (run / INDEX_NAME).stat().st_mtime_ns
    target.write_text(edited, encoding="utf-8")
    os.utime(target, ns=(stamp + 10**9, stamp + 10**9))
    reads = _Reads(monkeypatch)
    assert quick_counts(run) is None  # "ko" is no status: not read surely, so ls makes the answer
    assert reads.count == 1


def test_superseding_records_drops_the_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, store, raws = _stored(tmp_path)
    moved = store.supersede({(raws[0]["host"], raws[0]["point_id"])}, "configuration changed")
    assert moved >= 1 and not (run / INDEX_NAME).exists()
    store.append(Record.model_validate(raws[0]))  # a later append does not make a partial index trusted
    reads = _Reads(monkeypatch)
    assert quick_counts(run) == answer(run).counts.to_dict()
    assert reads.count == 1


def test_an_index_built_at_once_is_the_one_appends_write(tmp_path: Path) -> None:
    """``build_index`` (a run written before the index, a bench's run) writes what the store's appends wrote;
    a torn last line leaves no index."""
    from orchestrator.runs.recordindex import build_index

    run, _store, _raws = _stored(tmp_path)
    written = (run / INDEX_NAME).read_bytes()
    assert build_index(run) and (run / INDEX_NAME).read_bytes() == written
    with (run / "records.jsonl").open("a", encoding="utf-8") as stream:
        stream.write('{"host": "torn')
    assert not build_index(run) and not (run / INDEX_NAME).exists()
