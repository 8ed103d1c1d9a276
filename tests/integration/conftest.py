"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.harness import local_leftovers_restored


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """The CLI's $HOME; on the way out, whatever a test's runs left there (a simulator whose CLI was killed, a
    marker, a lock) is undone, as ``specsweep restore --break-lock`` would."""
    path = tmp_path / "home"
    path.mkdir()
    try:
        yield path
    finally:
        with local_leftovers_restored(path, *tmp_path.glob("*.yaml")):
            pass
