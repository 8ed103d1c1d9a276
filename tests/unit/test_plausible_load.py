"""A record's load is one a client sends (orchestrator/runs/plausible.py ``impossible_load``; issue 58, S10: a
concurrency of -4 or 0 became a load of its own, with a winner)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.runs.plausible import impossible_load
from orchestrator.runs.record import Record


@pytest.mark.parametrize(
    ("concurrency", "rate", "refused"),
    [
        pytest.param(1, None, None, id="c1"),
        pytest.param(512, None, None, id="c512"),
        pytest.param(None, 0.5, None, id="rate-half"),
        pytest.param(-4, None, "concurrency is -4", id="c-minus-4"),
        pytest.param(0, None, "concurrency is 0", id="c0"),
        pytest.param(10**300, None, "concurrency is 1000", id="c-10-to-300"),
        pytest.param(None, 0.0, "rate is 0.0", id="rate-0"),
        pytest.param(None, -2, "rate is -2", id="rate-negative"),
        pytest.param(None, math.inf, "rate is inf", id="rate-infinite"),
    ],
)
def test_a_load_no_client_sends_is_refused(concurrency: Any, rate: Any, refused: str | None) -> None:
    why = impossible_load(concurrency, rate)
    assert (why is None) == (refused is None) and (refused is None or refused in str(why)), why
    fields = {
        "run_id": "r",
        "experiment": "e",
        "deployment_id": "d",
        "point_id": "p",
        "config_hash": "c",
        "host": "h",
        "variant": "v",
        "mode": "rate" if rate is not None else "concurrency",
        "concurrency": concurrency,
        "rate": rate,
        "status": "ok",
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:00:10Z",
    }
    if refused is None:
        Record.model_validate(fields)
    else:
        with pytest.raises(ValidationError, match=refused.split(" is ")[0]):
            Record.model_validate(fields)
