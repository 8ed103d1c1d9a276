"""A run directory's experiment.yaml (read by report, compare, resume checks and --baselines-from) gets the limits
experiment files get: size, aliases expanded, nesting, usable text. A run directory may come from anywhere."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orchestrator.errors import StoreError
from orchestrator.experiment.yamlsource import MAX_BYTES
from orchestrator.runs.store import RunStore

PLAN = {"schema_version": 1, "experiment": "demo", "deployments": [], "totals": {}}

BOMB = "name: demo\n" + "\n".join(
    [f"a0: &a0 {['x'] * 10}".replace("'", '"')]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    + ["checks: {disabled: *a8}"]
)


def _store(tmp_path: Path, text: str) -> RunStore:
    return RunStore.create(tmp_path / "results", "demo", text, PLAN)


def test_a_normal_run_experiment_reads(tmp_path: Path) -> None:
    assert _store(tmp_path, "name: demo\nchecks: {}\n").experiment() == {"name": "demo", "checks": {}}


def test_an_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    store = _store(tmp_path, BOMB)
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"experiment\.yaml.*expands to more than"):
        store.experiment()
    assert time.monotonic() - started < 5


def test_a_huge_file_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path, "name: demo\ndescription: " + "x" * (MAX_BYTES + 1) + "\n")
    with pytest.raises(StoreError, match=r"experiment\.yaml.*bytes"):
        store.experiment()


@pytest.mark.parametrize("value", ['"\\0"', '"\\ud800"', "!!binary AAAA"])
def test_unusable_text_is_refused_with_its_line(tmp_path: Path, value: str) -> None:
    store = _store(tmp_path, f"name: demo\ndescription: {value}\n")
    with pytest.raises(StoreError, match=r"experiment\.yaml:2:\d+: description: "):
        store.experiment()


def test_report_of_a_run_with_a_bomb_is_one_line_not_a_hang(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from orchestrator.cli.app import main
    from tests.unit.test_store import make_record

    store = _store(tmp_path, BOMB)
    store.append(make_record("p-1"))  # a run with a record: `report` reads its experiment (an empty one it refuses)
    store.release()
    started = time.monotonic()
    with pytest.raises(SystemExit) as info:
        main(["report", str(store.path)])
    assert info.value.code == 1
    assert time.monotonic() - started < 20
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expands to more than" in err and "Traceback" not in err
