"""The draft-length schedule's rules on hand-made answers (the answer's winners, ties and beaten ones as the
analysis gives them; nothing here recomputes a statistic): ties take the smallest k, no win over
autoregressive beyond noise gives k = 0, boundaries sit at the higher measured load, the last range runs to
the maximum batch size, and the flag text is vLLM's ``--speculative-config``."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from orchestrator.analysis.answer import Answer, Counts, LoadAnswer, PointAnswer
from orchestrator.analysis.breakeven import BreakEven
from orchestrator.analysis.breakeven import break_even as _break_even
from orchestrator.analysis.schedule import ScheduleError, schedule, vllm_speculative_config

AR = "autoregressive"


def _cmd(k: int) -> str:
    spec = f'{{"method": "ngram", "prompt_lookup_max": 4, "num_speculative_tokens": {k}}}'
    return f"vllm serve m --speculative-config '{spec}'"


def _point(label: str, variant: str, load: int, k: int | None, baseline: bool = False) -> PointAnswer:
    return PointAnswer(
        host="h",
        workload="",
        label=label,
        variant=variant,
        params={"k": k} if k is not None else {},
        baseline=baseline,
        mode="concurrency",
        load=float(load),
        load_label=f"C={load}",
        status="ok",
        windows=1,
        requests=10,
        lost_requests=0,
        why=None,
        ci_method=None,
        figures={},
    )


def _level(load: int, winner: str, tied: list[str], beats: list[str], margin: float = 0.1) -> LoadAnswer:
    return LoadAnswer(
        host="h",
        workload="",
        mode="concurrency",
        load=float(load),
        load_label=f"C={load}",
        metric="output_tok_s",
        winner=winner,
        value=100.0,
        lo=90.0,
        hi=110.0,
        se=1.0,
        tied=tied,
        beats=beats,
        runner_up=(tied or beats or [None])[0],  # type: ignore[list-item]
        margin=margin,
        margin_lo=margin / 2,
        margin_hi=margin * 2,
        decided=not tied,
        basis="",
    )


def _answer(ks: list[int], loads: list[int], levels: list[LoadAnswer]) -> Answer:
    points: list[PointAnswer] = []
    rows: list[dict[str, Any]] = []
    for load in loads:
        points.append(_point(AR, AR, load, None, baseline=True))
        for k in ks:
            points.append(_point(f"ngram k={k}", "ngram", load, k))
    rows.append({"label": AR, "command": "vllm serve m", "role": "ar", "speculative": False})
    for k in ks:
        rows.append({"label": f"ngram k={k}", "command": _cmd(k), "role": None, "speculative": True})
    analysis: Any = SimpleNamespace(frame=pd.DataFrame(rows), path=Path("run"), metric="output_tok_s")
    return Answer(analysis=analysis, points=points, loads=levels, counts=Counts(planned=len(points)))


def break_even(ans: Answer) -> list[BreakEven]:
    return _break_even(ans.points, ans.loads, ans.analysis.frame)


ALL = ["ngram k=1", "ngram k=2", "ngram k=4"]


def _others(winner: str, tied: list[str]) -> list[str]:
    return [lb for lb in [*ALL, AR] if lb != winner and lb not in tied]


def test_the_winner_changes_with_load_and_the_boundary_sits_at_the_higher_measured_load() -> None:
    levels = [
        _level(1, "ngram k=4", [], _others("ngram k=4", [])),
        _level(2, "ngram k=4", [], _others("ngram k=4", [])),
        _level(4, "ngram k=1", [], _others("ngram k=1", [])),
        _level(8, "ngram k=1", [], _others("ngram k=1", [])),
    ]
    sched = schedule(_answer([1, 2, 4], [1, 2, 4, 8], levels), max_batch_size=64)
    assert sched.entries == [[1, 3, 4], [4, 64, 1]]
    assert [c.load for c in sched.ranges[0].evidence] == [1, 2]
    assert sched.ranges[0].evidence[0].beats_ar is True
    assert sched.ranges[0].evidence[0].margin_lo == 0.05
    assert any("between the measured loads C=2 and C=4" in n for n in sched.notes)
    config = vllm_speculative_config(sched)
    assert config == {
        "method": "ngram",
        "prompt_lookup_max": 4,
        "num_speculative_tokens": 4,
        "num_speculative_tokens_per_batch_size": [[1, 3, 4], [4, 64, 1]],
    }


def test_ties_take_the_smallest_k() -> None:
    levels = [
        _level(1, "ngram k=4", ["ngram k=2"], _others("ngram k=4", ["ngram k=2"])),
        _level(4, "ngram k=2", ["ngram k=4", "ngram k=1"], [AR]),
    ]
    sched = schedule(_answer([1, 2, 4], [1, 4], levels), max_batch_size=16)
    assert sched.entries == [[1, 3, 2], [4, 16, 1]]
    assert sched.ranges[0].evidence[0].label == "ngram k=2"
    assert "smallest k among those tied" in sched.ranges[0].evidence[0].why


def test_no_speculative_win_over_ar_gives_k_0_and_no_speculative_config() -> None:
    levels = [
        _level(1, AR, ["ngram k=1"], ["ngram k=2", "ngram k=4"]),
        _level(4, "ngram k=4", [AR, "ngram k=2"], ["ngram k=1"]),
    ]
    sched = schedule(_answer([1, 2, 4], [1, 4], levels), max_batch_size=16)
    assert sched.entries == [[1, 16, 0]]
    assert [c.beats_ar for c in sched.ranges[0].evidence] == [False, False]
    assert "beats autoregressive beyond noise" in sched.ranges[0].evidence[1].why
    assert vllm_speculative_config(sched) is None


def test_a_k_that_never_wins_is_absent_and_gaps_between_loads_are_filled_by_the_rule() -> None:
    levels = [
        _level(2, "ngram k=2", [], _others("ngram k=2", [])),
        _level(16, "ngram k=2", [], _others("ngram k=2", [])),
        _level(64, AR, [], ALL),
    ]
    sched = schedule(_answer([1, 2, 4], [2, 16, 64], levels), max_batch_size=256)
    assert sched.entries == [[1, 63, 2], [64, 256, 0]]
    assert 4 not in {r.k for r in sched.ranges} and 1 not in {r.k for r in sched.ranges}
    assert any("1..1 were not measured" in n for n in sched.notes)
    assert any("65..256 were not measured" in n for n in sched.notes)
    assert vllm_speculative_config(sched)["num_speculative_tokens"] == 2  # type: ignore[index]


def test_one_load_only_gives_one_range_to_the_maximum_batch_size() -> None:
    sched = schedule(_answer([1, 4], [4], [_level(4, "ngram k=4", [], ["ngram k=1", AR])]))
    assert sched.entries == [[1, 128, 4]]  # vLLM's default max_num_seqs when the command sets none


def test_a_run_without_an_autoregressive_baseline_or_with_k_fixed_is_refused() -> None:
    ans = _answer([1, 2], [1], [_level(1, "ngram k=2", [], ["ngram k=1", AR])])
    ans.analysis.frame.loc[0, "role"] = None
    with pytest.raises(ScheduleError, match="no autoregressive baseline"):
        schedule(ans)
    fixed = _answer([2], [1], [_level(1, "ngram k=2", [], [AR])])
    with pytest.raises(ScheduleError, match="draft length varies; found none"):
        schedule(fixed)


def _eagle(ans: Answer, loads: list[int]) -> Answer:
    """``ans`` with a second speculative variant, eagle, measured at ``loads``."""
    ans.points += [_point("eagle", "eagle", load, 3) for load in loads]
    frame = ans.analysis.frame
    extra = pd.DataFrame([{"label": "eagle", "command": _cmd(3), "role": None, "speculative": True}])
    ans.analysis.frame = pd.concat([frame, extra], ignore_index=True)
    return ans


def test_break_even_is_the_lowest_load_where_the_method_no_longer_beats_ar_with_its_bracket() -> None:
    levels = [
        _level(1, "ngram k=4", [], _others("ngram k=4", [])),
        _level(2, "ngram k=2", [], _others("ngram k=2", [])),
        _level(4, "ngram k=1", [AR], ["ngram k=2", "ngram k=4"]),  # AR tied: no longer beats it
        _level(8, AR, [], ALL),
    ]
    (item,) = break_even(_answer([1, 2, 4], [1, 2, 4, 8], levels))
    assert (item.variant, item.load, item.last_win, item.judged) == ("ngram", 4, 2, [1, 2, 4, 8])
    assert "the crossing lies in (2, 4]" in item.text and item.wins_again == []
    bumpy = [_level(1, AR, [], ALL), _level(4, "ngram k=1", [], _others("ngram k=1", []))]
    (item,) = break_even(_answer([1, 2, 4], [1, 4], bumpy))
    assert (item.load, item.wins_again) == (1, [4]) and "no single crossing" in item.text


def test_break_even_not_reached_never_winning_and_not_judged_loads() -> None:
    always = [_level(c, "ngram k=2", [], _others("ngram k=2", [])) for c in (1, 4)]
    (item,) = break_even(_answer([1, 2], [1, 4], always))
    assert item.load is None and "break-even not reached" in item.text
    never = [_level(c, AR, [], ["ngram k=1", "ngram k=2"]) for c in (1, 4)]
    (item,) = break_even(_answer([1, 2], [1, 4], never))
    assert (item.load, item.last_win) == (1, None) and "at the lowest judged load C=1" in item.text
    # eagle wins at C=1 and C=2: ngram's standing there is not in the answer; ngram wins at C=4, AR at C=8
    levels = [
        _level(1, "eagle", [], ["ngram k=1", "ngram k=2", AR]),
        _level(2, "eagle", [], ["ngram k=1", "ngram k=2", AR]),
        _level(4, "ngram k=2", [], ["eagle", "ngram k=1", AR]),
        _level(8, AR, [], ["eagle", "ngram k=1", "ngram k=2"]),
    ]
    by_variant = {b.variant: b for b in break_even(_eagle(_answer([1, 2], [1, 2, 4, 8], levels), [1, 2, 4, 8]))}
    assert (by_variant["ngram"].load, by_variant["ngram"].last_win) == (8, 4)
    assert by_variant["ngram"].not_judged == [1, 2]
    assert (by_variant["eagle"].load, by_variant["eagle"].last_win, by_variant["eagle"].not_judged) == (8, 2, [4])
