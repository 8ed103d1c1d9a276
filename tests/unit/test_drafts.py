"""The k an engine ran against the k its schedule gives (orchestrator/analysis/drafts.py), on hand-made window
rows: draft tokens per draft near the scheduled k is a schedule run; the largest k at a load scheduled lower, or
drafting in most steps where k = 0, is a schedule ignored; a window without counters cannot tell."""

from __future__ import annotations

import pytest

from orchestrator.analysis.drafts import command_schedule, drafts_per_draft, k_used

SPEC = command_schedule(
    "vllm serve m --speculative-config "
    '\'{"method":"ngram","num_speculative_tokens":4,"num_speculative_tokens_per_batch_size":[[1,1,4],[2,3,1],[4,64,0]]}\''
)


def _row(drafts: float | None, tokens: float | None, accepted: float = 0, generated: float = 400) -> dict:
    return {
        "prom_details_drafts": drafts,
        "prom_details_draft_tokens": tokens,
        "prom_details_accepted": accepted,
        "prom_details_generated": generated,
    }


def test_the_schedule_is_read_from_the_command_and_a_plain_config_is_none() -> None:
    assert SPEC == (4, ((1, 1, 4), (2, 3, 1), (4, 64, 0)))
    assert command_schedule("vllm serve m --speculative-config '{\"num_speculative_tokens\": 4}'") is None
    assert command_schedule("python -m orchestrator.sim --draft-tokens 4") is None
    assert command_schedule(None) is None


@pytest.mark.parametrize(
    ("load", "row", "ran"),
    [
        pytest.param(1, _row(100, 400), True, id="k4-at-C1-drafts-4"),
        pytest.param(2, _row(100, 110), True, id="k1-at-C2-tail-mixes-a-few-4s"),
        pytest.param(2, _row(100, 400), False, id="k1-at-C2-drafts-4-ignored"),
        pytest.param(4, _row(10, 40, accepted=20, generated=400), True, id="k0-at-C4-tail-only"),
        pytest.param(4, _row(100, 400, accepted=150, generated=400), False, id="k0-at-C4-drafting-everywhere"),
        pytest.param(2, _row(0, 0), False, id="k1-no-draft-at-all"),
        pytest.param(4, _row(0, 0), True, id="k0-no-draft-at-all"),
    ],
)
def test_k_used_tells_a_schedule_run_from_one_ignored(load: int, row: dict, ran: bool) -> None:
    assert SPEC is not None
    assert k_used(row, load, SPEC).ran is ran


def test_no_counters_cannot_tell_and_the_log_is_the_fallback_source() -> None:
    assert SPEC is not None
    assert k_used({}, 2, SPEC).ran is None
    assert drafts_per_draft({"server_details_drafted": 30, "server_details_drafts": 10}) == (3.0, "log")
    assert drafts_per_draft({"prom_details_draft_tokens": 8, "prom_details_drafts": 2}) == (4.0, "prometheus")
    assert drafts_per_draft({"prom_details_draft_tokens": 0, "prom_details_drafts": 0}) == (None, None)


def test_the_check_names_the_load_where_the_engine_ignored_the_schedule() -> None:
    import pandas as pd

    from orchestrator.analysis.checks import CheckContext, schedule_ignored
    from orchestrator.analysis.roles import BaselineRoles

    command = (
        "vllm serve m --speculative-config "
        '\'{"num_speculative_tokens":4,"num_speculative_tokens_per_batch_size":[[1,1,4],[2,8,1]]}\''
    )
    rows = [
        {**_row(100, 400), "concurrency": 1, "load_label": "C=1"},
        {**_row(100, 400), "concurrency": 4, "load_label": "C=4"},  # 4 per draft where k is 1: ignored
        {**_row(100, 400), "concurrency": 4, "load_label": "C=4", "command": "vllm serve m"},  # no schedule
    ]
    frame = pd.DataFrame(
        [{"command": command, "mode": "concurrency", "status": "ok", "alias_of": None, "label": "s", **r} for r in rows]
    )
    found = schedule_ignored(CheckContext(frame=frame, roles=BaselineRoles(ar=None, linear=None)))
    assert [(f.load, f.severity) for f in found] == [("C=4", "error")]
    assert "4.00 draft tokens per draft against the scheduled k = 1" in found[0].message
