"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.harness import local_leftovers_restored


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """The CLI's $HOME; whatever a run left there is undone on the way out."""
    path = tmp_path / "home"
    path.mkdir()
    try:
        yield path
    finally:
        with local_leftovers_restored(path, *tmp_path.glob("*.yaml")):
            pass
