"""provenance.json's ``git`` from a git checkout (issue 58): it looked for ``.git`` beside the package folder
(``orchestrator/.git``), not at the checkout's root, and recorded null; a worktree's ``.git`` is a file. Real
repositories, made with git."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.runs.provenance import CHECKOUT, git_revision, run_provenance

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(*args: str, cwd: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_checkout_is_the_folder_holding_the_package() -> None:
    assert (CHECKOUT / "orchestrator" / "runs" / "provenance.py").is_file()


def test_a_checkout_and_a_worktree_of_it_each_give_their_revision(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    (repo / "a.txt").write_text("a\n")
    _git("add", "a.txt", cwd=repo)
    _git("commit", "-q", "-m", "one", cwd=repo)
    first = _git("rev-parse", "HEAD", cwd=repo)
    _git("worktree", "add", "-q", "-b", "side", str(tmp_path / "side"), cwd=repo)
    (tmp_path / "side" / "a.txt").write_text("changed\n")
    assert (tmp_path / "side" / ".git").is_file()  # a worktree's .git is a file, not a folder
    assert git_revision(repo) == {"commit": first, "dirty": False}
    assert git_revision(tmp_path / "side") == {"commit": first, "dirty": True}
    assert git_revision(tmp_path) is None  # no checkout


@pytest.mark.skipif(not (CHECKOUT / ".git").exists(), reason="specsweep runs from an installed package here")
def test_a_run_from_this_checkout_records_its_revision() -> None:
    git = run_provenance(None)["git"]
    assert git is not None and git["commit"] == _git("rev-parse", "HEAD", cwd=CHECKOUT)
