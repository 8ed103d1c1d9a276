"""``load.decide`` through the CLI on the simulator (issue 48, Noise): rounds until each load is decided.

Three configurations on the simulator's ``workloads`` profile at two workloads: on ``code`` linear speculation
beats both autoregressive servers far beyond noise, so that load is decided by the planned windows and gets no
extra round; on ``translation`` the two autoregressive servers are the same server (the same seed; one only
names its model again, so it is its own configuration) and tie, so that load gets rounds of both, never of linear
(beaten there), until ``max_requests`` is spent. ``plan`` and ``plan --json`` state the budget; the answer
(the sweep's ending, ``report --json``) says "decided" or "budget ran out" per load. A run interrupted inside
its first extra round and resumed measures each round's point once.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis.deciding import decision_text
from tests.reliability.harness import (
    cli_env,
    free_port,
    only_run_dir,
    records,
    run_cli,
    started_cli,
    wait_until,
    write_experiment,
)
from tests.timing import scaled

pytestmark = [pytest.mark.timeout(600)]

REQUESTS, MAX_REQUESTS = 4, 12  # the planned window and two extra rounds at most


def _experiment(tmp_path: Path, port: int) -> Path:
    doc = {
        "name": "decide",
        "host": "local",
        "service": {
            "kind": "process",
            "command": (
                f"{{python}} -m orchestrator.sim --host 127.0.0.1 --port {port} --profile workloads "
                "--load-seconds 0.2 --decode-log-interval 1 --step-jitter 0.3 --seed 1 {spec_args}"
            ),
        },
        "server": {
            "url": f"http://127.0.0.1:{port}",
            "model": "sim",
            "ready_timeout": "30s",
            "expected_load_time": "1s",
        },
        "engine": "sim",
        "variants": {
            "ar": {"spec_args": "--algorithm ar"},
            "ar_again": {"spec_args": "--algorithm ar --model sim"},
            "linear": {"spec_args": "--algorithm linear --draft-tokens 7"},
        },
        "baselines": ["ar"],
        "load": {
            "concurrency": [1],
            "warmup": 1,
            "requests": REQUESTS,
            # 48 tokens: each linear request lasts about 0.25 s, so a stall of the busy machine's scheduler
            # (CI runs three workers and real engines beside this) cannot blur the clear winner into a tie.
            "max_tokens": 48,
            "workloads": {"code": "builtin:code", "translation": "builtin:translation"},
            "decide": {"max_requests": MAX_REQUESTS},
        },
        "lossless": {"enabled": False},
        "results_dir": str(tmp_path / "results"),
    }
    return write_experiment(tmp_path / "decide.yaml", doc)


def _repeats(recs: list[dict[str, Any]]) -> dict[tuple[str, str], list[int]]:
    """(variant, workload) -> the repeats measured (ok records), sorted."""
    out: dict[tuple[str, str], list[int]] = {}
    for r in recs:
        if r["status"] == "ok":
            out.setdefault((r["variant"], r.get("workload") or ""), []).append(int(r.get("repeat") or 1))
    return {k: sorted(v) for k, v in out.items()}


def _check_the_rounds(run_dir: Path, env: dict[str, str]) -> dict[str, Any]:
    """The rounds each load got, held against the answer's decisions; returns the code load's decision."""
    recs = records(run_dir)
    repeats = _repeats(recs)
    report = run_cli("report", str(run_dir), "--json", env=env)
    assert report.returncode == 0, report.stderr
    payload = json.loads(report.stdout)
    decisions = {d["load"]: d for d in payload["answer"]["decisions"]}
    code = decisions["code C=1"]
    assert code["winner"] == "linear", code
    if code["status"] == "decided" and code["extra_rounds"] == 0:
        # The clear winner's load: the planned window of each configuration, nothing more.
        assert all(repeats[(label, "code")] == [1] for label in ("linear", "ar", "ar_again")), repeats
    else:
        # A CI machine busy enough to blur even a twofold margin in the planned round (seen once in CI with
        # 4 requests of 48 tokens): the rounds then measure the code load's contenders, each round once,
        # and the answer says so; a point is still never measured twice (the caller's assertion).
        rounds = code["extra_rounds"]
        assert 1 <= rounds <= 2, code
        runs_of = {label: repeats[(label, "code")] for label in ("linear", "ar", "ar_again")}
        assert all(r in ([1], list(range(1, rounds + 2))) for r in runs_of.values()), (runs_of, code)
    # The tie: both contenders until max_requests (3 windows of 4), linear (beaten) never again.
    assert repeats[("ar", "translation")] == [1, 2, 3] and repeats[("ar_again", "translation")] == [1, 2, 3]
    assert repeats[("linear", "translation")] == [1]
    log = json.loads((run_dir / "decide.json").read_text())
    assert log["ended"] == "budget" and "max_requests (12 a point) reached" in log["why"]
    tie = decisions["translation C=1"]
    assert tie["status"] == "budget" and tie["extra_rounds"] == 2
    assert tie["requests"] == 2 * MAX_REQUESTS and tie["seconds"] > 0
    assert sorted(tie["contenders"]) == ["ar", "ar_again"]
    markdown = Path(payload["files"]["report.md"]).read_text(encoding="utf-8")
    assert "Deciding each load" in markdown
    # The terminal's report says them as the sweep's ending does (issue 59, item 7: it left them out).
    shown = run_cli("report", str(run_dir), env=env)
    assert shown.returncode == 0, shown.stderr
    said = " ".join(shown.stdout.split())
    assert "decide (load.decide; " in said and "translation C=1: budget ran out (" in said, said[-1500:]
    if code["status"] == "decided" and code["extra_rounds"] == 0:
        assert "code C=1: decided in the planned round (linear)" in markdown
    assert "translation C=1: budget ran out (" in markdown
    return code


def test_a_clear_winner_stops_after_the_planned_round_and_a_tie_runs_to_the_budget(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "home")
    exp = _experiment(tmp_path, free_port())
    plan = run_cli("plan", str(exp), env=env)
    assert plan.returncode == 0, plan.stderr
    assert "decide: until the winner at each load is decided or the budget is spent" in plan.stdout
    assert "max_requests 12 a point, at most 2 extra rounds" in plan.stdout and "worst case +" in plan.stdout
    as_json = json.loads(run_cli("plan", str(exp), "--json", env=env).stdout)
    assert as_json["decide"]["max_rounds"] == 2 and as_json["decide"]["max_requests_per_point"] == MAX_REQUESTS
    assert as_json["decide"]["worst_case_seconds"] == pytest.approx(2 * as_json["decide"]["round_seconds"], abs=0.2)
    dry = run_cli("sweep", str(exp), "--dry-run", env=env)
    assert "# decide: until the winner at each load is decided" in dry.stdout

    sweep = run_cli("sweep", str(exp), env=env, timeout=500)
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    ending = " ".join(sweep.stdout.split())
    run_dir = only_run_dir(tmp_path / "results", "decide")
    why = (run_dir / "decide.json").read_text() if (run_dir / "decide.json").exists() else "no decide.json"
    assert (
        "translation C=1: budget ran out (" in ending
        and f", {2 * MAX_REQUESTS} requests measured by the contenders" in ending
    ), (ending[-1500:], why)
    assert "outside the plan" not in sweep.stdout  # the rounds' records count like the planned ones
    code = _check_the_rounds(run_dir, env)
    # On a quiet machine: "code C=1: decided in the planned round (linear)"; the ending says what the answer says.
    assert decision_text(code).split(" (")[0] in ending, (ending[-1500:], why)


def test_a_run_interrupted_in_its_rounds_resumes_without_measuring_a_point_twice(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "home")
    exp = _experiment(tmp_path, free_port())
    results = tmp_path / "results"

    def in_the_first_round() -> bool:
        dirs = list((results / "decide").glob("*/records.jsonl"))
        return bool(dirs) and any(int(r.get("repeat") or 1) == 2 for r in records(dirs[0].parent))

    with started_cli("sweep", str(exp), env=env) as proc:
        assert wait_until(in_the_first_round, timeout=400, interval=0.2)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=scaled(120))
    assert proc.returncode == 130
    run_dir = only_run_dir(results, "decide")
    before = {(r["point_id"], r["attempt"]): r["started_at"] for r in records(run_dir) if r["status"] == "ok"}
    assert any(r.get("repeat") == 2 for r in records(run_dir))

    resumed = run_cli("sweep", str(exp), "--resume", "latest", env=env, timeout=500)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    recs = records(run_dir)
    ok = Counter(r["point_id"] for r in recs if r["status"] == "ok")
    assert ok and max(ok.values()) == 1  # no point measured twice, planned or of a round
    after = {(r["point_id"], r["attempt"]): r["started_at"] for r in recs if r["status"] == "ok"}
    assert all(after.get(key) == started for key, started in before.items())  # nothing redone
    _check_the_rounds(run_dir, env)
