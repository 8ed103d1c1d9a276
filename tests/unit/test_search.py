"""The search package: the objective's and the search's validation, the space, the strategies, the scores,
the cost, and the recommendations (an unmeetable constraint included)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import Experiment, load_experiment
from orchestrator.plan.deployments import build_plan
from orchestrator.runs.identity import resolved_experiment
from orchestrator.runs.store import ResumeState, RunStore
from orchestrator.search.bayesian import BayesianStrategy
from orchestrator.search.cost import search_cost
from orchestrator.search.driver import search_plan
from orchestrator.search.objective import LevelScore, Score, score_records
from orchestrator.search.recommend import recommend, to_yaml
from orchestrator.search.space import SearchSpace
from orchestrator.search.strategies import GridStrategy, Proposal, RandomStrategy, SuccessiveHalving
from orchestrator.sweep.measure import new_record
from orchestrator.sweep.schedule import Schedule
from orchestrator.sweep.searching import SearchSchedule, schedule_for

BASE = """\
name: s
host: local
service: {kind: process, command: "{python} -m orchestrator.sim --port 18999 {spec_args}"}
server: {url: "http://127.0.0.1:18999", model: sim, expected_load_time: 480s}
engine: sim
variants:
  ar: {spec_args: "--algorithm ar"}
  tree:
    spec_args: "--algorithm ddtree --budget {budget} --topk {topk} --draft-tokens {depth}"
    matrix: {budget: [8, 16, 32, 64], topk: [1, 2, 4, 8], depth: [4, 8, 16]}
baselines: [ar]
load: {concurrency: [1, 16], requests: 16}
lossless: {enabled: false}
"""
OBJECTIVE = "objective: {maximize: output_tok_s, at: {concurrency: 16}, constraints: {itl_ms_p99: {max: 50}}}\n"


def load(tmp_path: Path, extra: str) -> Experiment:
    path = tmp_path / "exp.yaml"
    path.write_text(BASE + extra)
    return load_experiment(path)


# -- validation -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "line", "key", "fragment"),
    [
        pytest.param(
            "objective: {at: {concurrency: 16}}\n", 14, "objective", "one of maximize or minimize", id="no-goal"
        ),
        pytest.param("objective: {maximize: tok_s}\n", 14, "objective.maximize", "output_tok_s", id="unknown-figure"),
        pytest.param(
            "objective: {maximize: output_tok_s, at: {concurrency: 16}, constraints: {itl_p99: {max: 5}}}\n",
            14,
            "objective",
            "did you mean 'itl_ms_p99'",
            id="constraint-typo",
        ),
        pytest.param(
            "objective: {maximize: output_tok_s, at: {concurrency: 32}}\n",
            14,
            "objective.at.concurrency",
            "concurrency 32 is not a load of the experiment (load.concurrency: 1, 16)",
            id="at-not-a-load",
        ),
        pytest.param(
            "objective: {maximize: output_tok_s}\n", 14, "objective", "objective.at is needed", id="at-missing"
        ),
        pytest.param(
            "objective: {maximize: goodput, at: {concurrency: 16}}\n",
            14,
            "objective",
            "per-request limits",
            id="goodput-without-limits",
        ),
        pytest.param(
            "search: {strategy: bayesian, budget: {restarts: 10}}\n",
            14,
            "search",
            "needs an objective",
            id="search-without-objective",
        ),
        pytest.param(
            OBJECTIVE + "search: {strategy: successive-halving}\n", 15, "search", "needs a budget", id="no-budget"
        ),
        pytest.param(
            OBJECTIVE + "search: {strategy: random, budget: {restarts: 5, gpu_hours: 2}}\n",
            15,
            "search.budget",
            "restarts: N or gpu_hours: H",
            id="two-budgets",
        ),
        pytest.param(
            OBJECTIVE + "search: {strategy: random, budget: {restarts: 5}, where: ['budget >> topk']}\n",
            15,
            "search",
            "is not 'KEY OP VALUE'",
            id="bad-rule",
        ),
        pytest.param(
            OBJECTIVE + "search: {strategy: random, budget: {restarts: 5}, where: ['budget >= top_k']}\n",
            15,
            "search.where.0",
            "'top_k' is not a matrix key; did you mean 'topk'",
            id="rule-key-typo",
        ),
        pytest.param(
            OBJECTIVE + "search: {strategy: random, budget: {restarts: 1}}\n",
            15,
            "search.budget.restarts",
            "leaves none for a candidate",
            id="budget-too-small",
        ),
        pytest.param(
            OBJECTIVE + "search: {strategy: annealing, budget: {restarts: 5}}\n",
            15,
            "search.strategy",
            "successive-halving",
            id="unknown-strategy",
        ),
    ],
)
def test_objective_and_search_errors_name_file_line_and_key(
    tmp_path: Path, extra: str, line: int, key: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, extra)
    error = info.value
    assert error.exit_code == 2
    assert (error.file, error.line, error.key) == (str(tmp_path / "exp.yaml"), line, key)
    assert fragment in str(error)


def test_a_mix_and_the_constraints_load(tmp_path: Path) -> None:
    exp = load(
        tmp_path,
        "objective:\n  maximize: goodput\n  goodput: {ttft_ms: 2000, tpot_ms: 50}\n"
        "  at: {mix: [{concurrency: 1, weight: 1}, {concurrency: 16, weight: 3}]}\n"
        "  constraints: {ttft_ms_p99: {max: 2000}, accept_len: {min: 2.5}}\n",
    )
    assert exp.objective is not None and exp.objective.at is not None
    assert exp.objective.at.loads() == [("concurrency", 1.0, 0.25), ("concurrency", 16.0, 0.75)]


# -- space, plan, schedule --------------------------------------------------------------------------------


def test_where_rules_prune_the_plan_and_grid_keeps_the_plain_schedule(tmp_path: Path) -> None:
    plain = build_plan(load(tmp_path, ""))
    grid = load(tmp_path, OBJECTIVE + "search: {strategy: grid}\n")
    assert build_plan(grid).to_json_dict() == plain.to_json_dict()  # the grid is today's plan, ids and all
    assert type(schedule_for(grid, plain, ["local"], ResumeState.empty(), None)) is Schedule
    pruned = load(tmp_path, OBJECTIVE + "search: {strategy: grid, where: ['budget > topk', 'depth <= 8']}\n")
    params = [d.params for d in build_plan(pruned).deployments if not d.baseline]
    assert params and all(p["budget"] > p["topk"] and p["depth"] <= 8 for p in params)
    assert len(params) == 4 * 4 * 2 - 2  # budget 8 with topk 8, at depths 4 and 8


def test_a_search_plan_measures_candidates_at_the_objective_load_only(tmp_path: Path) -> None:
    exp = load(tmp_path, OBJECTIVE + "search: {strategy: random, budget: {restarts: 10}}\n")
    plan = search_plan(exp, build_plan(exp))
    assert [p.label for p in plan.deployments[0].load_points] == ["C=1", "C=16"]  # the baseline: every load
    assert {p.label for d in plan.deployments[1:] for p in d.load_points} == {"C=16"}
    space = SearchSpace.from_plan(plan)
    assert len(space) == 48 and [a.name for a in space.axes] == ["budget", "topk", "depth"]
    middle = next(c for c in space.candidates if c.deployment.params == {"budget": 16, "topk": 2, "depth": 8})
    assert len(space.neighbours(middle)) == 6  # one step either way along each of three ordered axes


def test_the_cost_of_the_grid_and_of_the_budget(tmp_path: Path) -> None:
    exp = load(tmp_path, OBJECTIVE + "search: {strategy: bayesian, budget: {gpu_hours: 20}, gpus: 8}\n")
    grid = build_plan(exp)
    cost = search_cost(exp, grid, search_plan(exp, grid))
    assert cost.grid_restarts == 49 and cost.candidates == 48 and cost.baselines == 1
    each = cost.gpu_hours(1)
    assert each == pytest.approx(cost.restart_seconds * 8 / 3600)
    assert cost.budget_restarts == int(20 // (search_cost(exp, grid, grid).restart_seconds * 8 / 3600))
    assert "instead of the grid's 49" in cost.describe()


# -- strategies ---------------------------------------------------------------------------------------------


def _score(value: float, se: float = 1.0, feasible: bool = True) -> Score:
    from orchestrator.search.objective import ConstraintCheck

    check = ConstraintCheck("itl_ms_p99", 10.0 if feasible else 90.0, None, None, 50.0, None, "holds")
    return Score("output_tok_s", "max", value, se, 0.95, (LevelScore("C=16", value, se, 1, (check,)),))


def _space(tmp_path: Path) -> SearchSpace:
    exp = load(tmp_path, OBJECTIVE + "search: {strategy: random, budget: {restarts: 10}}\n")
    return SearchSpace.from_plan(search_plan(exp, build_plan(exp)))


def _truth(proposal: Proposal) -> float:
    p = proposal.candidate.deployment.params
    return 1000.0 - abs(int(p["budget"]) - 32) - 20 * abs(int(p["topk"]) - 4) - 3 * int(p["depth"])


def _drive(strategy: Any, se: float = 1.0) -> list[Proposal]:
    asked: list[Proposal] = []
    while batch := strategy.ask():
        for proposal in batch:
            asked.append(proposal)
            strategy.tell(proposal, _score(_truth(proposal), se))
    return asked


def test_grid_and_random_propose_each_candidate_once(tmp_path: Path) -> None:
    space = _space(tmp_path)
    assert [p.candidate for p in _drive(GridStrategy(space))] == space.candidates
    drawn = _drive(RandomStrategy(space, 9, seed=1))
    assert len(drawn) == len({p.candidate.key for p in drawn}) == 9
    assert drawn == _drive(RandomStrategy(space, 9, seed=1))


def test_successive_halving_stays_in_budget_is_deterministic_and_finds_the_peak(tmp_path: Path) -> None:
    space = _space(tmp_path)
    runs = [_drive(SuccessiveHalving(space, 18, seed=seed)) for seed in (0, 0, 1)]
    assert runs[0] == runs[1]
    for asked in runs:
        assert len(asked) <= 18
        assert any(p.rung > 0 for p in asked)
        best = max(asked, key=_truth)
        assert _truth(best) >= 972  # the peak (988) or its neighbour at budget 16, from 18 of 48 candidates


def test_successive_halving_keeps_a_candidate_not_worse_beyond_noise(tmp_path: Path) -> None:
    space = _space(tmp_path)
    noisy = SuccessiveHalving(space, 40, seed=0)
    sharp = SuccessiveHalving(space, 40, seed=0)
    noisy.first_rung = sharp.first_rung = 12  # leave room for every survivor the noise keeps
    # Wide intervals (se 200 on differences of tens): nobody is worse beyond noise, so more survive a rung.
    promoted_noisy = [p for p in _drive(noisy, se=200.0) if p.rung == 1]
    promoted_sharp = [p for p in _drive(sharp, se=0.01) if p.rung == 1]
    assert len(promoted_noisy) > len(promoted_sharp)


def test_bayesian_stays_in_budget_and_a_new_process_continues_its_study(tmp_path: Path) -> None:
    space = _space(tmp_path)
    first = BayesianStrategy(space, 10, seed=2, directory=tmp_path / "search")
    asked = []
    for _ in range(4):
        (proposal,) = first.ask()
        asked.append(proposal)
        first.tell(proposal, _score(_truth(proposal)))
    (pending,) = first.ask()  # asked, never told: the run is killed while it is measured
    again = BayesianStrategy(space, 10, seed=2, directory=tmp_path / "search")
    (resumed,) = again.ask()
    assert resumed.candidate.key == pending.candidate.key  # proposed again first, so its records can answer it
    again.tell(resumed, _score(_truth(resumed)))
    rest = _drive(again)
    first_windows = [p for p in [*asked, resumed, *rest] if p.rung == 0]
    keys = [p.candidate.key for p in first_windows]
    assert len(keys) == len(set(keys)) == 10 - 2  # each candidate once, then the best two measured longer
    confirmations = [p for p in rest if p.rung == 1]
    assert len(confirmations) == 2 and {p.candidate.key for p in confirmations} <= set(keys)
    assert (tmp_path / "search" / "optuna.journal").is_file()


# -- scores ------------------------------------------------------------------------------------------------


def _record(run_dir: Path | None, deployment: Any, point: Any, **client: Any) -> Any:
    figures = {k: {"value": v, "lo": v * 0.9, "hi": v * 1.1, "se": v * 0.05, "n": 16} for k, v in client.items()}
    return new_record(
        "r",
        "s",
        "local",
        deployment,
        point,
        "ok",
        "2026-01-01T00:00:00Z",
        client={"duration_s": 10.0, "requests": 16, "errors": 0, **client},
        intervals={"level": 0.95, "figures": figures},
    )


def test_constraints_hold_fail_or_stay_uncertain_and_goodput_counts_good_requests(tmp_path: Path) -> None:
    exp = load(
        tmp_path,
        "objective:\n  maximize: goodput\n  goodput: {ttft_ms: 100, tpot_ms: 10}\n  at: {concurrency: 16}\n"
        "  constraints: {itl_ms_p99: {max: 50}, ttft_ms_p99: {max: 100}}\n",
    )
    deployment = build_plan(exp).deployments[1]
    point = next(p for p in deployment.load_points if p.concurrency == 16)
    rows = [
        {"ok": True, "ttft_ms": 50, "e2e_ms": 50 + 9 * 15, "output_tokens": 16},  # tpot 9: good
        {"ok": True, "ttft_ms": 150, "e2e_ms": 300, "output_tokens": 16},  # ttft over the limit
        {"ok": True, "ttft_ms": 50, "e2e_ms": 500, "output_tokens": 16},  # tpot 30: over
        {"ok": False, "ttft_ms": None, "e2e_ms": None, "output_tokens": 0},
    ]
    (tmp_path / "requests").mkdir()
    (tmp_path / "requests" / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    record = _record(tmp_path, deployment, point, itl_ms_p99=20.0, ttft_ms_p99=100.0)
    record = record.model_copy(update={"requests_file": "requests/p.jsonl"})
    assert exp.objective is not None
    score = score_records([record], exp.objective, exp.objective.at.loads(), run_dir=tmp_path)  # type: ignore[union-attr]
    assert score.value == pytest.approx(1 / 10.0)  # one good request in a 10 s window
    checks = {c.figure: c.status for c in score.constraints}
    assert checks == {"itl_ms_p99": "holds", "ttft_ms_p99": "uncertain"}  # 20 ± 2 below 50; 100 ± 10 at 100
    assert score.feasible
    over = _record(tmp_path, deployment, point, itl_ms_p99=80.0, ttft_ms_p99=50.0)
    failed = score_records([over], exp.objective, exp.objective.at.loads(), run_dir=tmp_path)  # type: ignore[union-attr]
    assert {c.figure: c.status for c in failed.constraints}["itl_ms_p99"] == "fails" and not failed.feasible


# -- recommendations ---------------------------------------------------------------------------------------


def _run(tmp_path: Path, exp: Experiment, figures: dict[str, tuple[float, float]]) -> Path:
    """A run directory whose C=16 windows measured (output tok/s, p99 ITL) per configuration label."""
    plan = build_plan(exp)
    store = RunStore.create(tmp_path / "results", exp.name, resolved_experiment(exp), plan.to_json_dict())
    for deployment in plan.deployments:
        if deployment.config_label not in figures:
            continue
        tok_s, itl = figures[deployment.config_label]
        for point in deployment.load_points:
            store.append(_record(None, deployment, point, output_tok_s=tok_s, itl_ms_p99=itl))
    return store.path


def test_recommend_prints_the_best_with_runner_up_and_yaml_that_pastes_into_an_experiment(tmp_path: Path) -> None:
    exp = load(tmp_path, OBJECTIVE)
    run_dir = _run(
        tmp_path,
        exp,
        {
            "ar": (1000.0, 10.0),
            "tree(budget=32, topk=4, depth=4)": (1900.0, 30.0),
            "tree(budget=16, topk=4, depth=4)": (1400.0, 30.0),
            "tree(budget=64, topk=8, depth=4)": (2500.0, 80.0),  # fastest, but over the ITL limit
        },
    )
    recs = recommend(run_dir)
    at16 = next(level for level in recs.levels if level.load == "C=16")
    assert at16.best is not None and at16.best.label == "tree(budget=32, topk=4, depth=4)"
    assert at16.runner_up is not None and at16.runner_up.label == "tree(budget=16, topk=4, depth=4)"
    assert at16.margin is not None and at16.margin.relative == pytest.approx(1900 / 1400 - 1)
    assert at16.told_apart and "beyond noise" in at16.statement(recs.objective)
    assert "itl_ms_p99 <= 50: holds" in at16.statement(recs.objective)
    assert len(recs.untried) == 48 - 3 and "not tried: 45 of the 48 candidates" in recs.not_tried_statement()
    text = to_yaml(recs)
    fragment = yaml.safe_load(text)
    assert fragment["variants"]["tree-best-c1-c16"]["matrix"] == {"budget": [32], "topk": [4], "depth": [4]}
    doc = yaml.safe_load(BASE)
    doc["variants"] = {"ar": doc["variants"]["ar"], **fragment["variants"]}
    path = tmp_path / "pasted.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert len(build_plan(load_experiment(path)).deployments) == 1 + len(fragment["variants"])


def test_a_best_not_told_apart_from_its_runner_up_is_never_advised(tmp_path: Path) -> None:
    """Issue 59: plain `recommend` proposed variants each "not beyond noise", and said nothing of the run's
    contamination. A best within noise of its runner-up is shown with its margin, and no variant is proposed
    for it; points measured beside another sweep are repeated in the text and in --json."""
    exp = load(tmp_path, OBJECTIVE)
    plan = build_plan(exp)
    store = RunStore.create(tmp_path / "results", exp.name, resolved_experiment(exp), plan.to_json_dict())
    beside = [{"experiment": "other", "pid": 4242, "machine": "m", "run_dir": "results/other/1"}]
    figures = {"ar": 1000.0, "tree(budget=32, topk=4, depth=4)": 1040.0}  # +4%, each figure +-10%: a tie
    for deployment in plan.deployments:
        for point in deployment.load_points:
            if deployment.config_label in figures:
                record = _record(
                    None, deployment, point, output_tok_s=figures[deployment.config_label], itl_ms_p99=10.0
                )
                store.append(record.model_copy(update={"overlapped": beside}))
    recs = recommend(store.path)
    at16 = next(level for level in recs.levels if level.load == "C=16")
    assert at16.best is not None and at16.margin is not None and at16.margin.significant is False
    assert not at16.told_apart
    assert "not beyond noise" in at16.statement(recs.objective)
    assert "nothing recommended at this load" in at16.statement(recs.objective)
    text = to_yaml(recs)
    assert yaml.safe_load(text)["variants"] == {}
    assert "at no load is the best told apart from the runner-up; measure longer" in text
    [said] = recs.contamination
    assert "measured while another specsweep sweep ran" in said and "other (pid 4242" in said
    assert f"# contaminated: {said}" in text
    assert recs.to_dict()["contamination"] == [said]
    assert recs.to_dict()["levels"][0]["told_apart"] is False


def test_a_constraint_no_configuration_meets_ends_with_a_statement_and_the_nearest(tmp_path: Path) -> None:
    exp = load(tmp_path, OBJECTIVE.replace("max: 50", "max: 5"))
    run_dir = _run(
        tmp_path,
        exp,
        {
            "ar": (1000.0, 12.0),
            "tree(budget=32, topk=4, depth=4)": (1900.0, 30.0),
            "tree(budget=16, topk=4, depth=4)": (1800.0, 8.0),
        },
    )
    recs = recommend(run_dir)
    at16 = next(level for level in recs.levels if level.load == "C=16")
    assert at16.best is None and not at16.constraints_hold
    statement = at16.statement(recs.objective)
    assert statement.startswith("C=16: no configuration meets the constraints (itl_ms_p99 <= 5) among the 3 measured")
    assert [e.label for e in at16.nearest] == [
        "tree(budget=16, topk=4, depth=4)",
        "ar",
        "tree(budget=32, topk=4, depth=4)",
    ]
    text = to_yaml(recs)
    assert "no configuration meets the constraints" in text
    assert yaml.safe_load(text)["variants"] == {}


# -- the seam ------------------------------------------------------------------------------------------------


def _measure_all(schedule: SearchSchedule, state: ResumeState, deployments: list[Any]) -> None:
    """What the sweep loop does with each deployment the schedule yields: a record per point, stored."""
    for deployment in schedule.deployments_for("local", going=lambda: True, skipped=lambda: None):
        deployments.append(deployment)
        for point in deployment.load_points:
            tok_s = 1000.0 + 10 * int(deployment.params.get("budget", 0)) - 3 * int(deployment.params.get("depth", 0))
            state.add(_record(None, deployment, point, output_tok_s=tok_s, itl_ms_p99=20.0))


def test_the_search_schedule_yields_proposals_reads_records_back_and_replays_without_a_restart(
    tmp_path: Path,
) -> None:
    exp = load(tmp_path, OBJECTIVE + "search: {strategy: successive-halving, budget: {restarts: 12}, seed: 4}\n")
    plan = search_plan(exp, build_plan(exp))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    state = ResumeState.empty()
    first: list[Any] = []
    schedule = SearchSchedule(exp, plan, ["local"], state, run_dir)
    _measure_all(schedule, state, first)
    assert first[0].baseline and not any(d.baseline for d in first[1:])
    assert len(first) == len({d.id for d in first}) <= 12
    assert any(d.restart > 1 for d in first)  # a survivor measured again: a new deployment, more requests
    history = (run_dir / "search" / "history.jsonl").read_text().splitlines()
    assert [json.loads(line)["deployment_id"] for line in history] == [d.id for d in first]
    # A new process on the same records (a resumed run): every proposal is answered from them, none deployed.
    again: list[Any] = []
    _measure_all(SearchSchedule(exp, plan, ["local"], state, run_dir), state, again)
    assert again == []
    assert (run_dir / "search" / "history.jsonl").read_text().splitlines() == history


def test_lossless_verdicts_are_the_lossless_checks_verdicts(tmp_path: Path) -> None:
    # The search's `lossless: true` constraint reads the same verdict as the report: each answer against every
    # answer the baseline gave (alone, again, batched), not a hash against its first one. Prompt 1's baseline
    # differs from itself when batched (a server's own rounding): an answer that leaves it there is lossless.
    from orchestrator.search.driver import lossless_verdicts

    exp = load(tmp_path, "")
    plan = build_plan(exp)
    ar, same, within, other, broken = plan.deployments[:5]
    folder = tmp_path / "lossless"
    folder.mkdir()
    prompts = {0: "The cat sat on the mat.", 1: "One two three four five six."}

    def answers(deployment: Any, rows: list[tuple[int, str, int, int]], error: str | None = None) -> None:
        lines = [
            {
                "host": "local",
                "deployment_id": deployment.id,
                "label": deployment.id,
                "prompt_index": index,
                "prompt_sha256": f"p{index}",
                "text": text,
                "run": run,
                "batch": batch,
                "chunk_ends": list(range(1, len(text) + 1)),
                "error": error,
            }
            for index, text, run, batch in rows
        ]
        (folder / f"{deployment.id}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))

    batched = "One two three four FIVE six."
    answers(ar, [(0, prompts[0], 1, 1), (1, prompts[1], 1, 1), (0, prompts[0], 2, 1), (1, batched, 1, 4)])
    answers(same, [(0, prompts[0], 1, 1), (1, prompts[1], 1, 1)])
    answers(within, [(0, prompts[0], 1, 1), (1, "One two three four fiVE six.", 1, 1)])
    answers(other, [(0, "The dog sat on the mat.", 1, 1), (1, prompts[1], 1, 1)])
    answers(broken, [(0, "", 1, 1)], error="HTTP 500")
    verdicts = lossless_verdicts(tmp_path, plan, "ar")
    assert verdicts[same.id] is True
    assert verdicts[within.id] is True  # the old hash test called this lossy
    assert verdicts[other.id] is False  # differs where the baseline is stable
    assert verdicts[broken.id] is None  # nothing compared: unknown, not lossless
    assert ar.id not in verdicts


def test_text_values_make_a_categorical_axis_and_several_variants_a_variant_axis(tmp_path: Path) -> None:
    text = BASE.replace(
        "  tree:\n",
        '  chain:\n    spec_args: "--algorithm linear --draft-tokens {k} --mode {mode}"\n'
        "    matrix: {k: [4, 8], mode: [fast, exact]}\n  tree:\n",
    )
    path = tmp_path / "two.yaml"
    path.write_text(text)
    exp = load_experiment(path)
    space = SearchSpace.from_plan(build_plan(exp))
    axes = {a.name: a.ordered for a in space.axes}
    assert axes == {"variant": False, "k": True, "mode": False, "budget": True, "topk": True, "depth": True}
    assert len(space) == 4 + 48


def test_two_slots_share_the_search_each_baseline_on_each_host_each_candidate_once(tmp_path: Path) -> None:
    import threading

    exp = load(tmp_path, OBJECTIVE + "search: {strategy: successive-halving, budget: {restarts: 12}, seed: 4}\n")
    plan = search_plan(exp, build_plan(exp))
    state = ResumeState.empty()
    schedule = SearchSchedule(exp, plan, ["a", "b"], state, None)
    lock = threading.Lock()
    seen: list[tuple[str, str]] = []

    def slot(target: str) -> None:
        for deployment in schedule.deployments_for(target, going=lambda: True, skipped=lambda: None):
            with lock:
                seen.append((target, deployment.id))
                for point in deployment.load_points:
                    record = _record(None, deployment, point, output_tok_s=1000.0 + len(seen), itl_ms_p99=20.0)
                    state.add(record.model_copy(update={"host": target}))

    threads = [threading.Thread(target=slot, args=(t,), daemon=True) for t in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(t.is_alive() for t in threads)
    baseline = plan.deployments[0].id
    assert sorted(t for t, d in seen if d == baseline) == ["a", "b"]
    shared = [d for _t, d in seen if d != baseline]
    assert shared and len(shared) == len(set(shared))


# -- workloads ---------------------------------------------------------------------------------------------

WORKLOADS = "  workloads: {code: builtin:code, chat: builtin:chat}\n"


def _with_workloads(tmp_path: Path, extra: str) -> Experiment:
    load = "load:\n  concurrency: [1, 16]\n  requests: 16\n" + WORKLOADS
    path = tmp_path / "exp.yaml"
    path.write_text(BASE.replace("load: {concurrency: [1, 16], requests: 16}\n", load) + extra)
    return load_experiment(path)


def test_a_search_over_workloads_names_the_workload_it_scores(tmp_path: Path) -> None:
    search = "search: {strategy: random, budget: {restarts: 5}}\n"
    with pytest.raises(ConfigError) as info:
        _with_workloads(tmp_path, OBJECTIVE + search)
    assert info.value.key == "objective.at" and "a search scores one workload" in str(info.value)
    assert "chat, code" in str(info.value)
    typo = OBJECTIVE.replace("at: {concurrency: 16}", "at: {concurrency: 16, workload: cod}")
    with pytest.raises(ConfigError) as info:
        _with_workloads(tmp_path, typo + search)
    assert info.value.key == "objective.at.workload" and "did you mean 'code'" in str(info.value)
    exp = _with_workloads(
        tmp_path, OBJECTIVE.replace("at: {concurrency: 16}", "at: {concurrency: 16, workload: code}") + search
    )
    first = search_plan(exp, build_plan(exp)).deployments[-1]
    assert {(p.workload, p.concurrency) for p in first.load_points} == {("code", 16)}  # the other workload: no use


def test_recommend_names_a_best_per_workload_and_load(tmp_path: Path) -> None:
    exp = _with_workloads(tmp_path, OBJECTIVE)
    plan = build_plan(exp)
    store = RunStore.create(tmp_path / "results", exp.name, resolved_experiment(exp), plan.to_json_dict())
    # The tree wins code, AR wins chat: one recommendation per workload, never a mix of the two.
    figures = {
        ("ar", "code"): 1000.0,
        ("ar", "chat"): 1000.0,
        ("tree(budget=32, topk=4, depth=4)", "code"): 2000.0,
        ("tree(budget=32, topk=4, depth=4)", "chat"): 700.0,
    }
    for deployment in plan.deployments:
        for point in deployment.load_points:
            tok_s = figures.get((deployment.config_label, point.workload or ""))
            if tok_s is not None:
                store.append(_record(None, deployment, point, output_tok_s=tok_s, itl_ms_p99=10.0))
    recs = recommend(store.path)
    best = {level.load: level.best.label for level in recs.levels if level.best is not None}
    assert best["code C=16"] == "tree(budget=32, topk=4, depth=4)" and best["chat C=16"] == "ar"
    assert set(best) == {"code C=1", "code C=16", "chat C=1", "chat C=16"}
    fragment = yaml.safe_load(to_yaml(recs))
    assert "tree-best-code-c1-code-c16" in fragment["variants"], fragment


def test_a_search_refuses_repeats_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    load_line = "load: {concurrency: [1, 16], requests: 16}\n"
    text = BASE.replace(load_line, "load: {concurrency: [1, 16], requests: 16, repeats_across_restarts: 2}\n")
    path.write_text(text + OBJECTIVE + "search: {strategy: bayesian, budget: {restarts: 5}}\n")
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    assert (info.value.line, info.value.key) == (12, "load.repeats_across_restarts")
    assert "repeats_across_restarts is for the grid" in str(info.value)
    path.write_text(text + OBJECTIVE + "search: {strategy: grid}\n")
    assert load_experiment(path).load.repeats_across_restarts == 2


def test_the_search_figure_numbers_restarts_in_whole_numbers_only() -> None:
    """``search_progress.png`` ticked ``2.5 5.0 7.5`` on its restarts axis (issue 59, item 7)."""
    from orchestrator.report.search import progress_figure

    history = [
        {"restarts": n, "strategy": "random", "score": {"value": 100.0 + n, "feasible": True, "sense": "max"}}
        for n in (1, 2, 3)
    ]
    figure = progress_figure(history)
    assert figure is not None
    figure.canvas.draw()
    (ax,) = figure.axes
    low, high = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if low <= t <= high]
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks


def test_the_search_figures_best_line_follows_a_survivors_revised_score() -> None:
    """Issue 59, item 7: a survivor measured longer revised its score down, and the best line kept the short
    window's high. The line is the best of each configuration's latest score, as the search's own best()."""
    from orchestrator.report.search import progress_figure

    def row(n: int, config: str, value: float, rung: int = 0, feasible: bool = True) -> dict[str, object]:
        score = {"value": value, "feasible": feasible, "sense": "max"}
        return {"restarts": n, "config_hash": config, "rung": rung, "strategy": "successive-halving", "score": score}

    history = [row(3, "a", 100.0), row(4, "b", 80.0), row(5, "c", 120.0, feasible=False), row(6, "a", 60.0, rung=1)]
    figure = progress_figure(history)
    assert figure is not None
    (ax,) = figure.axes
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == "best feasible so far"]
    assert list(line.get_xdata()) == [3, 4, 5, 6]
    assert list(line.get_ydata()) == [100.0, 100.0, 100.0, 80.0]  # a's longer window: b is the best now
