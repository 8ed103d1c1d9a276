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
    """What one scenario really did, for the reliability figures. Every count is of this scenario alone: a
    sweep, a host comparison or a hostile value shared with another scenario is counted by one of them only.

    ``kind``: ``fault`` (a fault injected into a real run), ``hostkey``, ``injection`` (hostile values through
    a sweep to the test host), ``validation`` (hostile values refused before any host), ``secret``.
    """

    scenario: str
    kind: str = "fault"
    faults: int = 0  # faults injected into the run
    sweeps: int = 0  # sweeps run (a resume is one more)
    points_checked: int = 0  # planned points checked to be recorded exactly once
    points_lost: int = 0  # of those, or of the points recorded before a fault, how many had no record
    host_checks: int = 0  # host snapshots compared with the one taken before the run
    hosts_modified: int = 0  # of those, how many differed
    injection_attempts: int = 0  # distinct hostile values that reached the host through a sweep
    injections_reached: int = 0  # of those, how many took effect (a command ran, a directive appeared)
    refused: int = 0  # hostile values refused by validation, before any host
    secret_checks: int = 0  # outputs searched for a secret (files, CLI outputs, host files and properties)
    secret_leaks: int = 0  # of those, how many held it
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
    entry = {"type": "outcome", "nodeid": node.nodeid, **asdict(result), "passed": passed, "skipped": skipped}
    _log(target, entry)


def _log(target: str, entry: dict[str, object]) -> None:
    with Path(target).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Every phase of every test, for the figures script: a test that errors in set-up, fails, or skips must
    fail the figures, not vanish from them (its outcome fixture may never have run)."""
    target = os.environ.get(LOG_ENV)
    if target:
        _log(target, {"type": "report", "nodeid": report.nodeid, "when": report.when, "outcome": report.outcome})


def pytest_collection_finish(session: pytest.Session) -> None:
    """The tests the figures must account for, every one of them."""
    target = os.environ.get(LOG_ENV)
    if target:
        for item in session.items:
            _log(target, {"type": "collected", "nodeid": item.nodeid})
