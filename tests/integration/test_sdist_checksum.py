"""scripts/get-llama-server.sh builds llama-server only from the pinned llama-cpp-python sdist (issue 58, R13).

The sdist's sha256 is pinned in the script (the file the package index serves): ``--check-sdist FILE`` refuses
any other file, saying both hashes; a cached sdist that is not the pinned one is removed and downloaded again
through pip's hash-checking mode (a requirement with ``--hash``), and a download that still is not it is refused
before anything is extracted or built. Run against files of this test and a stand-in for pip: no registry is
reached, nothing is built.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.reliability.harness import ROOT
from tests.timing import scaled

pytestmark = pytest.mark.timeout(120)

SCRIPT = ROOT / "scripts" / "get-llama-server.sh"
PIN = re.search(r"^SDIST_SHA256=([0-9a-f]{64})$", SCRIPT.read_text(), re.MULTILINE)
NAME = "llama_cpp_python-0.3.36.tar.gz"
# A stand-in for `python -m pip download ... -d DIR -r REQ`: keeps the requirement it was given and saves
# $SERVED as the sdist (a tampered one); anything else is python itself.
SHIM = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ] && [ "$3" = "download" ]; then
  shift 3
  while [ $# -gt 0 ]; do
    case "$1" in
      -d) dir=$2; shift 2;;
      -r) cat "$2" >> "$LOG"; shift 2;;
      *) shift;;
    esac
  done
  cp "$SERVED" "$dir/llama_cpp_python-0.3.36.tar.gz"
  exit 0
fi
exec "$REAL_PYTHON" "$@"
"""


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=scaled(60), check=False
    )


def _tampered(path: Path) -> Path:
    """A gzipped tar of the sdist's shape whose llama.cpp tree is not the pinned one."""
    tree = path.parent / "tree" / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp"
    tree.mkdir(parents=True)
    (tree / "CMakeLists.txt").write_text("message(FATAL_ERROR tampered)\n")
    with tarfile.open(path, "w:gz") as tar:
        tar.add(tree.parents[1], arcname="llama_cpp_python-0.3.36")
    return path


def test_the_pin_is_a_sha256() -> None:
    assert PIN is not None


def test_a_tampered_sdist_is_refused_with_both_hashes(tmp_path: Path) -> None:
    assert PIN is not None
    bad = _tampered(tmp_path / NAME)
    proc = _run("--check-sdist", str(bad), env={**os.environ, "PYTHON": os.environ.get("PYTHON", "python3")})
    assert proc.returncode == 1, proc.stderr
    assert "is not the llama-cpp-python 0.3.36 sdist" in proc.stderr and "refusing" in proc.stderr
    assert PIN.group(1) in proc.stderr
    assert proc.stdout == ""


def test_the_cached_sdist_passes_when_there_is_one() -> None:
    cached = Path(os.environ.get("SPECSWEEP_CACHE", Path.home() / ".cache" / "specsweep")) / "sdist" / NAME
    if not cached.is_file():
        pytest.skip(f"no cached sdist at {cached}")
    proc = _run("--check-sdist", str(cached), env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(
    not all(shutil.which(t) for t in ("cmake", "ninja", "c++")), reason="--source needs cmake, ninja and c++"
)
def test_a_tampered_cached_and_downloaded_sdist_is_never_extracted(tmp_path: Path) -> None:
    assert PIN is not None
    cache, bin_dir = tmp_path / "cache", tmp_path / "bin"
    (cache / "sdist").mkdir(parents=True)
    bin_dir.mkdir()
    _tampered(cache / "sdist" / NAME)
    served = _tampered(tmp_path / "served" / NAME)
    shim = bin_dir / "python"
    shim.write_text(SHIM)
    shim.chmod(0o755)
    log = tmp_path / "requirements.log"
    env = {
        **os.environ,
        "SPECSWEEP_CACHE": str(cache),
        "PYTHON": str(shim),
        "REAL_PYTHON": shutil.which("python3") or "python3",
        "SERVED": str(served),
        "LOG": str(log),
    }
    proc = _run("--source", env=env)
    assert proc.returncode == 1, proc.stderr
    assert "removing the cached" in proc.stderr  # the cached one was refused first
    assert "the downloaded sdist is not the pinned one" in proc.stderr
    assert log.read_text().split() == ["llama-cpp-python==0.3.36", f"--hash=sha256:{PIN.group(1)}"]
    assert not (cache / "src").exists() or not any((cache / "src").iterdir())  # nothing extracted
    assert "LLAMA_CPP_SRC" not in proc.stdout
