"""tests/engine_setup.py: a test that needs an engine waits for scripts/test.sh's background stage of it, takes
what the stage printed, and is told why when the stage failed, was skipped or is still running; and the
conftest's wrapper does the waiting before a test's own time limit starts (a real pytest run of a small suite,
its stage ended by a timer while the test waits)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import engine_setup
from tests.engine_setup import ENV, marker_stages, wait_for
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(ENV, str(tmp_path))
    monkeypatch.setattr(engine_setup, "_settled", {})
    yield tmp_path


def _end(folder: Path, name: str, rc: str, out: str = "", log: str = "") -> None:
    (folder / f"{name}.out").write_text(out)
    (folder / f"{name}.log").write_text(log)
    (folder / f"{name}.rc").write_text(rc + "\n")


def test_without_a_background_set_up_nothing_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert wait_for("vllm", timeout_s=0) is None


def test_a_stage_that_ends_while_waiting_gives_its_printed_values(folder: Path) -> None:
    timer = threading.Timer(0.3, _end, (folder, "vllm", "0", "VLLM_PYTHON=/c/v/bin/python\nVLLM_MODEL='/c/m 1'\n"))
    timer.start()
    try:
        stage = wait_for("vllm", timeout_s=30)
    finally:
        timer.cancel()
    assert stage is not None and stage.ok, stage
    assert stage.values == {"VLLM_PYTHON": "/c/v/bin/python", "VLLM_MODEL": "/c/m 1"}  # shell quoting undone
    (folder / "vllm.rc").write_text("1\n")
    assert wait_for("vllm") == stage  # settled once per process


def test_a_failed_or_skipped_stage_says_so(folder: Path) -> None:
    _end(folder, "llama", "2", log="cmake failed\n")
    failed = wait_for("llama")
    assert failed is not None and not failed.ok
    assert "the llama set-up failed (exit 2)" in failed.reason and str(folder / "llama.log") in failed.reason
    _end(folder, "llama-source", "skipped")
    skipped = wait_for("llama-source")
    assert skipped is not None and not skipped.ok and "was not run" in skipped.reason


def test_a_stage_still_running_at_the_limit_is_reported_and_not_remembered(folder: Path) -> None:
    running = wait_for("vllm", timeout_s=0.2)
    assert running is not None and not running.ok and "had not ended after 0 s" in running.reason
    _end(folder, "vllm", "0")
    ended = wait_for("vllm", timeout_s=0.2)
    assert ended is not None and ended.ok


def test_markers_name_their_stages_and_an_unknown_stage_is_an_error() -> None:
    assert marker_stages({"vllm", "llamacpp", "system"}) == ["llama", "vllm"]
    assert marker_stages({"llamacpp_tree"}) == ["llama-source"]
    assert marker_stages({"system", "timeout"}) == []
    with pytest.raises(ValueError, match="unknown set-up stage 'llama-cpp'"):
        wait_for("llama-cpp")


SUITE = """
import pytest


@pytest.mark.vllm
@pytest.mark.timeout(2)
def test_after_the_stage():
    pass
"""


def _pytest(suite: Path, setup: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_PYTHON", "VLLM_MODEL")}
    env.update({"PYTHONPATH": str(ROOT), "PYTEST_ADDOPTS": "", ENV: str(setup)})
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "0", "-rs"]
    return subprocess.run(
        [*command, str(suite)], cwd=suite, env=env, capture_output=True, text=True, timeout=scaled(120)
    )


def test_the_wait_comes_before_the_tests_time_limit_and_a_failed_stage_skips(tmp_path: Path) -> None:
    """A vllm-marked test with a 2 s time limit under the project's hooks: its stage ends after 4 s, so a wait
    inside the limit would fail it; with a stage that failed, the test skips and says why."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(
        "from tests.conftest import pytest_runtest_protocol, pytest_runtest_setup  # noqa: F401\n"
    )
    (suite / "test_waits.py").write_text(SUITE)
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_text("")
    ends = tmp_path / "ends"
    ends.mkdir()
    timer = threading.Timer(4.0, _end, (ends, "vllm", "0", f"VLLM_PYTHON={sys.executable}\nVLLM_MODEL={model}\n"))
    timer.start()
    try:
        proc = _pytest(suite, ends)
    finally:
        timer.cancel()
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr
    fails = tmp_path / "fails"
    fails.mkdir()
    _end(fails, "vllm", "1", log="pip: no space left\n")
    proc = _pytest(suite, fails)
    assert proc.returncode == 0 and "1 skipped" in proc.stdout, proc.stdout + proc.stderr
    assert "the vllm set-up failed (exit 1)" in proc.stdout, proc.stdout
