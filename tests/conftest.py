"""Shared fixtures: paths of the checkout and a writer for experiment files."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo_root() -> Path:
    return ROOT


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write ``text`` to ``tmp_path/name`` and return the path."""

    def write(text: str, name: str = "exp.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    # pytest runs fixture teardown on KeyboardInterrupt but not on SIGTERM: a CI time-out or a `kill` would
    # otherwise leave test hosts (containers, network namespaces) and simulators behind.
    raise KeyboardInterrupt


signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
