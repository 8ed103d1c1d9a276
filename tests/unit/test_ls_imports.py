"""`ls` imports no pandas (issue 49, scale: `ls -n 0` of 100 runs under 5 CPU s, about 0.6 s of which was
importing pandas once): the analysis package's face loads on first use, ``answer.json``'s counts are read by
``analysis/answerfile.py`` and ``quickcounts`` writes its two rules from ``frame`` and ``result`` again, held
equal to them here. Run in a fresh interpreter, as a user runs ``specsweep ls``."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import orchestrator.analysis as analysis
from orchestrator.analysis import answer as answer_module
from orchestrator.analysis import answerfile, quickcounts
from orchestrator.analysis.frame import config_label
from orchestrator.analysis.result import lost_requests
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "data" / "runs"
HEAVY = ("pandas", "numpy", "matplotlib", "pyarrow", "scipy")


def _imported(args: list[str]) -> set[str]:
    """The top-level packages ``python -X importtime -m orchestrator ARGS`` imports (a fresh process)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "orchestrator", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    return {name.split(".")[0] for name in names}


@pytest.mark.parametrize("answer_json", [False, True])
def test_ls_imports_no_pandas(tmp_path: Path, answer_json: bool) -> None:
    run = shutil.copytree(RUNS / "sim-demo", tmp_path / "results" / "demo" / "20260101T000000Z-aaaaaa")
    (run / answerfile.ANSWER_FILE).unlink(missing_ok=True)
    if answer_json:
        answer_module.answer(run, save=True)  # a current answer.json: its head is read
        assert answerfile.cached_counts(run) is not None
    else:
        assert quickcounts.quick_counts(run) is not None  # the counts without the answer
    imported = _imported(["ls", "--results", str(tmp_path / "results"), "-n", "0"])
    assert "orchestrator" in imported
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_the_face_loads_each_name_from_its_module() -> None:
    for name in analysis.__all__:
        assert getattr(analysis, name) is not None
    assert analysis.analyse is sys.modules["orchestrator.analysis.result"].analyse
    assert analysis.config_label is config_label
    with pytest.raises(AttributeError):
        analysis.no_such_name  # noqa: B018
    assert answer_module.cached_counts is answerfile.cached_counts
    assert answer_module.ANSWER_FILE == answerfile.ANSWER_FILE


def test_the_frame_the_result_and_quickcounts_share_one_definition() -> None:
    """``ls`` counts without pandas by the same functions the analysis names and counts points with."""
    from orchestrator.analysis import frame, result, rowfacts

    assert quickcounts.config_label is frame.config_label is rowfacts.config_label
    assert quickcounts.lost_requests is result.lost_requests is rowfacts.lost_requests
    assert config_label("ddtree", {"budget": 7, "flag": True}) == "ddtree(budget=7, flag=true)"
    assert lost_requests({"errors": 6, "cancelled": 2, "requests": 10}) == (8, 12)
    assert lost_requests({"errors": None, "cancelled": math.nan, "requests": "12"}) == (0, 12)
