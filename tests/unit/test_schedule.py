"""The draft-length schedule's rules on hand-made answers (the answer's figures, winners, ties and beaten ones
as the analysis gives them): the k fitted to the figures never grows with the load, k = 0 only where the
variant measured it, a schedule only where it is expected to beat the best static configuration (else that
one), boundaries sit at the higher measured load, the last range runs to the maximum batch size, and the flag
text is vLLM's ``--speculative-config``."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from orchestrator.analysis.answer import Answer, Counts, Figure, LoadAnswer, PointAnswer
from orchestrator.analysis.breakeven import BreakEven
from orchestrator.analysis.breakeven import break_even as _break_even
from orchestrator.analysis.schedule import ScheduleError, schedule, schedule_text, vllm_speculative_config

AR = "autoregressive"


def _cmd(k: int) -> str:
    spec = f'{{"method": "ngram", "prompt_lookup_max": 4, "num_speculative_tokens": {k}}}'
    return f"vllm serve m --speculative-config '{spec}'"


def _point(
    label: str, variant: str, load: int, k: int | None, baseline: bool = False, value: float | None = None
) -> PointAnswer:
    figures = {}
    if value is not None:  # an interval of +-5%
        figures["output_tok_s"] = Figure(value, value * 0.95, value * 1.05, value * 0.025, "client", "exact")
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
        figures=figures,
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


def _from_levels(levels: list[LoadAnswer]) -> dict[tuple[str, int], float]:
    """Figures that agree with the levels: the winner 100, those tied with it 97, the beaten 70."""
    out: dict[tuple[str, int], float] = {}
    for lv in levels:
        out[(lv.winner, int(lv.load))] = 100.0
        out.update({(label, int(lv.load)): 97.0 for label in lv.tied})
        out.update({(label, int(lv.load)): 70.0 for label in lv.beats})
    return out


def _answer(
    ks: list[int],
    loads: list[int],
    levels: list[LoadAnswer],
    values: dict[tuple[str, int], float] | None = None,
    cmd: Callable[[int], str] = _cmd,
) -> Answer:
    values = values if values is not None else _from_levels(levels)
    points: list[PointAnswer] = []
    rows: list[dict[str, Any]] = []
    for load in loads:
        points.append(_point(AR, AR, load, None, baseline=True, value=values.get((AR, load))))
        for k in ks:
            label = f"ngram k={k}"
            points.append(_point(label, "ngram", load, k, value=values.get((label, load))))
    rows.append({"label": AR, "command": "vllm serve m", "role": "ar", "speculative": False})
    for k in ks:
        rows.append({"label": f"ngram k={k}", "command": cmd(k), "role": None, "speculative": True})
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
    assert sched.entries == [[1, 2, 4], [3, 64, 1]]  # the boundary just above the lower load: C=4 runs k = 1 at 3
    assert [c.load for c in sched.ranges[0].evidence] == [1, 2]
    assert sched.ranges[0].evidence[0].beats_ar is True
    assert sched.ranges[0].evidence[0].margin_lo == 0.05
    assert any("between the measured loads C=2 and C=4" in n for n in sched.notes)
    config = vllm_speculative_config(sched)
    assert config == {
        "method": "ngram",
        "prompt_lookup_max": 4,
        "num_speculative_tokens": 4,
        "num_speculative_tokens_per_batch_size": [[1, 2, 4], [3, 64, 1]],
    }


def test_erratic_ties_give_a_monotone_schedule_that_beats_the_best_static() -> None:
    # The figures of bench/RESULTS-schedule.md section 1's shape: k = 4 best at C=1, ties at C=2 and C=4 (the old
    # rule's smallest tied k gave 2, 1, 2, 0), k = 1 best at C=8.
    figures = {
        (AR, 1): 50.0, ("ngram k=1", 1): 80.0, ("ngram k=2", 1): 95.0, ("ngram k=4", 1): 100.0,
        (AR, 2): 90.0, ("ngram k=1", 2): 150.0, ("ngram k=2", 2): 148.0, ("ngram k=4", 2): 152.0,
        (AR, 4): 170.0, ("ngram k=1", 4): 230.0, ("ngram k=2", 4): 236.0, ("ngram k=4", 4): 228.0,
        (AR, 8): 300.0, ("ngram k=1", 8): 340.0, ("ngram k=2", 8): 320.0, ("ngram k=4", 8): 280.0,
    }  # fmt: skip
    levels = [
        _level(1, "ngram k=4", ["ngram k=2"], ["ngram k=1", AR]),
        _level(2, "ngram k=4", ["ngram k=1", "ngram k=2"], [AR]),
        _level(4, "ngram k=2", ["ngram k=1", "ngram k=4"], [AR]),
        _level(8, "ngram k=1", ["ngram k=2", AR], ["ngram k=4"]),
    ]
    sched = schedule(_answer([1, 2, 4], [1, 2, 4, 8], levels, figures), max_batch_size=16)
    ks = [c.k for r in sched.ranges for c in r.evidence]
    assert ks == sorted(ks, reverse=True), ks  # never grows with the load
    assert ks == [4, 4, 2, 1]
    assert sched.entries == [[1, 2, 4], [3, 4, 2], [5, 16, 1]]
    assert sched.recommend == "schedule" and sched.static == "ngram k=2"
    assert sched.scores["schedule"] > sched.scores["ngram k=2"]
    assert "expected to beat the best static configuration ngram k=2" in schedule_text(sched)
    assert sched.ranges[0].evidence[0].why.startswith("the best figure of the variant at this load")
    assert sched.to_dict()["recommendation"]["kind"] == "schedule"


def test_when_a_static_configuration_is_best_it_is_recommended_instead() -> None:
    # Autoregressive best everywhere (the README's vLLM example, where the old rule gave k = 0 everywhere).
    levels = [
        _level(1, AR, ["ngram k=1"], ["ngram k=2", "ngram k=4"]),
        _level(4, AR, ["ngram k=4", "ngram k=2"], ["ngram k=1"]),
    ]
    sched = schedule(_answer([1, 2, 4], [1, 4], levels), max_batch_size=16)
    assert 0 not in {r.k for r in sched.ranges}  # k = 0 was not measured in the variant: never scheduled
    assert (sched.recommend, sched.static) == ("static", AR)
    text = schedule_text(sched)
    assert f"# recommended: run {AR} at every batch size (a static configuration), not a schedule" in text
    assert "# the fitted schedule, for reference: --speculative-config" in text
    assert any(n.startswith("C=1: autoregressive measured +3.1% over the schedule's") for n in sched.notes), sched.notes
    # A schedule that is one static configuration everywhere: that configuration.
    one = [_level(c, "ngram k=2", [], ["ngram k=1", "ngram k=4", AR]) for c in (1, 4)]
    sched = schedule(_answer([1, 2, 4], [1, 4], one), max_batch_size=16)
    assert sched.constant and (sched.recommend, sched.static) == ("static", "ngram k=2")
    assert sched.why.startswith("the fitted schedule runs ngram k=2 at every measured load; ngram k=2 over ")


def test_a_schedule_beaten_beyond_noise_by_the_best_static_is_not_recommended() -> None:
    # k = 1 best at C=1 and C=8, k = 4 at C=4: the fit (4, 4, 1) totals more than static k = 1, but at C=1 the
    # answer says k = 1 beats k = 4 beyond noise, so the schedule is not expected to beat k = 1 there.
    figures = {
        ("ngram k=1", 1): 100.0, ("ngram k=2", 1): 60.0, ("ngram k=4", 1): 95.0,
        ("ngram k=1", 4): 60.0, ("ngram k=2", 4): 90.0, ("ngram k=4", 4): 100.0,
        ("ngram k=1", 8): 100.0, ("ngram k=2", 8): 60.0, ("ngram k=4", 8): 50.0,
    }  # fmt: skip
    levels = [
        _level(1, "ngram k=1", [], ["ngram k=2", "ngram k=4"]),
        _level(4, "ngram k=4", ["ngram k=2"], ["ngram k=1"]),
        _level(8, "ngram k=1", [], ["ngram k=2", "ngram k=4"]),
    ]
    ans = _answer([1, 2, 4], [1, 4, 8], levels, figures)
    ans.analysis.frame = ans.analysis.frame[ans.analysis.frame["label"] != AR].reset_index(drop=True)
    ans.points = [p for p in ans.points if p.label != AR]
    sched = schedule(ans, max_batch_size=16)
    assert [c.k for r in sched.ranges for c in r.evidence] == [4, 4, 1]
    assert sched.ranges[0].evidence[0].why.startswith("the non-increasing fit (ngram k=1 measured +5.3% here")
    assert sched.scores["schedule"] > sched.scores["ngram k=1"]
    assert (sched.recommend, sched.static) == ("static", "ngram k=1")
    assert "ngram k=1 beats the schedule's choice beyond noise at C=1" in sched.why


def test_k_0_is_scheduled_only_where_the_variant_measured_it() -> None:
    figures = {(AR, 1): 40.0, (AR, 8): 130.0}
    for load, ks in ((1, {0: 40.0, 1: 70.0, 2: 60.0}), (8, {0: 125.0, 1: 90.0, 2: 80.0})):
        figures.update({(f"ngram k={k}", load): v for k, v in ks.items()})
    levels = [
        _level(1, "ngram k=1", [], ["ngram k=0", "ngram k=2", AR]),
        _level(8, AR, ["ngram k=0"], ["ngram k=1", "ngram k=2"]),
    ]
    sched = schedule(_answer([0, 1, 2], [1, 8], levels, figures), max_batch_size=16)
    assert sched.entries == [[1, 1, 1], [2, 16, 0]]
    assert sched.ranges[1].evidence[0].label == "ngram k=0"  # the speculative server drafting nothing, measured
    assert sched.recommend == "schedule" and sched.static == "ngram k=1"


def test_a_k_that_never_wins_is_absent_and_gaps_between_loads_are_filled_by_the_rule() -> None:
    levels = [
        _level(2, "ngram k=2", [], _others("ngram k=2", [])),
        _level(16, "ngram k=2", [], _others("ngram k=2", [])),
        _level(64, AR, [], ALL),
    ]
    sched = schedule(_answer([1, 2, 4], [2, 16, 64], levels), max_batch_size=256)
    assert sched.entries == [[1, 16, 2], [17, 256, 1]]  # at C=64 the variant's k tie: the shorter one
    assert 4 not in {r.k for r in sched.ranges}
    assert any("1..1 were not measured" in n for n in sched.notes)
    assert any("65..256 were not measured" in n for n in sched.notes)
    assert vllm_speculative_config(sched)["num_speculative_tokens"] == 2  # type: ignore[index]
    assert (sched.recommend, sched.static) == ("static", "ngram k=2")  # the schedule only ties with it


def test_one_load_only_gives_one_range_to_the_maximum_batch_size() -> None:
    sched = schedule(_answer([1, 4], [4], [_level(4, "ngram k=4", [], ["ngram k=1", AR])]))
    assert sched.entries == [[1, 128, 4]]  # vLLM's default max_num_seqs when the command sets none


def test_a_run_without_an_autoregressive_baseline_is_fitted_and_with_k_fixed_is_refused() -> None:
    ans = _answer([1, 2], [1], [_level(1, "ngram k=2", [], ["ngram k=1", AR])])
    ans.analysis.frame.loc[0, "role"] = None
    sched = schedule(ans)
    assert sched.ar is None and sched.entries == [[1, 128, 2]]
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


def _widened(ans: Answer, share: float) -> Answer:
    """``ans`` with every figure's interval +-``share`` (its standard error half of that)."""
    from dataclasses import replace

    def wide(f: Figure) -> Figure:
        return Figure(f.value, f.value * (1 - share), f.value * (1 + share), f.value * share / 1.96, f.source, None)

    ans.points = [replace(p, figures={k: wide(f) for k, f in p.figures.items()}) for p in ans.points]
    return ans


def test_where_every_load_is_a_tie_nothing_is_recommended_and_every_estimate_has_its_interval() -> None:
    """Issue 59: after a vLLM sweep whose every load was a tie (intervals +-40%), `recommend --schedule` said
    `# recommended: the schedule: expected to beat the best static configuration ngram(k=1) (estimated total
    +0.4%)`, two weighted scores with no interval. Nothing can be told apart: it says so."""
    figures = {
        (AR, 1): 50.0, ("ngram k=1", 1): 51.0, ("ngram k=2", 1): 52.0, ("ngram k=4", 1): 53.0,
        (AR, 2): 90.0, ("ngram k=1", 2): 92.0, ("ngram k=2", 2): 91.0, ("ngram k=4", 2): 90.5,
        (AR, 4): 170.0, ("ngram k=1", 4): 172.0, ("ngram k=2", 4): 169.0, ("ngram k=4", 4): 168.0,
    }  # fmt: skip
    everyone = [AR, *ALL]
    levels = [
        _level(c, w, [x for x in everyone if x != w], [])
        for c, w in ((1, "ngram k=4"), (2, "ngram k=1"), (4, "ngram k=1"))
    ]
    sched = schedule(_widened(_answer([1, 2, 4], [1, 2, 4], levels, figures), 0.4), max_batch_size=16)
    assert sched.recommend == "none", sched.why
    text = schedule_text(sched)
    said = "no schedule or static configuration can be told apart from autoregressive at these loads; measure longer"
    assert said in text, text
    assert "# recommended: nothing to deploy yet:" in text
    assert "expected to beat" not in text
    assert sched.gain is not None and sched.gain.lo is not None and sched.gain.lo < 0 < sched.gain.hi  # type: ignore[operator]
    assert re.search(r"estimated total [+-]\d+\.\d% \[[+-]\d+\.\d% … [+-]\d+\.\d%\]", text), text
    doc = sched.to_dict()["recommendation"]
    assert doc["kind"] == "none" and doc["configuration"] is None
    assert doc["schedule_over_best_static"]["significant"] is False
    assert doc["best_static_over_reference"]["lo"] < 0


def test_a_schedule_told_apart_is_recommended_with_its_interval() -> None:
    figures = {
        (AR, 1): 50.0, ("ngram k=1", 1): 70.0, ("ngram k=2", 1): 80.0, ("ngram k=4", 1): 100.0,
        (AR, 8): 300.0, ("ngram k=1", 8): 400.0, ("ngram k=2", 8): 330.0, ("ngram k=4", 8): 250.0,
    }  # fmt: skip
    levels = [
        _level(1, "ngram k=4", [], ["ngram k=1", "ngram k=2", AR]),
        _level(8, "ngram k=1", [], ["ngram k=2", "ngram k=4", AR]),
    ]
    sched = schedule(_widened(_answer([1, 2, 4], [1, 8], levels, figures), 0.02), max_batch_size=16)
    assert sched.recommend == "schedule", sched.why
    assert sched.gain is not None and sched.gain.significant
    assert re.search(
        r"expected to beat the best static configuration ngram k=1 \(estimated total \+\d+\.\d% \[", sched.why
    )


def test_the_runs_contamination_is_repeated_with_the_schedule() -> None:
    from orchestrator.analysis.checks import Finding

    levels = [_level(c, "ngram k=2", [], ["ngram k=1", "ngram k=4", AR]) for c in (1, 4)]
    ans = _answer([1, 2, 4], [1, 4], levels)
    said = "12 of 12 points were measured while another specsweep sweep ran on this machine (other): contaminated"
    ans.findings = [Finding(check="overlapping_runs", point=None, severity="warning", message=said)]
    sched = schedule(ans, max_batch_size=16)
    assert f"# contaminated: {said}" in schedule_text(sched)
    assert sched.to_dict()["contamination"] == [said]


# The same --speculative-config as a rendered command may hold it (issue 58, R11): the k and the rest of the JSON
# are read from each, and the schedule keeps the rest (method, prompt_lookup_max).
_SPEC_FORMS = {
    "single-quoted": lambda k: (
        "vllm serve m --speculative-config "
        f"""'{{"method": "ngram", "prompt_lookup_max": 4, "num_speculative_tokens": {k}}}'"""
    ),
    "escaped-in-double-quoted-word": lambda k: (
        'bash -c "vllm serve m --speculative-config '
        f"""'{{\\"method\\": \\"ngram\\", \\"prompt_lookup_max\\": 4, \\"num_speculative_tokens\\": {k}}}'\""""
    ),
    "escaped-double-quoted": lambda k: (
        "vllm serve m --speculative-config "
        f"""\"{{\\"method\\": \\"ngram\\", \\"prompt_lookup_max\\": 4, \\"num_speculative_tokens\\": {k}}}\" --port 1"""
    ),
    "unquoted": lambda k: (
        "vllm serve m --speculative-config="
        f"""{{"method":"ngram","prompt_lookup_max":4,"num_speculative_tokens":{k}}} -tp 1"""
    ),
    "multi-line": lambda k: (
        f"""vllm serve m --speculative-config '{{\n  "method": "ngram",\n  "prompt_lookup_max": 4,\n"""
        f"""  "num_speculative_tokens": {k}\n}}' --max-num-seqs 64"""
    ),
}


@pytest.mark.parametrize("form", list(_SPEC_FORMS), ids=list(_SPEC_FORMS))
def test_the_draft_length_and_the_config_are_read_from_every_form_of_the_flag(form: str) -> None:
    cmd = _SPEC_FORMS[form]
    levels = [
        _level(1, "ngram k=4", [], _others("ngram k=4", [])),
        _level(4, "ngram k=1", [], _others("ngram k=1", [])),
    ]
    sched = schedule(_answer([1, 2, 4], [1, 4], levels, cmd=cmd), max_batch_size=64)
    assert sched.entries == [[1, 1, 4], [2, 64, 1]]
    assert vllm_speculative_config(sched) == {
        "method": "ngram",
        "prompt_lookup_max": 4,
        "num_speculative_tokens": 4,
        "num_speculative_tokens_per_batch_size": [[1, 1, 4], [2, 64, 1]],
    }
