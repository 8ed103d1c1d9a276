"""How a load point is shared between worker processes: every request once, the streams and the rate in full."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.errors import LoadError
from orchestrator.load.settings import LoadSettings
from orchestrator.load.workers import shared_clock, split

URL = "http://127.0.0.1:1"


@given(
    concurrency=st.integers(1, 300),
    requests=st.one_of(st.none(), st.integers(1, 2000)),
    warmup=st.integers(0, 300),
    workers=st.integers(1, 16),
)
def test_a_closed_loop_split_covers_every_index_once(
    concurrency: int, requests: int | None, warmup: int, workers: int
) -> None:
    settings = LoadSettings(url=URL, concurrency=concurrency, requests=requests, warmup=warmup, workers=workers)
    shares = split(settings)
    n = len(shares)
    assert 1 <= n <= workers
    assert n <= concurrency
    budget = settings.request_budget
    assert budget is not None
    assert n <= budget
    assert sum(s.concurrency or 0 for s in shares) == concurrency
    assert all((s.concurrency or 0) >= 1 for s in shares)
    assert sorted(s.index(i) for s in shares for i in range(s.budget or 0)) == list(range(budget))
    assert sorted(s.index(i) for s in shares for i in range(s.warmup)) == list(range(warmup))
    # The first wave, the first C indices, is exactly the workers' first waves.
    first = sorted(s.index(i) for s in shares for i in range(s.concurrency or 0))
    assert first == list(range(concurrency))


@given(rate=st.floats(0.1, 1e4), cap=st.one_of(st.none(), st.integers(1, 500)), workers=st.integers(1, 8))
def test_an_open_loop_split_shares_the_rate_and_the_cap(rate: float, cap: int | None, workers: int) -> None:
    settings = LoadSettings(url=URL, rate=rate, max_in_flight=cap, duration_s=5.0, workers=workers)
    shares = split(settings)
    assert len(shares) == workers  # no request budget, no concurrency: nothing limits the number of workers
    assert sum(s.rate or 0.0 for s in shares) == pytest.approx(rate)
    assert all(s.budget is None for s in shares)
    if cap is None:
        assert all(s.max_in_flight is None for s in shares)
    else:
        assert sum(s.max_in_flight or 0 for s in shares) >= cap  # each worker at least one in flight


def test_workers_is_checked() -> None:
    with pytest.raises(LoadError, match="workers"):
        LoadSettings(url=URL, concurrency=2, workers=0)
    assert LoadSettings(url=URL, concurrency=2).workers == 1


def test_this_machine_has_one_clock_for_every_process() -> None:
    assert shared_clock()  # Linux: clock_gettime(CLOCK_MONOTONIC)
