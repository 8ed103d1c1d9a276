"""`ls` of many runs of many points (issue 40, item 16): it reads a run's counts from the head of its
``answer.json`` (not every point in it), and only the runs it shows are read at all."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis.answer import ANSWER_FILE, answer, cached_counts
from orchestrator.cli.app import main
from orchestrator.cli.commands import ls as ls_command

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


def _copy(root: Path, name: str) -> Path:
    return shutil.copytree(RUNS / "sim-demo", root / "sim-demo" / name)


def test_the_counts_come_from_the_head_of_answer_json(tmp_path: Path) -> None:
    run = _copy(tmp_path, "20260101T000000Z-aaaaaa")
    made = answer(run, save=True)
    text = (run / ANSWER_FILE).read_text(encoding="utf-8")
    assert text.index('"counts"') < text.index('"points"')  # what ls reads comes first
    # The points after the head are not read: a file cut after its head still gives the counts.
    (run / ANSWER_FILE).write_text(text[: text.index('\n "points"')] + "\n ...", encoding="utf-8")
    assert cached_counts(run) == made.counts.to_dict()
    # A head that no longer matches the run's files is not taken.
    with (run / "records.jsonl").open("a", encoding="utf-8") as stream:
        stream.write("\n")
    assert cached_counts(run) is None


def test_an_answer_json_written_the_old_way_is_still_read(tmp_path: Path) -> None:
    run = _copy(tmp_path, "20260101T000000Z-aaaaaa")
    answer(run, save=True)
    stored = json.loads((run / ANSWER_FILE).read_text(encoding="utf-8"))
    old = {k: v for k, v in stored.items() if k != "made_from"} | {"made_from": stored["made_from"]}
    (run / ANSWER_FILE).write_text(json.dumps(old), encoding="utf-8")  # one line, made_from last
    assert cached_counts(run) == stored["counts"]


def test_ls_reads_only_the_runs_it_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(4):
        _copy(tmp_path, f"2026010{index + 1}T000000Z-aaaaa{index}")
    read: list[Path] = []
    summary = ls_command.run_summary

    def counted(run_dir: Path) -> dict[str, Any]:
        read.append(run_dir)
        return summary(run_dir)

    monkeypatch.setattr(ls_command, "run_summary", counted)
    with pytest.raises(SystemExit) as exit_info:
        main(["ls", "--results", str(tmp_path), "-n", "1"])
    out = " ".join(capsys.readouterr().out.split())  # the caption wraps at the console's width
    assert exit_info.value.code in (0, None)
    assert [p.name for p in read] == ["20260104T000000Z-aaaaa3"]  # the newest, the one shown
    assert "4 sweep or search run(s)" in out and "the 3 oldest not shown" in out


def test_runs_without_answer_json_are_read_in_worker_processes_to_the_same_summaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ls of many runs killed before their ending reads their records in forked workers, one a core: the same
    summaries, in the same order, as one process reads them; a run with a current answer.json stays here."""
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: ls reads every run in its own process")
    runs = [_copy(tmp_path, f"2026010{index + 1}T000000Z-aaaaa{index}") for index in range(ls_command.PARALLEL_FROM)]
    answered = _copy(tmp_path, "20260109T000000Z-bbbbbb")
    answer(answered, save=True)
    runs.append(answered)
    alone = [ls_command.run_summary(p) for p in runs]
    summary = ls_command.run_summary

    def where(run_dir: Path) -> dict[str, Any]:
        return {**summary(run_dir), "pid": os.getpid()}

    monkeypatch.setattr(ls_command, "run_summary", where)
    read = ls_command._summaries(runs)
    assert [{k: v for k, v in r.items() if k != "pid"} for r in read] == alone
    assert {r["pid"] for r in read[:-1]}.isdisjoint({os.getpid()})  # the records read in workers
    assert read[-1]["pid"] == os.getpid()  # answer.json's head read here
    assert [r["ok"] for r in read] == [alone[0]["ok"]] * len(runs) and alone[0]["ok"] > 0
    # Fewer runs to read than PARALLEL_FROM: all here.
    assert {r["pid"] for r in ls_command._summaries(runs[:2])} == {os.getpid()}


def test_ls_at_80_columns_keeps_when_each_run_started(tmp_path: Path) -> None:
    """At 80 columns, with an interrupted run beside a finished one, ``ls`` left out ``started (UTC)`` (issue 59,
    item 7): the date now goes over the time before the column goes."""
    import os
    import subprocess
    import sys

    from tests.timing import scaled

    _copy(tmp_path, "20260101T000000Z-aaaaaa")
    stopped = _copy(tmp_path, "20260102T000000Z-bbbbbb")
    info = json.loads((stopped / "run.json").read_text())
    (stopped / "run.json").write_text(json.dumps({**info, "state": "interrupted"}))
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "ls", "--results", str(tmp_path)],
        env={**os.environ, "COLUMNS": "80", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    left_out = [i for i, line in enumerate(lines) if line.startswith("left out at this width")]
    assert not any("started" in lines[i] for i in left_out), proc.stdout
    table = lines[: left_out[0]] if left_out else lines  # (the resume command after it is one line to copy)
    assert "interrupted" in proc.stdout and all(len(line) <= 80 for line in table), proc.stdout
    assert "started" in lines[0] + lines[1] and "2026-12-01" in proc.stdout, proc.stdout
