"""Files anyone may have put there are read bounded (issue 40, items 15 and 17): a FIFO or a link to /dev/zero
as records.jsonl, run.json or plan.json is refused at once instead of blocking (or never ending); a file too
large is refused before it is read whole; a records.jsonl with a crash's huge NUL tail reads its records in
bounded memory. The memory cases run in a child process under an address-space limit smaller than the file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError, LoadError, StoreError
from orchestrator.runs.store import RunStore
from tests.unit.test_store import make_record

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path) -> RunStore:
    store = RunStore.create(tmp_path / "results", "demo", {"name": "demo"}, {"deployments": []})
    store.append(make_record("p-1"))
    store.release()
    return store


@pytest.mark.parametrize("name", ["records.jsonl", "run.json", "plan.json"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_dev_zero_in_a_run_directory_is_refused_not_waited_on(tmp_path: Path, name: str, kind: str) -> None:
    store = _run(tmp_path)
    target = store.path / name
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    with pytest.raises(StoreError, match="not a regular file"):
        opened = RunStore.open(store.path)
        opened.plan()
        opened.records()


def test_an_experiment_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    from orchestrator.experiment.schema import load_experiment

    path = tmp_path / "exp.yaml"
    os.mkfifo(path)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_experiment(path)


def test_a_prompts_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    from orchestrator.load.workloads import load_workload

    path = tmp_path / "prompts.jsonl"
    os.mkfifo(path)
    with pytest.raises(LoadError, match="not a regular file"):
        load_workload(str(path))


_LIMITED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1536 * 1024 * 1024, 1536 * 1024 * 1024))
what, path = sys.argv[1], sys.argv[2]
try:
    if what == "records":
        from orchestrator.runs.store import RunStore
        print("records", len(RunStore.open(path).records()))
    elif what == "experiment":
        from orchestrator.experiment.schema import load_experiment
        load_experiment(path)
    else:
        from orchestrator.load.workloads import load_workload
        load_workload(path)
except MemoryError:
    print("MemoryError")
    sys.exit(3)
except Exception as exc:
    print(type(exc).__name__, str(exc)[:300])
"""


def _limited(what: str, path: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", _LIMITED, what, str(path)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_a_records_file_with_a_huge_nul_tail_reads_its_records_in_bounded_memory(tmp_path: Path) -> None:
    store = _run(tmp_path)
    target = store.path / "records.jsonl"
    with open(target, "r+b") as fh:  # a crash's tail: 2 GB of NULs (sparse: no disk used)
        fh.truncate(target.stat().st_size + 2 * 1024**3)
    assert _limited("records", store.path).split() == ["records", "1"]


@pytest.mark.parametrize(("what", "name"), [("experiment", "exp.yaml"), ("prompts", "prompts.jsonl")])
def test_a_huge_experiment_or_prompts_file_is_refused_before_it_is_read(tmp_path: Path, what: str, name: str) -> None:
    path = tmp_path / name
    with open(path, "wb") as fh:
        fh.truncate(4 * 1024**3)  # 4 GB, sparse
    said = _limited(what, path)
    assert said.split()[0] in {"ConfigError", "LoadError"}, said
    assert "bytes" in said, said
