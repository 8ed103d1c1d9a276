"""One answer per run (issue 37): every output of a run gives the same figures, counts and winners.

The shapes of run that gave several answers before: a grid with repeats, a search, a run with a point whose
requests half fail (the simulator's ``--fault http-500-rate``), and a run killed with SIGKILL and restored.
Each is made by the CLI as a subprocess against the simulator; then every output is rendered (the sweep's
ending or ``sweep --json``, ``report`` with its HTML, Markdown and ``--json``, ``recommend --json``,
``compare --json``, ``ls --json`` and the notebook's ``answer``) and held against the run's answer, figure by
figure and count by count. The half-failing point is ``degraded``: kept with its figures, never a winner, tied
or beaten, and the sweep exits 3.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import (
    ROOT,
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    records,
    run_cli,
    run_dirs,
    started_cli,
    wait_until,
    write_experiment,
)

pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("one_answer")]

VARIANTS = {
    "autoregressive": "--algorithm ar",
    "linear": "--algorithm linear --draft-tokens 4",
    "ddtree": "--algorithm ddtree --budget {budget} --topk {topk} --draft-tokens 4",
}
LOAD = {"concurrency": [1, 4], "warmup": 1, "requests": 4, "max_tokens": 16}


@dataclass
class Run:
    name: str
    run_dir: Path
    sweep: subprocess.CompletedProcess[str]


@dataclass
class Runs:
    home: Path
    results: Path
    grid: Run
    search: Run
    failing: Run
    killed: Path
    killed_file: Path


def _grid(port: int) -> dict[str, Any]:
    doc = local_experiment("grid", port, VARIANTS, baselines=["autoregressive", "linear"], load={**LOAD, "repeats": 2})
    doc["variants"]["ddtree"]["matrix"] = {"budget": [4, 8], "topk": [1]}
    return doc


def _search(port: int) -> dict[str, Any]:
    doc = local_experiment("search", port, VARIANTS, baselines=["autoregressive", "linear"], load=LOAD)
    doc["variants"]["ddtree"]["matrix"] = {"budget": [2, 4, 8], "topk": [1, 2]}
    doc["lossless"] = {"enabled": False}
    doc["objective"] = {"maximize": "output_tok_s", "at": {"concurrency": 4}}
    doc["search"] = {"strategy": "random", "budget": {"restarts": 4}, "seed": 3, "where": ["budget >= topk"]}
    return doc


def _failing(port: int) -> dict[str, Any]:
    variants = {
        "autoregressive": "--algorithm ar",
        "linear": "--algorithm linear --draft-tokens 4",
        "flaky": "--algorithm linear --draft-tokens 2 --fault http-500-rate=0.5",
    }
    load = {"concurrency": [2], "warmup": 1, "requests": 12, "max_tokens": 16}
    return local_experiment("failing", port, variants, baselines=["autoregressive"], load=load)


def _killed(port: int) -> dict[str, Any]:
    doc = local_experiment(
        "killed",
        port,
        VARIANTS,
        baselines=["autoregressive"],
        itl_ms=20,
        load={"concurrency": [1, 2], "warmup": 1, "requests": 6, "max_tokens": 32},
    )
    doc["variants"]["ddtree"]["matrix"] = {"budget": [4, 8, 16], "topk": [1]}
    return doc


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    base = tmp_path_factory.mktemp("one_answer")
    home = base / "home"
    home.mkdir()
    results = base / "results"
    env = cli_env(home)
    files = {
        name: write_experiment(base / f"{name}.yaml", make(free_port()))
        for name, make in (("grid", _grid), ("search", _search), ("failing", _failing), ("killed", _killed))
    }
    with local_leftovers_restored(home, *files.values()):
        made: dict[str, Run] = {}
        for name, args in (("grid", []), ("search", ["--json"]), ("failing", ["--json"])):
            proc = run_cli("sweep", str(files[name]), "--results", str(results), *args, env=env, timeout=600)
            (run_dir,) = run_dirs(results, name)
            made[name] = Run(name, run_dir, proc)
        with started_cli("sweep", str(files["killed"]), "--results", str(results), "--no-report", env=env) as proc:
            found = wait_until(lambda: [d for d in run_dirs(results, "killed") if records(d)], timeout=300)
            assert found, "the run to kill wrote no record"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        restored = run_cli("restore", str(files["killed"]), env=env)
        assert restored.returncode == 0, restored.stdout + restored.stderr
        yield Runs(home, results, made["grid"], made["search"], made["failing"], found[0], files["killed"])


# -- every output of a run, and what they must agree on -------------------------------------------------------


def _json(*args: str, env: dict[str, str]) -> Any:
    proc = run_cli(*args, env=env, timeout=300)
    assert proc.returncode == 0, f"{args}: {proc.stderr}"
    return json.loads(proc.stdout)


def _close(a: Any, b: Any, digits: int = 4) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return round(float(a), digits) == round(float(b), digits)


def _key(point: dict[str, Any]) -> tuple[str, str, str, str]:
    return (point["host"], point["workload"], point["label"], point["load_label"])


def _same_answer(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two renderings of one answer: the same points (figures with intervals and sources), winners, counts."""
    assert a["counts"] == b["counts"]
    assert a["finding_counts"] == b["finding_counts"]
    assert {_key(p): p for p in a["points"]} == {_key(p): p for p in b["points"]}
    assert a["loads"] == b["loads"]


def _outputs(runs: Runs, run_dir: Path) -> dict[str, Any]:
    env = cli_env(runs.home)
    report = _json("report", str(run_dir), "--json", env=env)
    listed = _json("ls", "--results", str(runs.results), "--kind", "all", "--json", env=env)
    (entry,) = [r for r in listed["runs"] if Path(r["run_dir"]) == run_dir]
    return {
        "report": report,
        "answer": report["answer"],
        "recommend": _json("recommend", str(run_dir), "--json", env=env),
        "compare": _json("compare", str(run_dir), str(run_dir), "--json", env=env),
        "ls": entry,
        "markdown": (run_dir / "report.md").read_text(encoding="utf-8"),
        "html": (run_dir / "report.html").read_text(encoding="utf-8"),
    }


def _agree(runs: Runs, run_dir: Path, out: dict[str, Any]) -> None:
    answer = out["answer"]
    counts = answer["counts"]
    points = {_key(p): p for p in answer["points"]}
    assert points and answer["counts"]["ok"] + counts["degraded"] + counts["failed"] + counts["skipped"] == len(points)

    # The notebook reads the answer the same way (its first cell calls answer(run_dir)).
    from orchestrator.analysis.answer import answer as make_answer

    notebook = json.loads((ROOT / "notebooks" / "sweep-results.ipynb").read_text())
    assert any("answer(run_dir)" in "".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    _same_answer(make_answer(run_dir).to_dict(), answer)

    # ls: the same counts.
    assert {k: out["ls"][k] for k in ("ok", "degraded", "failed")} == {
        k: counts[k] for k in ("ok", "degraded", "failed")
    }

    # report.md and report.html: the same counts and the same winners.
    said = f"{counts['ok']} points ok, {counts['degraded']} degraded, {counts['failed']} failed, {counts['skipped']}"
    for text in (out["markdown"], out["html"]):
        assert said in text
        for load in answer["loads"]:
            assert load["winner"] in text

    # compare (a run against itself): every point's figures and status as the answer has them.
    for row in out["compare"]["points"]:
        point = points[(row["host"], row["workload"] or "", row["label"], row["load_label"])]
        assert row["status_b"] == point["status"]
        for figure in ("output_tok_s", "accept_len", "ttft_ms_p50"):
            assert _close(row.get(f"{figure}_b"), (point["figures"].get(figure) or {}).get("value")), figure

    # recommend: the objective's choice on the answer's rows, with the answer's interval and margin.
    loads = {(lv["workload"], lv["load_label"]): lv for lv in answer["loads"]}
    assert out["recommend"]["levels"]
    for level in out["recommend"]["levels"]:
        won = loads.get(("", level["load"]))
        if level["best"] is None:
            assert won is None
            continue
        assert won is not None, level
        best = level["best"]
        assert best["label"] == won["winner"]
        assert _close(best["value"], won["value"]) and _close(best["se"], won["se"])
        assert _close(best["lo"], won["lo"]) and _close(best["hi"], won["hi"])
        assert (level["runner_up"] or {}).get("label") == won["runner_up"]
        if level["margin"] is not None:
            assert _close(level["margin"]["lo"], won["margin_lo"], 5)
            assert _close(level["margin"]["hi"], won["margin_hi"], 5)
            assert level["margin"]["significant"] == won["decided"]


def _ending_agrees(text: str, answer: dict[str, Any]) -> None:
    """The sweep's ending (a terminal 200 columns wide: one table row a line) says the answer's counts and,
    for each load, its winner with the answer's figure."""
    counts = answer["counts"]
    assert f"{counts['ok']} points ok" in text
    lines = text.splitlines()
    for load in answer["loads"]:
        row = [ln for ln in lines if f" {load['load_label']} " in ln and f" {load['winner']} " in ln]
        assert any(f"{load['value']:,.1f}" in ln for ln in row), (load, row)
        for tied in load["tied"]:
            assert tied in text


# -- the tests ------------------------------------------------------------------------------------------------


def test_a_grid_run_with_repeats_gives_one_answer(runs: Runs) -> None:
    assert runs.grid.sweep.returncode == 0, runs.grid.sweep.stderr
    out = _outputs(runs, runs.grid.run_dir)
    answer = out["answer"]
    assert answer["counts"] == {"planned": 8, "ok": 8, "degraded": 0, "failed": 0, "skipped": 0}
    # Repeats are combined into one point with one interval (two windows each), not counted twice.
    assert {p["windows"] for p in answer["points"]} == {2}
    assert all("repeats" in (p["ci_method"] or "") for p in answer["points"])
    _agree(runs, runs.grid.run_dir, out)
    _ending_agrees(runs.grid.sweep.stdout, answer)


def test_a_search_run_gives_one_answer_and_sweep_json_holds_it(runs: Runs) -> None:
    assert runs.search.sweep.returncode == 0, runs.search.sweep.stderr
    swept = json.loads(runs.search.sweep.stdout)
    out = _outputs(runs, runs.search.run_dir)
    # sweep --json holds what the footer promises: every point's figures with intervals, winners, findings.
    _same_answer(swept["answer"], out["answer"])
    figures = [p["figures"]["output_tok_s"] for p in swept["answer"]["points"] if p["status"] == "ok"]
    assert figures and all(f["lo"] is not None and f["lo"] <= f["value"] <= f["hi"] for f in figures)
    assert all("ttft_ms_p50" in p["figures"] for p in swept["answer"]["points"] if p["status"] == "ok")
    assert swept["answer"]["loads"] and "findings" in swept["answer"]
    _agree(runs, runs.search.run_dir, out)


def test_a_point_that_lost_half_its_requests_is_degraded_not_ranked_and_the_sweep_exits_3(runs: Runs) -> None:
    proc = runs.failing.sweep
    assert proc.returncode == 3, proc.stderr
    swept = json.loads(proc.stdout)
    assert swept["exit_code"] == 3
    answer = swept["answer"]
    (flaky,) = [p for p in answer["points"] if p["variant"] == "flaky"]
    assert flaky["status"] == "degraded", flaky
    assert flaky["lost_requests"] and flaky["lost_requests"] > 0.1 * flaky["requests"]
    assert "http_500" in flaky["why"] and f"{flaky['lost_requests']} of" in flaky["why"]
    assert flaky["figures"]["output_tok_s"]["value"] > 0  # it keeps its figures
    assert answer["counts"]["degraded"] == 1 and swept["degraded"] == 1
    for load in answer["loads"]:
        assert "flaky" not in (load["winner"], *load["tied"], *load["beats"], load["runner_up"])
    last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1]
    assert last.startswith("specsweep: error: ") and "1 of 3 point(s) degraded" in last, last
    out = _outputs(runs, runs.failing.run_dir)
    _same_answer(answer, out["answer"])
    _agree(runs, runs.failing.run_dir, out)
    assert all(lv["best"]["label"] != "flaky" for lv in out["recommend"]["levels"] if lv["best"])


def test_a_killed_and_restored_run_is_interrupted_and_says_how_to_resume(runs: Runs) -> None:
    env = cli_env(runs.home)
    listed = _json("ls", "--results", str(runs.results), "--kind", "all", "--json", env=env)
    (entry,) = [r for r in listed["runs"] if Path(r["run_dir"]) == runs.killed]
    assert json.loads((runs.killed / "run.json").read_text())["state"] == "running"  # as the kill left it
    assert entry["state"] == "interrupted"
    assert entry["resume"] == f"specsweep sweep {runs.killed_file.resolve()} --resume {runs.killed}"
    shown = run_cli("ls", "--results", str(runs.results), env=env)
    assert f"resume it: specsweep sweep {runs.killed_file.resolve()} --resume {runs.killed}" in shown.stdout
    out = _outputs(runs, runs.killed)
    assert out["answer"]["counts"]["ok"] >= 1
    _agree(runs, runs.killed, out)
