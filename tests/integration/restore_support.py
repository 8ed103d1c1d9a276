"""Stopping what a real-engine sweep started, also when the test fails: ``specsweep restore`` of the same file,
as a user does after a killed run.

A CLI killed by its test's timeout cannot restore by itself, and the process service names its files after the
server's port (``server-<port>``, orchestrator/services/__init__.py ``_process_name``), not after the
experiment: a test that built ``ProcessService(host, "<experiment name>")`` to clean up found nothing to stop and
left a real server running (found when a loaded machine timed out the SGLang sweep).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.timing import scaled


def restore(path: Path, env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``specsweep restore path`` with the sweep's environment (its HOME holds the process service's state):
    stops a server a killed sweep left, says nothing to restore after a sweep that ended."""
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "restore", str(path)],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )
