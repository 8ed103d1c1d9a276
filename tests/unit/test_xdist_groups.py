"""scripts/test.sh runs the suite with ``--dist loadgroup``: the tests that share a module-scoped fixture (one
sweep, one started server) and those marked with one ``xdist_group`` must run in one pytest-xdist worker. With
pytest 9.2 and pytest-xdist 3.8 the groups were silently dealt across workers (each built its own copy of a
module's sweep, and tests of one group ran at once); this runs a small suite under xdist and checks that the
grouping holds, with the project's own grouping hook (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist")

ROOT = Path(__file__).resolve().parents[2]

SUITE = """
import os
import time

import pytest


def note(*words):
    with open(os.environ["TOY_NOTES"], "a") as out:
        out.write(" ".join(str(w) for w in words) + chr(10))


@pytest.fixture(scope="module")
def shared():
    return os.getpid()


@pytest.mark.parametrize("i", range(6))
def test_by_fixture(shared, i):
    time.sleep(0.1)
    note("FIXTURE", os.environ["PYTEST_XDIST_WORKER"], shared)


@pytest.mark.xdist_group("marked")
@pytest.mark.parametrize("i", range(6))
def test_by_mark(i):
    time.sleep(0.1)
    note("MARKED", os.environ["PYTEST_XDIST_WORKER"])
"""


def test_grouped_tests_run_in_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    (tmp_path / "test_toy.py").write_text(SUITE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_ADDOPTS": "", "TOY_NOTES": str(tmp_path / "notes")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "3",
            "--dist",
            "loadgroup",
            "-s",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    notes = [line.split() for line in (tmp_path / "notes").read_text().splitlines()]
    assert len(notes) == 12, notes
    fixture = {words[1] for words in notes if words[0] == "FIXTURE"}
    builds = {words[2] for words in notes if words[0] == "FIXTURE"}
    marked = {words[1] for words in notes if words[0] == "MARKED"}
    assert len(fixture) == 1 and len(builds) == 1, f"a module fixture's tests ran in workers {fixture}"
    assert len(marked) == 1, f"an xdist_group's tests ran in workers {marked}"
