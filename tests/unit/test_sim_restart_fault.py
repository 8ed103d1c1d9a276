"""The simulator's ``restart-mid-point`` fault: its flag (orchestrator/sim/faults.py)."""

from __future__ import annotations

import pytest

from orchestrator.errors import ConfigError
from orchestrator.sim.config import parse_args
from orchestrator.sim.faults import FAULT_NAMES, parse_faults


def test_the_flag_takes_a_request_count_and_an_optional_draft_setting() -> None:
    assert "restart-mid-point" in FAULT_NAMES
    plain = parse_faults(["restart-mid-point=6"])
    assert (plain.restart_after, plain.restart_draft_tokens) == (6, None) and plain
    other = parse_faults(["restart-mid-point=6:3"])
    assert (other.restart_after, other.restart_draft_tokens) == (6, 3)
    for bad in ("restart-mid-point", "restart-mid-point=0", "restart-mid-point=x", "restart-mid-point=4:0"):
        with pytest.raises(ConfigError):
            parse_faults([bad])
    config = parse_args(["--fault", "restart-mid-point=4:3", "--algorithm", "linear"])
    assert config.faults.restart_after == 4 and config.draft_tokens == 16  # the first process keeps its own
