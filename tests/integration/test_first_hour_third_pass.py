"""Issue 41, the first hour (third pass), through the real CLI as a subprocess: the README's load line piped,
settings that cannot act, a starter sized to answer, the wrong kind of file for a command, a placeholder typo,
help at 80 columns, and the small things a new user meets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.test_first_hour_cli import _simulator, narrow
from tests.reliability.harness import run_cli

pytestmark = pytest.mark.timeout(300)


# -- 1. specsweep load, piped ---------------------------------------------------------------------------------


def test_load_piped_without_requests_or_duration_says_its_default_budget(tmp_path: Path) -> None:
    """Neither -n nor --duration, stdout and stderr pipes (``| cat``): the level's line gives the request count
    the load sends by default (4 x C, at least 16), and the table follows."""
    with _simulator(0) as url:
        proc = run_cli("load", "--url", url, "--model", "sim", "-c", "1", "--max-tokens", "8", env=narrow(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert "C=1: 16 requests after 3 warm-up requests (1/1)" in proc.stderr.splitlines(), proc.stderr
    assert re.search(r"^ C=1 +16 +0 ", proc.stdout, re.M), proc.stdout
