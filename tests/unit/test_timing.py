"""The tests' time scale (tests/timing.py): every limit of a test grows on a busy machine (issue 59, item 8)."""

from __future__ import annotations

import pytest

from tests import conftest
from tests.timing import ENV, MAX_MEASURED, scaled, time_scale


@pytest.mark.parametrize(
    ("given", "factor"),
    [
        pytest.param("1", 1.0, id="one"),
        pytest.param("4.5", 4.5, id="fraction"),
        pytest.param(" 12 ", 12.0, id="spaces"),
    ],
)
def test_the_variable_sets_the_factor(monkeypatch: pytest.MonkeyPatch, given: str, factor: float) -> None:
    monkeypatch.setenv(ENV, given)
    assert time_scale() == factor
    assert scaled(30) == 30 * factor


@pytest.mark.parametrize("given", ["fast", "0.5", "0", "-2", "nan"])
def test_a_factor_below_one_or_not_a_number_is_refused(monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    monkeypatch.setenv(ENV, given)
    with pytest.raises(ValueError, match=ENV):
        time_scale()


@pytest.mark.parametrize(
    ("load", "cores", "factor"),
    [
        pytest.param(0.3, 2, 1.0, id="quiet"),
        pytest.param(6.0, 2, 3.0, id="three-per-core"),
        pytest.param(37.0, 2, MAX_MEASURED, id="capped"),
    ],
)
def test_without_the_variable_the_load_per_core_sets_it(
    monkeypatch: pytest.MonkeyPatch, load: float, cores: int, factor: float
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr("os.getloadavg", lambda: (load, load, load))
    monkeypatch.setattr("os.cpu_count", lambda: cores)
    assert time_scale() == factor


@pytest.mark.timeout(7)
def test_each_tests_pytest_timeout_is_scaled(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """The conftest's collection hook puts a scaled ``timeout`` mark in front of each test's own."""
    before = request.node.get_closest_marker("timeout").args[0]
    monkeypatch.setenv(ENV, "3")
    conftest._scale_time_limits([request.node])
    assert request.node.get_closest_marker("timeout").args[0] == 3 * before
