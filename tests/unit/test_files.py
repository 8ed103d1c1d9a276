"""orchestrator/files.py: reading and writing files anyone may have put there (issue 58, S6 and S7), with real
FIFOs, links and devices."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from orchestrator.files import NotReadable, read_start, write_atomic


def test_read_start_reads_the_head_of_a_regular_file_only(tmp_path: Path) -> None:
    path = tmp_path / "answer.json"
    path.write_bytes(b"x" * 100)
    assert read_start(path, 10) == b"x" * 10 and read_start(path, 1000) == b"x" * 100
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotReadable, match="FIFO"):
        read_start(fifo, 10)  # never blocks
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    with pytest.raises(NotReadable, match="device"):
        read_start(zero, 10)


def test_write_atomic_replaces_a_link_and_leaves_its_target_alone(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.csv").symlink_to(outside)
    (run / ".summary.csv.tmp").symlink_to(outside)  # the name a fixed temporary file would have had
    write_atomic(run / "summary.csv", "a,b\n")
    assert outside.read_text() == "keep me\n"
    assert not (run / "summary.csv").is_symlink() and (run / "summary.csv").read_text() == "a,b\n"
    mode = stat.S_IMODE((run / "summary.csv").stat().st_mode)
    assert mode == 0o666 & ~_umask()  # as open() would have made it
    assert sorted(p.name for p in run.iterdir()) == [".summary.csv.tmp", "summary.csv"]  # no temporary left


def test_write_atomic_leaves_no_temporary_file_when_it_fails(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()  # a directory where the file goes: the rename fails
    (tmp_path / "out" / "inside").write_text("")
    with pytest.raises(OSError):
        write_atomic(tmp_path / "out", b"data", fsync=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
