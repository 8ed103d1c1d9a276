"""A run that ends on a full disk still says so in run.json: the final state is written over run.json's own
blocks when no new file can be made (the reliability suite fills a real tmpfs; this is the unit-level case)."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

import orchestrator.runs.store as store_module
from orchestrator.errors import StoreError
from orchestrator.runs.store import RunStore


def _store(tmp_path: Path) -> RunStore:
    return RunStore.create(tmp_path, "full", {"name": "full"}, {"deployments": []})


def _no_new_files(monkeypatch: pytest.MonkeyPatch, code: int = errno.ENOSPC) -> None:
    def refuse(path: Path, text: str) -> None:
        path.with_name(f".{path.name}.tmp").write_text("")  # what a failed write leaves behind
        raise OSError(code, "No space left on device")

    monkeypatch.setattr(store_module, "_write_atomic", refuse)


def test_the_final_state_is_written_in_place_when_the_disk_is_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    _no_new_files(monkeypatch)
    store.set_state("failed", points={"planned": 2, "ok": 1, "failed": 0})
    info = json.loads((store.path / "run.json").read_text())
    assert info["state"] == "failed" and info["ended_at"] and info["points"]["ok"] == 1
    assert not (store.path / ".run.json.tmp").exists()
    assert RunStore.open(store.path).info.state == "failed"


def test_other_errors_still_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path)
    _no_new_files(monkeypatch, errno.EACCES)
    with pytest.raises(StoreError):
        store.set_state("failed")
    assert json.loads((store.path / "run.json").read_text())["state"] == "running"
