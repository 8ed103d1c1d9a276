"""Fixtures of the reliability suite: the system tests' hosts, and an outcome recorder for the figures.

The test hosts come from ``tests/system/conftest.py`` (imported, so this directory boots its own host pool the
first time a test here needs one, and shuts it down at the end of the session).

Each scenario fills an :class:`Outcome` (points lost, hosts left modified, injection attempts, ...). When
``SPECSWEEP_RELIABILITY_LOG`` names a file, every outcome is appended to it as one JSON line with whether the
scenario passed; ``bench/reliability_figures.py`` turns those lines into the reliability table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from tests.system.conftest import running_sim_unit, sim_unit, testhost, testhost_pair, testhost_pool

__all__ = ["Outcome", "running_sim_unit", "sim_unit", "testhost", "testhost_pair", "testhost_pool"]

LOG_ENV = "SPECSWEEP_RELIABILITY_LOG"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a long reliability scenario (runs by default; -m 'not slow' skips it)")


@dataclass
class Outcome:
    """What one scenario measured, for the reliability figures."""

    scenario: str
    kind: str = "fault"  # fault | injection | secret | hostkey
    points_lost: int = 0
    hosts_modified: int = 0
    injection_attempts: int = 0
    injections_reached: int = 0
    detail: str = ""


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    report = yield
    setattr(item, f"rep_{call.when}", report)
    return report


@pytest.fixture
def outcome(request: pytest.FixtureRequest) -> Iterator[Outcome]:
    """An Outcome named after the test; written to the figures log (if asked) after the test ran."""
    node = request.node
    result = Outcome(scenario=node.name.removeprefix("test_"))
    yield result
    target = os.environ.get(LOG_ENV)
    if not target:
        return
    call = getattr(node, "rep_call", None)
    passed = bool(call is not None and call.passed)
    skipped = bool(call is None or call.skipped)
    entry = {**asdict(result), "passed": passed, "skipped": skipped}
    with Path(target).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")
