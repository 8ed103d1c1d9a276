"""The command an interrupted run prints to continue it runs as printed (issue 58, S9): a verification run
(its experiment is the ``verify-schedule.yaml`` inside its source run) is continued by ``verify-schedule
--resume``, which sets the variables its inline secrets are read from; any other by ``sweep FILE --resume``;
a path a shell would split is quoted."""

from __future__ import annotations

import shlex
from pathlib import Path

from orchestrator.runs.liveness import resume_hint


def test_a_verification_run_is_continued_by_verify_schedule_resume(tmp_path: Path) -> None:
    source = tmp_path / "results" / "vss" / "20260101T000000Z-abcdef"
    source.mkdir(parents=True)
    (source / "run.json").write_text("{}")
    made = tmp_path / "results" / "vss-verify" / "20260101T000100Z-123456"
    assert resume_hint(made, str(source / "verify-schedule.yaml")) == f"specsweep verify-schedule --resume {made}"


def test_a_file_of_that_name_outside_a_run_is_an_ordinary_experiment(tmp_path: Path) -> None:
    path = tmp_path / "verify-schedule.yaml"
    assert resume_hint(tmp_path / "run", str(path)) == f"specsweep sweep {path} --resume {tmp_path / 'run'}"


def test_a_path_with_spaces_is_one_word_of_the_printed_command(tmp_path: Path) -> None:
    file, run = tmp_path / "my sweeps" / "a.yaml", tmp_path / "my results" / "run 1"
    words = shlex.split(resume_hint(run, str(file)))
    assert words == ["specsweep", "sweep", str(file), "--resume", str(run)]
