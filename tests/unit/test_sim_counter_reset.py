"""The simulator's ``counter-reset`` fault: its flag (orchestrator/sim/faults.py); what it does to each dialect's
``/metrics`` is driven through real servers in tests/integration/test_counter_reset_cli.py."""

from __future__ import annotations

import pytest

from orchestrator.errors import ConfigError
from orchestrator.sim.config import parse_args
from orchestrator.sim.faults import FAULT_NAMES, parse_faults


def test_the_flag_takes_a_request_count() -> None:
    assert "counter-reset" in FAULT_NAMES
    faults = parse_faults(["counter-reset=7"])
    assert faults.counter_reset_after == 7 and faults.specs == ("counter-reset=7",)
    for bad in ("counter-reset", "counter-reset=0", "counter-reset=x"):
        with pytest.raises(ConfigError):
            parse_faults([bad])
    both = parse_args(["--fault", "counter-reset=3", "--fault", "restart-mid-point=9", "--algorithm", "linear"])
    assert (both.faults.counter_reset_after, both.faults.restart_after) == (3, 9)
