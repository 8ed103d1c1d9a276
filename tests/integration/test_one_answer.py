"""One answer per run (issue 37): every output of a run gives the same figures, counts and winners.

The shapes of run that gave several answers before: a grid with repeats, a search, a run with a point whose
requests half fail (the simulator's ``--fault http-500-rate``), and a run killed with SIGKILL and restored.
Each is made by the CLI as a subprocess against the simulator; then every output is rendered (the sweep's
live progress and its ending, ``sweep --json``, ``report`` with its HTML, Markdown and ``--json``,
``recommend --json``, ``compare --json``, ``ls --json`` and the shipped notebook, executed by papermill) and
held against the run's answer, figure by figure and count by count. The half-failing point is ``degraded``:
kept with its figures, never a winner, tied or beaten, and the sweep exits 3.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis.diff import DIFF_FIGURES
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
from tests.timing import scaled

pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("one_answer")]
pytest.importorskip("papermill")

NOTEBOOK = ROOT / "notebooks" / "sweep-results.ipynb"

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
    #: The half-failing run once more, with ``sweep --json`` (in a results directory of its own).
    failing_json: Run
    failing_json_results: Path
    killed: Path
    killed_file: Path
    #: Each run directory's notebook, executed by papermill.
    notebooks: dict[Path, Path]


def _grid(port: int) -> dict[str, Any]:
    doc = local_experiment("grid", port, VARIANTS, baselines=["autoregressive", "linear"], load={**LOAD, "repeats": 2})
    doc["variants"]["ddtree"]["matrix"] = {"budget": [4, 8], "topk": [1]}
    # Goodput (requests within every latency limit, per second) is a figure of the answer like the others;
    # recommend judges its constraint on the answer's figure and interval, not on the windows of its own.
    doc["objective"] = {
        "maximize": "output_tok_s",
        "at": {"concurrency": 4},
        "constraints": {"goodput": {"min": 0.001}},
        "goodput": {"ttft_ms": 60000, "e2e_ms": 120000},
    }
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
    # A step of at least 20 ms: each answer's tokens come in several reads whatever the machine's speed, so each
    # request has a decode time above 0 and the degraded point a per-user rate. At the tiny profile's own pace
    # (about 1 ms a step) a busy client read a whole answer at once, and the point had no per_user_tok_s.
    return local_experiment("failing", port, variants, baselines=["autoregressive"], load=load, itl_ms=20)


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
    makers = {"grid": _grid, "search": _search, "failing": _failing, "failing--json": _failing, "killed": _killed}
    files = {key: base / f"{key}.yaml" for key in makers}

    def fresh(key: str) -> Path:
        """The experiment file, written just before its sweep: its simulator's port picked free then."""
        return write_experiment(files[key], makers[key](free_port()))

    failing_json = base / "results-json"
    with local_leftovers_restored(home, *files.values()):
        made: dict[str, Run] = {}
        for key, where in (
            ("grid", results),
            ("search", results),
            ("failing", results),
            ("failing--json", failing_json),
        ):
            name, _, flag = key.partition("--")
            args = [f"--{flag}"] if flag else []
            proc = run_cli("sweep", str(fresh(key)), "--results", str(where), *args, env=env, timeout=600)
            (run_dir,) = run_dirs(where, name)
            # What it printed, kept beside it (a failing assertion shows a part; this is the whole).
            (base / f"{key}.stdout").write_text(proc.stdout)
            (base / f"{key}.stderr").write_text(proc.stderr)
            made[key] = Run(name, run_dir, proc)
        with started_cli("sweep", str(fresh("killed")), "--results", str(results), "--no-report", env=env) as proc:
            found = wait_until(lambda: [d for d in run_dirs(results, "killed") if records(d)], timeout=300)
            assert found, "the run to kill wrote no record"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        restored = run_cli("restore", str(files["killed"]), env=env)
        assert restored.returncode == 0, restored.stdout + restored.stderr
        killed = found[0]
        # The notebook on the three shapes the done-when names (the killed run: the CLI's outputs only).
        ran = [made["grid"].run_dir, made["search"].run_dir, made["failing"].run_dir]
        notebooks = _executed_notebooks(ran, base / "notebooks")
        yield Runs(
            home,
            results,
            made["grid"],
            made["search"],
            made["failing"],
            made["failing--json"],
            failing_json,
            killed,
            files["killed"],
            notebooks,
        )


def _executed_notebooks(run_dirs: list[Path], where: Path) -> dict[Path, Path]:
    """The shipped notebook executed by papermill on each run (``-p RUN_DIR``, as a user runs it), all at once;
    the executed copies go to ``where``, outside the results (the notebook writes nothing into a run)."""
    where.mkdir()
    procs = {}
    for run_dir in run_dirs:
        out = where / f"{run_dir.parent.name}-{run_dir.name}.ipynb"
        command = [sys.executable, "-m", "papermill", str(NOTEBOOK), str(out), "-p", "RUN_DIR", str(run_dir)]
        command += ["--cwd", str(run_dir.parent), "--log-level", "ERROR"]
        procs[run_dir] = (out, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    executed = {}
    for run_dir, (out, proc) in procs.items():
        try:
            _stdout, stderr = proc.communicate(timeout=scaled(600))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, f"papermill on {run_dir}: {stderr[-3000:]}"
        executed[run_dir] = out
    return executed


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


def _outputs(runs: Runs, run_dir: Path, results: Path | None = None) -> dict[str, Any]:
    env = cli_env(runs.home)
    report = _json("report", str(run_dir), "--json", env=env)
    listed = _json("ls", "--results", str(results or runs.results), "--kind", "all", "--json", env=env)
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

    # The answer made again from the run directory is the one report --json rendered.
    from orchestrator.analysis.answer import answer as make_answer

    _same_answer(make_answer(run_dir).to_dict(), answer)

    # ls: the same counts; run.json (kept at the sweep's end) too, in points, not windows (a degraded point's
    # records are ok: the sweep does not judge it).
    assert {k: out["ls"][k] for k in ("planned", "ok", "degraded", "failed")} == {
        k: counts[k] for k in ("planned", "ok", "degraded", "failed")
    }
    kept = json.loads((run_dir / "run.json").read_text()).get("points")
    if kept is not None:
        assert kept == {
            "planned": counts["planned"],
            "ok": counts["ok"] + counts["degraded"],
            "failed": counts["failed"],
        }

    # report.md and report.html: the same counts and the same winners.
    said = f"{counts['ok']} points ok, {counts['degraded']} degraded, {counts['failed']} failed, {counts['skipped']}"
    for text in (out["markdown"], out["html"]):
        assert said in text
        for load in answer["loads"]:
            assert load["winner"] in text

    # report.md and report.html: every point's tok/s and accept length with half its interval, as the answer has
    # them, and the accept length's sources counted over the points the table shows.
    for figure, title, digits in (
        ("output_tok_s", "Output throughput (output_tok_s, tokens/s) ± half", 1),
        ("accept_len", "Accept length ± half", 2),
    ):
        shown = {
            (p["label"], p["load_label"]): p["figures"][figure]
            for p in answer["points"]
            if figure in p["figures"] and p["figures"][figure]["lo"] is not None
        }
        if not shown:  # no point has an interval: the report leaves the table out
            assert f"_{title}" not in out["markdown"]
            continue
        cells = _markdown_table(out["markdown"], title)
        assert set(cells) == set(shown), (figure, cells, shown)
        for where, f in shown.items():
            said = f"{f['value']:,.{digits}f} ± {(f['hi'] - f['lo']) / 2:,.{digits}f}"
            assert cells[where] == said and said in out["html"], (figure, where, cells[where], said)
    with_accept = sum(1 for p in answer["points"] if "accept_len" in p["figures"])
    note = re.search(r"_Accept length \(tokens per verify step, bonus included\), from (.*)_", out["markdown"])
    said = 0 if note is None else sum(int(n) for n in re.findall(r" (\d+) points?", note.group(1)))
    assert said == with_accept, (note, with_accept)

    # compare (a run against itself): every point's figures and status as the answer has them.
    for row in out["compare"]["points"]:
        point = points[(row["host"], row["workload"] or "", row["label"], row["load_label"])]
        assert row["status_b"] == point["status"]
        for figure in DIFF_FIGURES:  # every figure compare shows
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

    if run_dir in runs.notebooks:
        _notebook_agrees(runs.notebooks[run_dir], answer)


def _markdown_table(text: str, title: str) -> dict[tuple[str, str], str]:
    """The table of report.md under the caption starting with ``title``: {(configuration, load): cell}."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"_{title}"))
    head = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    loads = [c.strip() for c in lines[head].strip("|").split("|")][1:]
    cells: dict[tuple[str, str], str] = {}
    for line in lines[head + 2 :]:
        if not line.startswith("|"):
            break
        label, *row = [c.strip() for c in line.strip("|").split("|")]
        cells.update({(label, load): cell for load, cell in zip(loads, row, strict=True) if cell})
    return cells


# -- the notebook, executed -------------------------------------------------------------------------------------


def _notebook_views(executed: Path) -> dict[str, dict[str, Any]]:
    """The answer's views an executed notebook shows (``orchestrator/report/answerview.py``: each cell's
    ``application/json``, beside the table a person reads), and no cell failed."""
    notebook = json.loads(executed.read_text(encoding="utf-8"))
    views: dict[str, dict[str, Any]] = {}
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", output
            data = output.get("data", {})
            shown = data.get("application/json")
            if isinstance(shown, dict) and "answer" in shown:
                html = data.get("text/html", "")
                views[shown["answer"]] = {**shown, "html": "".join(html) if isinstance(html, list) else html}
    assert set(views) == {"counts", "loads", "points"}, set(views)
    return views


def _notebook_agrees(executed: Path, answer: dict[str, Any]) -> None:
    """What the executed notebook shows: the answer's counts, each load's winner, ties, beaten, margin and
    intervals, each point's status, requests lost, figures with their intervals and accept length's source."""
    views = _notebook_views(executed)
    counts = answer["counts"]
    assert views["counts"]["rows"] == [counts]
    assert views["counts"]["text"].startswith(f"{counts['ok']} points ok")
    assert f"(of {counts['planned']} planned)" in views["counts"]["text"]

    loads = {(r["host"], r["workload"], r["load"]): r for r in views["loads"]["rows"]}
    assert len(loads) == len(answer["loads"])
    for lv in answer["loads"]:
        row = loads[(lv["host"], lv["workload"], lv["load_label"])]
        for name in ("winner", "tied", "beats", "runner_up", "decided"):
            assert row[name] == lv[name], (name, row, lv)
        assert _close(row[answer["metric"]], lv["value"], 6)
        for name in ("lo", "hi", "margin", "margin_lo", "margin_hi"):
            assert _close(row[name], lv[name], 6), (name, row, lv)
        assert lv["winner"] in views["loads"]["html"]

    rows = {(r["host"], r["workload"], r["label"], r["load"]): r for r in views["points"]["rows"]}
    assert len(rows) == len(answer["points"])
    for point in answer["points"]:
        row = rows[_key(point)]
        assert (row["status"], row["windows"], row["requests"], row["lost"]) == (
            point["status"],
            point["windows"],
            point["requests"],
            point["lost_requests"],
        )
        for figure in ("output_tok_s", "accept_len", "per_user_tok_s", "ttft_ms_p50", "goodput"):
            shown = point["figures"].get(figure) or {}
            for part, suffix in (("value", ""), ("lo", "_lo"), ("hi", "_hi")):
                assert _close(row[figure + suffix], shown.get(part), 6), (figure, part, row, shown)
        assert row["accept_len_source"] == (point["figures"].get("accept_len") or {}).get("source")
        assert point["label"] in views["points"]["html"]


# -- the sweep's ending and its live progress, as a terminal 200 columns wide shows them -------------------------

LOAD_CELL = re.compile(r"C=\d+|rate=\S+/s")


def _cells(line: str) -> list[str]:
    """A table row's cells (columns are at least two spaces apart; a cell holds single spaces at most)."""
    return re.split(r"\s{2,}", line.strip())


def _ending_points(text: str) -> tuple[dict[tuple[str, str], dict[str, str]], str]:
    """The ending's points table: each (configuration, load) row as {header: cell}, and its caption."""
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if re.match(r"\s*configuration\s{2,}load\b", ln))
    headers = _cells(lines[head])
    rows: dict[tuple[str, str], dict[str, str]] = {}
    label = ""
    for line in lines[head + 2 :]:
        if not line.strip():
            continue
        if re.match(r"\d+ points ok", line.strip()):
            return rows, line.strip()
        cells = _cells(line)
        if not LOAD_CELL.fullmatch(cells[0]):
            label, cells = cells[0].removesuffix(" *"), cells[1:]
        rows[(label, cells[0])] = dict(zip(headers[2:], cells[1:], strict=True))
    raise AssertionError(f"no caption under the points table:\n{text}")


def _ending_loads(text: str) -> dict[str, str]:
    """The ending's best-at-each-load table: each load's row, its wrapped lines (ties, the beaten) joined."""
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if re.match(r"\s*load\s{2,}best\b", ln))
    rows: dict[str, str] = {}
    load = ""
    for line in lines[head + 2 :]:
        if not line.strip() or re.match(r"(tied with|over|margin):|error |warning |how it was made", line.strip()):
            break
        cells = _cells(line)
        if LOAD_CELL.fullmatch(cells[0]):
            load = cells[0]
            rows[load] = "  ".join(cells)
        else:
            rows[load] += "  " + "  ".join(cells)
    return rows


def _ending_agrees(text: str, answer: dict[str, Any]) -> None:
    """The sweep's ending says the answer's counts; each point's status, tok/s, its interval (±, half the width
    relative to the figure) and accept length; each load's winner with its figure, the margin (or ``tie``) with
    its interval, those tied with it and those it beats."""
    counts = answer["counts"]
    rows, caption = _ending_points(text)
    if counts["ok"] == sum(counts[k] for k in ("ok", "degraded", "failed", "skipped")):
        assert caption.startswith(f"{counts['ok']} points ok;"), caption
    else:
        said = (
            f"{counts['ok']} points ok, {counts['degraded']} degraded, {counts['failed']} failed, {counts['skipped']}"
        )
        assert caption.startswith(said), caption
    assert len(rows) == len(answer["points"])
    for point in answer["points"]:
        row = rows[(point["label"], point["load_label"])]
        if "status" in row:
            status = row["status"]
            if point["status"] == "degraded":
                assert status == f"degraded ({point['lost_requests']} of {point['requests']} lost)", status
            else:
                assert status == point["status"], (status, point)
        if point["status"] not in ("ok", "degraded"):
            continue
        figures = point["figures"]
        tok_s = figures["output_tok_s"]
        assert row["tok/s"] == f"{tok_s['value']:,.1f}", (row, point)
        if tok_s["lo"] is not None:
            assert row["±"] == f"{(tok_s['hi'] - tok_s['lo']) / 2 / tok_s['value']:.1%}", (row, point)
        accept = figures.get("accept_len")
        assert row["accept"] == (f"{accept['value']:.2f}" if accept else "-"), (row, point)
    loads = _ending_loads(text)
    assert set(loads) == {lv["load_label"] for lv in answer["loads"]}
    for lv in answer["loads"]:
        row = loads[lv["load_label"]]
        cells = row.split("  ")
        assert cells[1] == lv["winner"] and cells[2] == f"{lv['value']:,.1f}", (row, lv)
        if lv["runner_up"]:
            assert cells[3] == ("tie" if lv["decided"] is False else f"{lv['margin']:+.1%}"), (row, lv)
            if lv["margin_lo"] is not None:
                assert f"{lv['margin_lo']:+.1%}…{lv['margin_hi']:+.1%}" in row, (row, lv)
        for name in (*lv["tied"], *lv["beats"]):
            assert name in row, (name, row)


def _progress_agrees(stderr: str, answer: dict[str, Any]) -> None:
    """The live progress counts points as the answer does, not measurements: ``[n/N]`` with N the points
    planned, n never going back, ending at every point measured."""
    counts = answer["counts"]
    seen = [(int(a), int(b)) for a, b in re.findall(r"^\[(\d+)/(\d+)\] ", stderr, flags=re.MULTILINE)]
    assert seen, stderr
    assert {total for _n, total in seen} == {counts["planned"]}, seen
    done = [n for n, _total in seen]
    assert done == sorted(done) and done[-1] == sum(counts[k] for k in ("ok", "degraded", "failed")), seen
    assert f"{counts['planned']} of {counts['planned']} points to measure" in stderr


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
    # Goodput: every point has it, its repeats combined with an interval, and recommend's constraint is judged
    # on the answer's figure and interval.
    points = {(p["label"], p["load_label"]): p for p in answer["points"]}
    assert all(p["figures"]["goodput"]["lo"] < p["figures"]["goodput"]["hi"] for p in points.values())
    for level in out["recommend"]["levels"]:
        (check,) = [c for c in level["best"]["levels"][0]["constraints"] if c["figure"] == "goodput"]
        goodput = points[(level["best"]["label"], level["load"])]["figures"]["goodput"]
        assert check["status"] == "holds"
        for part in ("value", "lo", "hi"):
            assert _close(check[part], goodput[part]), (part, check, goodput)
    # Eight points of two windows each: the live count says [n/8], as ls, the ending and the plan do.
    _progress_agrees(runs.grid.sweep.stderr, answer)


def test_a_search_run_gives_one_answer(runs: Runs) -> None:
    assert runs.search.sweep.returncode == 0, runs.search.sweep.stderr
    out = _outputs(runs, runs.search.run_dir)
    _agree(runs, runs.search.run_dir, out)
    _ending_agrees(runs.search.sweep.stdout, out["answer"])
    # The search measures what its budget allows (two baselines at two loads, two candidates at C=4), not its
    # space: the live count, the answer and ls say the same six points.
    assert out["answer"]["counts"]["planned"] == 6
    _progress_agrees(runs.search.sweep.stderr, out["answer"])


def test_a_point_that_lost_half_its_requests_is_degraded_not_ranked_and_the_sweep_exits_3(runs: Runs) -> None:
    for run, results in ((runs.failing, runs.results), (runs.failing_json, runs.failing_json_results)):
        proc = run.sweep
        assert proc.returncode == 3, proc.stderr
        out = _outputs(runs, run.run_dir, results)
        answer = out["answer"]
        (flaky,) = [p for p in answer["points"] if p["variant"] == "flaky"]
        assert flaky["status"] == "degraded", flaky
        assert flaky["lost_requests"] and flaky["lost_requests"] > 0.1 * flaky["requests"]
        assert "http_500" in flaky["why"] and f"{flaky['lost_requests']} of" in flaky["why"]
        assert flaky["figures"]["output_tok_s"]["value"] > 0  # it keeps its figures
        assert answer["counts"]["degraded"] == 1
        for load in answer["loads"]:
            assert "flaky" not in (load["winner"], *load["tied"], *load["beats"], load["runner_up"])
        last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1]
        assert last.startswith("specsweep: error: ") and "1 of 3 point(s) degraded" in last, last
        assert all(lv["best"]["label"] != "flaky" for lv in out["recommend"]["levels"] if lv["best"])
        if run is runs.failing:
            _agree(runs, run.run_dir, out)
            _ending_agrees(proc.stdout, answer)
            _progress_agrees(proc.stderr, answer)
            # Its live line says so already, with the answer's count of what it lost.
            (line,) = [ln for ln in proc.stderr.splitlines() if re.match(r"\[\d+/\d+\] flaky C=2: ", ln)]
            assert f"degraded: {flaky['lost_requests']} of {flaky['requests']} requests lost" in line, line
            continue
        swept = json.loads(proc.stdout)
        assert swept["exit_code"] == 3 and swept["degraded"] == 1
        _same_answer(swept["answer"], answer)


def test_sweep_json_holds_what_the_footer_promises(runs: Runs) -> None:
    """The ending's footer says ``--json has every figure``: every figure the ending shows (and its interval),
    the latencies, the winners and the findings are in ``sweep --json``."""
    from orchestrator.cli.summary import _FIGURES

    swept = json.loads(runs.failing_json.sweep.stdout)
    answer = swept["answer"]
    shown = [column for _header, column, _format, _priority in _FIGURES if column != "output_tok_s_pm"]
    measured = [p for p in answer["points"] if p["status"] in ("ok", "degraded")]
    assert measured
    for point in measured:
        figures = point["figures"]
        # speedup_vs_ar is the AR baseline's own 1.00; every other figure the ending shows, the point has.
        assert set(shown) - {"accept_len", "speedup_vs_linear"} <= set(figures), (point["label"], set(figures))
        tok_s = figures["output_tok_s"]
        assert tok_s["lo"] is not None and tok_s["lo"] <= tok_s["value"] <= tok_s["hi"]
        for latency in ("ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "tpot_ms_p50", "e2e_ms_p50"):
            assert latency in figures, (point["label"], latency)
    assert all("accept_len" in p["figures"] for p in measured if p["variant"] != "autoregressive")
    assert answer["loads"] and all(lv["winner"] for lv in answer["loads"])
    assert answer["findings"] and answer["finding_counts"]["error"] >= 1  # the degraded point's request_errors
    assert sum(answer["finding_counts"].values()) == len(answer["findings"])


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
