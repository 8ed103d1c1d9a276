"""``load.decide`` (issue 48, Noise): the decision rule on synthetic figures, a round's budget, and the schema.

The rule is the answer's own (``best_per_load`` with the significance rule), read per load by
``orchestrator/analysis/deciding.py``; ``next_round`` (``orchestrator/sweep/deciding.py``) picks what a round
measures and when the rounds end; ``decide_budget`` (``orchestrator/plan/deciding.py``) is what the plan states.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from orchestrator.analysis.compare import best_per_load, significance
from orchestrator.analysis.deciding import load_key, load_states
from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deciding import DecideBudget, decide_budget
from orchestrator.plan.deployments import build_plan
from orchestrator.sweep.deciding import next_round


def point(label: str, value: float, se: float, *, load: float = 1.0, requests: int = 8) -> dict[str, Any]:
    """One point (windows combined) of the analysis frame with its figure and standard error."""
    return {
        "host": "h",
        "workload": "",
        "label": label,
        "variant": label,
        "mode": "concurrency",
        "load": load,
        "load_label": f"C={load:g}",
        "status": "ok",
        "alias_of": None,
        "requests": requests,
        "output_tok_s": value,
        "output_tok_s_lo": value - 1.96 * se if se == se else float("nan"),
        "output_tok_s_hi": value + 1.96 * se if se == se else float("nan"),
        "output_tok_s_se": se,
    }


def states(rows: list[dict[str, Any]]) -> dict[str, Any]:
    best = best_per_load(pd.DataFrame(rows), rule=significance(0.95))
    return {s.load_label: s for s in load_states(best)}


def budget(rounds: int = 3, max_requests: int | None = None) -> DecideBudget:
    return DecideBudget(
        rounds=rounds, max_requests=max_requests, max_duration=None, round_seconds=10.0, round_requests=None
    )


def test_a_winner_separated_from_the_runner_up_is_decided() -> None:
    got = states([point("spec", 120.0, 2.0), point("ar", 100.0, 2.0), point("slow", 60.0, 2.0)])["C=1"]
    assert got.decided and got.winner == "spec" and got.contenders == []


def test_a_tie_leaves_the_winner_and_those_tied_in_contention_and_not_the_beaten() -> None:
    got = states([point("a", 101.0, 5.0), point("b", 100.0, 5.0), point("c", 50.0, 1.0)])["C=1"]
    assert not got.decided and got.winner == "a"
    assert got.contenders == ["a", "b"]  # c is beaten beyond noise: more of its requests would change nothing


def test_each_load_is_judged_on_its_own() -> None:
    rows = [point("a", 150.0, 2.0, load=1), point("b", 100.0, 2.0, load=1)]
    rows += [point("a", 100.0, 10.0, load=4), point("b", 99.0, 10.0, load=4)]
    got = states(rows)
    assert got["C=1"].decided and not got["C=4"].decided
    assert got["C=4"].key == load_key("", "concurrency", 4)


def test_a_runner_up_without_an_interval_is_not_judged_and_stays_in_contention() -> None:
    got = states([point("a", 101.0, float("nan")), point("b", 100.0, float("nan"))])["C=1"]
    assert not got.decided and got.contenders == ["a", "b"]


def test_one_configuration_alone_is_decided() -> None:
    assert states([point("a", 101.0, 5.0)])["C=1"].decided


def test_a_round_measures_only_the_undecided_loads_and_their_contenders() -> None:
    rows = [point("a", 150.0, 2.0, load=1), point("b", 100.0, 2.0, load=1), point("c", 40.0, 1.0, load=1)]
    rows += [point("a", 100.0, 10.0, load=4), point("b", 99.0, 10.0, load=4), point("c", 40.0, 1.0, load=4)]
    frame = pd.DataFrame(rows)
    step = next_round(1, best_per_load(frame, rule=significance(0.95)), frame, budget(), 8)
    c4 = load_key("", "concurrency", 4)
    assert step.ended is None
    assert step.wanted == {"a": {c4}, "b": {c4}}
    assert step.labels == {c4: "C=4"}


def test_the_rounds_end_when_every_load_is_decided() -> None:
    frame = pd.DataFrame([point("a", 150.0, 2.0), point("b", 100.0, 2.0)])
    step = next_round(1, best_per_load(frame, rule=significance(0.95)), frame, budget(), 8)
    assert step.ended == "decided" and not step.wanted


def test_the_rounds_end_at_max_rounds_and_say_so() -> None:
    frame = pd.DataFrame([point("a", 101.0, 5.0), point("b", 100.0, 5.0)])
    best = best_per_load(frame, rule=significance(0.95))
    assert next_round(3, best, frame, budget(rounds=3), 8).ended is None
    step = next_round(4, best, frame, budget(rounds=3), 8)
    assert step.ended == "budget" and step.why == "max_rounds (3) reached"


@pytest.mark.parametrize(("spent", "ends"), [(16, False), (17, True), (24, True)])
def test_a_load_whose_contender_would_pass_max_requests_is_out_of_budget(spent: int, ends: bool) -> None:
    frame = pd.DataFrame([point("a", 101.0, 5.0, requests=spent), point("b", 100.0, 5.0, requests=8)])
    step = next_round(1, best_per_load(frame, rule=significance(0.95)), frame, budget(max_requests=24), 8)
    if ends:
        assert step.ended == "budget" and step.out_of_requests == {"C=1": "max_requests (24 a point) reached by a"}
        assert step.why == "max_requests (24 a point) reached by a"
    else:
        assert step.ended is None and set(step.wanted) == {"a", "b"}


# -- the schema and the plan's budget ----------------------------------------------------------------------


def experiment_file(tmp_path: Path, load: dict[str, Any], **extra: Any) -> Path:
    doc = {
        "name": "decide",
        "service": {"kind": "process", "command": "{python} -m orchestrator.sim --port 18999 {spec_args}"},
        "server": {"url": "http://127.0.0.1:18999", "model": "sim", "expected_load_time": "10s"},
        "engine": "sim",
        "variants": {"ar": {"spec_args": "--algorithm ar"}, "linear": {"spec_args": "--algorithm linear"}},
        "baselines": ["ar"],
        "load": {
            k: v for k, v in {"concurrency": [1, 4], "requests": 8, "max_tokens": 32, **load}.items() if v is not None
        },
        **extra,
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_plan_states_the_worst_case_of_the_budget(tmp_path: Path) -> None:
    exp = load_experiment(experiment_file(tmp_path, {"decide": {"max_requests": 32}}))
    plan = build_plan(exp)
    got = decide_budget(exp, plan)
    assert got is not None
    # 32 requests a point in windows of 8: the planned one and 3 more.
    assert got.rounds == 3 and got.rounds_by == "max_requests"
    one_round = sum(d.expected_load_seconds for d in plan.deployments) + sum(
        p.estimated_seconds for d in plan.deployments for p in d.load_points
    )
    assert got.round_seconds == pytest.approx(one_round)
    assert got.worst_seconds == pytest.approx(3 * one_round)
    assert got.round_requests == 2 * 2 * 8
    # The rounds' points are planned (a resume and the analysis know them), not counted in the totals.
    assert len(plan.decide_point_ids) == 3 * 2 * 2 and plan.load_point_count == 4
    assert not set(plan.decide_point_ids) & {p.id for d in plan.deployments for p in d.load_points}


def test_max_duration_caps_the_worst_case(tmp_path: Path) -> None:
    exp = load_experiment(experiment_file(tmp_path, {"decide": {"max_duration": "30s", "max_rounds": 5}}))
    got = decide_budget(exp, build_plan(exp))
    assert got is not None and got.rounds == 5 and got.worst_seconds == 30.0
    assert "max_duration 30s" in got.lead() and "worst case +30s" in got.lead()


@pytest.mark.parametrize(
    ("load", "extra", "message"),
    [
        ({"decide": {}}, {}, "decide needs a budget"),
        ({"decide": {"max_requests": 12}}, {}, "leaves no room for an extra round"),
        ({"decide": {"max_requests": 32}, "requests": None, "duration": "10s"}, {}, "set load.requests"),
        ({"decide": {"max_duration": "10m"}, "repeats_across_restarts": 2}, {}, "drop load.repeats_across_restarts"),
        (
            {"decide": {"max_duration": "10m"}},
            {
                "search": {"strategy": "random", "budget": {"restarts": 3}},
                "objective": {"maximize": "output_tok_s", "at": {"concurrency": 1}},
            },
            "a search decides what to measure itself",
        ),
    ],
)
def test_a_decide_section_that_cannot_run_is_refused_where_it_is(
    tmp_path: Path, load: dict[str, Any], extra: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_experiment(experiment_file(tmp_path, load, **extra))
    assert message in str(caught.value) and "decide" in str(caught.value)


def test_max_duration_stops_a_round_whose_scaled_estimate_would_pass_it(tmp_path: Path) -> None:
    from orchestrator.runs.store import ResumeState
    from orchestrator.sweep.deciding import DecidingSchedule, RoundStep

    exp = load_experiment(experiment_file(tmp_path, {"decide": {"max_duration": "100s"}}))
    plan = build_plan(exp)
    schedule = DecidingSchedule(exp, plan, ["local"], ResumeState.empty(), None)
    guess = sum(d.estimated_seconds() for d in plan.deployments)
    # Everything so far took twice the plan's guesses: a round is estimated at twice its guess.
    assert 2 * guess < 100
    spent = 100 - 2 * guess
    schedule.log.update(planned_seconds=2 * guess, planned_estimated=guess)
    schedule.log.update(spent_seconds=spent, estimated_seconds=spent / 2)
    assert not schedule._over_time(list(plan.deployments), RoundStep(1))
    schedule.log.update(spent_seconds=spent + 1, estimated_seconds=(spent + 1) / 2)
    step = RoundStep(2)
    assert schedule._over_time(list(plan.deployments), step)
    assert step.ended == "budget" and "would pass max_duration" in (step.why or "")


def test_the_budget_line_says_which_tied_configuration_the_rounds_never_measured_again(tmp_path: Path) -> None:
    """Issue 59: a vLLM run's `decide` said `still tied` of configurations of which one (ngram(k=4)) kept its one
    planned window at every load, and did not say which. It says each one's windows and names those the
    extra rounds never measured again."""
    import json
    from types import SimpleNamespace

    from orchestrator.analysis.deciding import decision_text, decisions

    rows = [
        {**point("a", 100.0, 5.0), "windows": 3},
        {**point("b", 98.0, 5.0), "windows": 3},
        {**point("c", 97.0, 5.0), "windows": 1},  # joined the tie after the last round: its planned window only
    ]
    frame = pd.DataFrame(rows)
    (tmp_path / "decide.json").write_text(
        json.dumps(
            {
                "budget": "2 rounds",
                "ended": "budget",
                "why": "max_rounds (2) reached",
                "loads": {"C=1": {"rounds": 2, "seconds": 12.0}},
            }
        )
    )
    run = SimpleNamespace(experiment={"load": {"repeats": 1}})
    analysis: Any = SimpleNamespace(
        path=tmp_path, frame=frame, best=best_per_load(frame, rule=significance(0.95)), run=run
    )
    [entry] = decisions(analysis)
    assert entry["windows"] == {"a": 3, "b": 3, "c": 1} and entry["not_remeasured"] == ["c"]
    text = decision_text(entry)
    assert "still tied: a (3 windows), b (3 windows), c (1 window)" in text, text
    assert text.endswith("not measured again by the extra rounds (the plan's windows only): c"), text
