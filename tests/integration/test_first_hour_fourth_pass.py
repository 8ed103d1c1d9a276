"""Issue 50, the first hour (fourth pass), through the real CLI as a subprocess against the simulator: the error
breakdown of a point with repeats, findings at 80 columns, degraded points of one configuration, and the
counts, estimates and small things a new user meets."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.reliability.harness import (
    ROOT,
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    run_cli,
    run_dirs,
    write_experiment,
)
from tests.timing import scaled

pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("first_hour_fourth_pass")]

NOTEBOOK = ROOT / "notebooks" / "sweep-results.ipynb"

FLAKY = {
    "autoregressive": "--algorithm ar",
    "flaky": "--algorithm linear --draft-tokens 2 --fault http-500-rate=0.5",
}
#: Two repeats of 12 requests at each of two loads: each point's errors come from both of its repeats.
FLAKY_LOAD = {"concurrency": [1, 4], "warmup": 1, "requests": 12, "max_tokens": 16, "repeats": 2}


@dataclass
class Flaky:
    home: Path
    path: Path
    run_dir: Path
    sweep: subprocess.CompletedProcess[str]
    #: The requests each point of ``flaky`` lost, from its records (every repeat): {load label: (errors, sent)}.
    lost: dict[str, tuple[int, int]]


@pytest.fixture(scope="module")
def flaky(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flaky]:
    base = tmp_path_factory.mktemp("flaky")
    home = base / "home"
    home.mkdir()
    doc = local_experiment("flaky", free_port(), FLAKY, baselines=["autoregressive"], load=FLAKY_LOAD)
    path = write_experiment(base / "flaky.yaml", doc)
    with local_leftovers_restored(home, path):
        proc = run_cli("sweep", str(path), "--results", str(base / "results"), env=cli_env(home), timeout=300)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # degraded points
    (run_dir,) = run_dirs(base / "results", "flaky")
    lost: dict[str, tuple[int, int]] = {}
    for line in (run_dir / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("variant") != "flaky" or record.get("status") != "ok":
            continue
        label = f"C={record['concurrency']}"
        client = record["client"]
        assert sum(client["errors_by_kind"].values()) == client["errors"], client  # the simulator's 500s only
        errors, sent = lost.get(label, (0, 0))
        lost[label] = (errors + client["errors"], sent + client["requests"])
    assert set(lost) == {"C=1", "C=4"} and all(errors for errors, _ in lost.values()), lost
    yield Flaky(home, path, run_dir, proc, lost)


@dataclass
class Grid:
    home: Path
    path: Path
    run_dir: Path
    sweep: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grid]:
    """Autoregressive and a linear chain at two loads: each load has a winner, a runner-up and a margin."""
    base = tmp_path_factory.mktemp("grid")
    home = base / "home"
    home.mkdir()
    variants = {"autoregressive": "--algorithm ar", "linear": "--algorithm linear --draft-tokens 4"}
    load = {"concurrency": [1, 4], "warmup": 1, "requests": 8, "max_tokens": 16}
    doc = local_experiment("grid", free_port(), variants, baselines=["autoregressive"], load=load)
    path = write_experiment(base / "grid.yaml", doc)
    with local_leftovers_restored(home, path):
        env = cli_env(home, COLUMNS="80")  # the ending as an 80-column terminal shows it
        proc = run_cli("sweep", str(path), "--results", str(base / "results"), env=env, timeout=300)
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    (run_dir,) = run_dirs(base / "results", "grid")
    yield Grid(home, path, run_dir, proc)


def _executed_notebook(run_dir: Path, out: Path) -> str:
    """The shipped notebook executed by papermill on ``run_dir``: its every cell's text output, joined."""
    command = [sys.executable, "-m", "papermill", str(NOTEBOOK), str(out), "-p", "RUN_DIR", str(run_dir)]
    proc = subprocess.run([*command, "--log-level", "ERROR"], capture_output=True, text=True, timeout=scaled(600))
    assert proc.returncode == 0, proc.stderr[-3000:]
    texts = []
    for cell in json.loads(out.read_text())["cells"]:
        for output in cell.get("outputs", []):
            texts.append("".join(output.get("text", "")))
            texts.append("".join(output.get("data", {}).get("text/plain", "")))
            texts.append("".join(output.get("data", {}).get("text/html", "")))
    return "\n".join(texts)


# -- 1. the error breakdown counts every repeat -------------------------------------------------------------------


def test_the_error_breakdown_counts_every_repeat_in_every_output(flaky: Flaky, tmp_path: Path) -> None:
    """Each point's ``(http_500: N)`` is all its errors (both repeats), in the ending, report.md and .html,
    ``report --json``, summary.csv and the notebook; before, N was the first repeat's alone."""
    env = cli_env(flaky.home)
    proc = run_cli("report", str(flaky.run_dir), env=env)
    assert proc.returncode == 0, proc.stderr
    as_json = run_cli("report", str(flaky.run_dir), "--json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    outputs = {
        "the ending": flaky.sweep.stdout + flaky.sweep.stderr,
        "report.md": (flaky.run_dir / "report.md").read_text(),
        "report.html": (flaky.run_dir / "report.html").read_text(),
        "report --json": as_json.stdout,
        "summary.csv": (flaky.run_dir / "summary.csv").read_text(),
        "the notebook": _executed_notebook(flaky.run_dir, tmp_path / "executed.ipynb"),
    }
    for label, (errors, sent) in flaky.lost.items():
        for name, text in outputs.items():
            said = {int(n) for n in re.findall(rf"{errors} of {sent} requests \w+ \(http_500: (\d+)\)", text)}
            assert said == {errors}, f"{name}, {label}: {errors} of {sent} errored, said http_500: {said}"


# -- 3. two degraded points of one configuration ----------------------------------------------------------------


def test_two_degraded_points_of_one_configuration_keep_a_finding_each(flaky: Flaky, tmp_path: Path) -> None:
    """report.md, the console's findings and the notebook say each degraded point's own count; before, the
    second load's finding was merged into the first's line ("flaky at C=1, C=4: 11 of 24 ...")."""
    proc = run_cli("report", str(flaky.run_dir), env=cli_env(flaky.home))
    assert proc.returncode == 0, proc.stderr
    markdown = (flaky.run_dir / "report.md").read_text()
    for label, (errors, sent) in flaky.lost.items():
        line = f"[request_errors] flaky at {label} on local: {errors} of {sent} requests errored"
        assert line in markdown, markdown
        assert re.search(rf"request_errors +flaky at {label} on local +{errors} of {sent} ", proc.stdout), proc.stdout
    assert "flaky at C=1, C=4" not in markdown.split("## Winners")[0], markdown


# -- 2. findings at 80 columns -----------------------------------------------------------------------------------


def test_findings_at_80_columns_keep_each_check_name_configuration_and_load(flaky: Flaky) -> None:
    """``COLUMNS=80 specsweep report``: every finding's whole check name with its configuration and load on one
    line, and no line wider than 80; before, the table cut ``request_errors`` to ``reques`` and broke the
    place into letters, so two degraded points printed as alike rows."""
    proc = run_cli("report", str(flaky.run_dir), env=cli_env(flaky.home, COLUMNS="80"))
    assert proc.returncode == 0, proc.stderr
    findings = json.loads((flaky.run_dir / "checks.json").read_text())
    findings = findings["findings"] if isinstance(findings, dict) else findings
    lines = proc.stdout.split("best configuration at each load")[0].splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines), proc.stdout
    for finding in findings:
        if finding["severity"] == "info":
            continue
        parts = [p for p in (finding.get("config"), finding.get("load")) if p]
        assert any(
            line.startswith(f"{finding['severity']} {finding['check']} ") and all(p in line for p in parts)
            for line in lines
        ), (finding, proc.stdout)
    for label in flaky.lost:
        assert f"error request_errors flaky at {label} on local:" in lines, proc.stdout


# -- 4. compare judges a speedup's move against its noise -----------------------------------------------------


def test_compare_flags_a_speedup_only_when_its_move_is_beyond_noise(flaky: Flaky) -> None:
    """Two runs of one experiment: each speedup's change has a noise test (``speedup_vs_ar_significant`` is
    true or false, never missing where both runs have intervals), and ×AR is among a point's changed figures
    only when its change is significant; before, ×AR and ×linear had no interval, so any move of 5% or more
    was flagged (a -5.5% flag where --json said the throughput's move was not significant)."""
    env = cli_env(flaky.home)
    results = flaky.run_dir.parent.parent
    with local_leftovers_restored(flaky.home, flaky.path):
        again = run_cli("sweep", str(flaky.path), "--results", str(results), env=env, timeout=300)
    assert again.returncode == 3, again.stdout + again.stderr
    proc = run_cli("compare", str(flaky.run_dir), "latest", "--results", str(results), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    points = json.loads(proc.stdout)["points"]
    flaky_points = [p for p in points if p["label"] == "flaky" and p["presence"] == "both"]
    assert len(flaky_points) == 2, points
    for point in points:
        if point["speedup_vs_ar_a"] is not None and point["speedup_vs_ar_b"] is not None:
            assert point["speedup_vs_ar_significant"] in (True, False), point
        if "speedup_vs_ar" in point["changed_figures"]:
            assert point["speedup_vs_ar_significant"] is True, point


# -- 5. the overlapping-runs warning names only the runs beside ------------------------------------------------


def test_the_overlapping_runs_warning_counts_the_points_beside_and_says_no_nan(flaky: Flaky, tmp_path: Path) -> None:
    """One window of the run measured beside another sweep (its record's ``overlapped``, as the sweep writes
    it): the warning counts that one point and names that one run; before, every point measured alone read as
    beside ``nan`` ("4 of 4 points ... (nan; other ...)")."""
    import shutil

    run_dir = shutil.copytree(flaky.run_dir, tmp_path / "run")
    (run_dir / "answer.json").unlink(missing_ok=True)
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    assert last["status"] == "ok" and not last.get("overlapped"), last
    last["overlapped"] = [
        {"experiment": "other", "pid": 4242, "machine": "box", "run_dir": "results/other/1", "hosts": ["local"]}
    ]
    (run_dir / "records.jsonl").write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n")
    proc = run_cli("report", str(run_dir), "--json", env=cli_env(flaky.home))
    assert proc.returncode == 0, proc.stderr
    (finding,) = [f for f in json.loads(proc.stdout)["findings"] if f["check"] == "overlapping_runs"]
    points = len({(p["label"], p["load_label"]) for p in json.loads(proc.stdout)["answer"]["points"]})
    said = f"1 of {points} points were measured while another specsweep sweep ran on this machine (other (pid 4242"
    assert finding["message"].startswith(said), finding
    assert "nan" not in finding["message"] + " ".join(finding["evidence"]), finding


# -- 6. the notebook's margin -----------------------------------------------------------------------------------


def test_the_notebooks_winners_table_shows_the_margin_as_a_percentage(grid: Grid, tmp_path: Path) -> None:
    """The winners table (notebook and report.md) gives each load's margin over the runner-up as ``+12.3%``,
    as its interval beside it; before, the notebook showed a float column (``1.31e-02``)."""
    answer = json.loads(run_cli("report", str(grid.run_dir), "--json", env=cli_env(grid.home)).stdout)["answer"]
    margins = [lv["margin"] for lv in answer["loads"] if lv.get("margin") is not None]
    assert margins, answer["loads"]
    text = _executed_notebook(grid.run_dir, tmp_path / "executed.ipynb")
    markdown = (grid.run_dir / "report.md").read_text()
    for margin in margins:
        assert f"{margin:+.1%}" in text and f"{margin:+.1%}" in markdown, (margin, text[-4000:])
    assert not re.search(r"\d\.\d+e-0\d", text.split("indistinguishable from")[0]), text[-4000:]


# -- 7. "how it was made" at 80 columns ---------------------------------------------------------------------------


def test_how_it_was_made_prints_each_command_whole_at_80_columns(grid: Grid) -> None:
    """The ending's server command and each configuration's arguments are one line each, however wide, so they
    can be copied; before, an 80-column terminal broke the command inside its path and arguments."""
    lines = grid.sweep.stdout.split("how it was made")[1].splitlines()
    command = next(line for line in lines if line.startswith("  server command: "))
    assert "-m orchestrator.sim --host 127.0.0.1 --port " in command, lines
    assert "--profile tiny --load-seconds 0.3 --decode-log-interval 1" in command, lines
    assert "    linear: --algorithm linear --draft-tokens 4" in lines, lines
    workload = next(line for line in lines if line.startswith("  workload: "))
    assert workload.endswith("streaming yes"), lines


# -- 8. the section init's file points to --------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["sim", "vllm"])
def test_the_file_init_writes_points_to_a_section_that_exists(engine: str, tmp_path: Path) -> None:
    """The starter's comment names a document of the repository and a heading in it that describes every key;
    before, it named the README's "An experiment file", a section that had moved to docs/guide.md."""
    home = tmp_path / "home"
    home.mkdir()
    path = tmp_path / "starter.yaml"
    proc = run_cli("init", str(path), "--engine", engine, env=cli_env(home))
    assert proc.returncode == 0, proc.stderr
    (pointer,) = re.findall(r"^# Every key is described in (\S+) \(\"([^\"]+)\"\)", path.read_text(), re.M)
    document, section = pointer
    headings = [line.lstrip("#").strip() for line in (ROOT / document).read_text().splitlines() if line.startswith("#")]
    assert section in headings, (document, section)


# -- 9. the counts add up -----------------------------------------------------------------------------------------


def test_plan_and_dry_run_count_points_as_the_sweep_does_and_say_the_repeats_apart(flaky: Flaky) -> None:
    """Two repeats of four points: ``plan`` and ``sweep --dry-run`` say 4 load points (8 measurements), the
    count the sweep's start line and its answer give; before, both said 8 load points."""
    env = cli_env(flaky.home)
    answer = json.loads(run_cli("report", str(flaky.run_dir), "--json", env=env).stdout)["answer"]
    planned = answer["counts"]["planned"]
    assert planned == 4, answer["counts"]
    assert f"{planned} of {planned} points to measure" in flaky.sweep.stderr + flaky.sweep.stdout
    said = f"2 deployments, {planned} load points ({2 * planned} measurements with their repeats and restarts)"
    plan = run_cli("plan", str(flaky.path), env=env)
    assert plan.returncode == 0, plan.stderr
    assert said in " ".join(plan.stdout.split()), plan.stdout
    dry = run_cli("sweep", str(flaky.path), "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert said in dry.stdout.splitlines()[0], dry.stdout[:400]


def test_a_successive_halving_search_counts_the_points_it_measures(tmp_path: Path) -> None:
    """A successive-halving search measures its promoted candidates again (more windows of the same points):
    its start line and progress count the points its answer holds, so ``[n/N]`` ends at N and the ending's
    counts add up to N; before, it said 10 points to measure, stopped at [8/10] and every output said 8 ok."""
    home = tmp_path / "home"
    home.mkdir()
    variants = {
        "autoregressive": "--algorithm ar",
        "linear": "--algorithm linear --draft-tokens 4",
        "ddtree": "--algorithm ddtree --budget {budget} --topk {topk} --draft-tokens 4",
    }
    load = {"concurrency": [1, 4], "warmup": 1, "requests": 4, "max_tokens": 16}
    doc = local_experiment("halving", free_port(), variants, baselines=["autoregressive", "linear"], load=load)
    doc["variants"]["ddtree"]["matrix"] = {"budget": [2, 4, 8], "topk": [1, 2]}
    doc["lossless"] = {"enabled": False}
    doc["objective"] = {"maximize": "output_tok_s", "at": {"concurrency": 4}}
    doc["search"] = {"strategy": "successive-halving", "budget": {"restarts": 8}, "seed": 3}
    path = write_experiment(tmp_path / "halving.yaml", doc)
    with local_leftovers_restored(home, path):
        proc = run_cli("sweep", str(path), "--results", str(tmp_path / "results"), env=cli_env(home), timeout=400)
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    said = re.search(r"^(\d+) of (\d+) points to measure", proc.stderr + proc.stdout, re.M)
    assert said is not None, proc.stderr
    total = int(said[2])
    progress = [int(n) for n in re.findall(rf"^\[(\d+)/{total}\] ", proc.stderr + proc.stdout, re.M)]
    assert progress and max(progress) == total, proc.stderr
    assert any("[restart 2]" in line for line in proc.stderr.splitlines()), proc.stderr  # a rung measured again
    ending = r"^(\d+) points ok(?:, (\d+) degraded)?(?:, (\d+) failed)?(?:, (\d+) skipped)?"
    counts = re.search(ending, proc.stdout, re.M)
    assert counts is not None, proc.stdout
    assert sum(int(n) for n in counts.groups() if n) == total, (counts[0], total)


# -- 10. a resumed run says so ------------------------------------------------------------------------------------


def test_a_resumed_run_is_marked_resumed_in_ls_and_the_report(flaky: Flaky) -> None:
    """A run stopped after two of its records and continued with ``--resume``: ``ls`` shows it ``done
    (resumed)`` (``--json``: when) and its report's header says when it was resumed; before, nothing did."""
    import shutil

    results = flaky.run_dir.parent.parent / "resumed"
    copy = shutil.copytree(flaky.run_dir, results / "flaky" / f"{flaky.run_dir.name}-part")
    records = (copy / "records.jsonl").read_text().splitlines(keepends=True)
    (copy / "records.jsonl").write_text("".join(records[:2]))
    env = cli_env(flaky.home)
    with local_leftovers_restored(flaky.home, flaky.path):
        proc = run_cli("sweep", str(flaky.path), "--resume", str(copy), env=env, timeout=300)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    listed = run_cli("ls", "--results", str(results), env=env)
    assert listed.returncode == 0, listed.stderr
    assert re.search(rf"{flaky.run_dir.name} +done \(resumed\)", listed.stdout), listed.stdout
    (run,) = json.loads(run_cli("ls", "--results", str(results), "--json", env=env).stdout)["runs"]
    assert len(run["resumed_at"]) == 1, run
    assert f"Resumed 1 time(s) (--resume): at {run['resumed_at'][0]}." in (copy / "report.md").read_text()


# -- 11. the host lock is keyed by the port, not the experiment's name -----------------------------------------


def test_the_host_lock_is_the_servers_port_not_the_experiments_name(tmp_path: Path) -> None:
    """A sweep of ``twin`` holds its server's port: another ``twin`` on another port runs beside it, and an
    experiment of another name on the same port is refused; before, the lock was the name's, so it was the
    other way round (a same-named experiment on a different port blocked a sweep)."""
    import os
    import signal

    from tests.reliability.harness import records, started_cli, wait_until

    home = tmp_path / "home"
    home.mkdir()
    env = cli_env(home)
    variants = {"ar": "--algorithm ar"}
    long_load = {"concurrency": [1], "repeats": 500, "warmup": 1, "requests": 8, "max_tokens": 16}
    short_load = {"concurrency": [1], "warmup": 1, "requests": 4, "max_tokens": 8}
    port = free_port()
    first = write_experiment(tmp_path / "first.yaml", local_experiment("twin", port, variants, load=long_load))
    twin = write_experiment(tmp_path / "twin.yaml", local_experiment("twin", free_port(), variants, load=short_load))
    other = write_experiment(tmp_path / "other.yaml", local_experiment("other", port, variants, load=short_load))
    results = tmp_path / "results"
    with (
        local_leftovers_restored(home, first, twin, other),
        started_cli("sweep", str(first), "--results", str(results), env=env) as running,
    ):
        run = wait_until(lambda: next(iter(run_dirs(results, "twin")), None), timeout=60)
        wait_until(lambda: records(run), timeout=120)  # the first sweep holds its port and measures
        beside = run_cli("sweep", str(twin), "--results", str(tmp_path / "results-twin"), env=env, timeout=300)
        refused = run_cli("sweep", str(other), "--results", str(tmp_path / "results-other"), env=env, timeout=300)
        assert running.poll() is None, "the first sweep ended before the others ran"
        os.kill(running.pid, signal.SIGINT)
        running.communicate(timeout=scaled(120))
    assert beside.returncode == 0, beside.stdout + beside.stderr
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert "lock" in refused.stderr and "Traceback" not in refused.stderr, refused.stderr


# -- 12. validate reports every error at once -------------------------------------------------------------------

EVERY_KIND_OF_ERROR = """\
name: bad
host: local
service:
  kind: process
  command: "{python} -m orchestrator.sim --port 19999 {spec_args}"
server: {url: "http://127.0.0.1:19999", expected_load_time: 2x}
engine: sim
variants:
  autoregressive: {spec_args: "--algorithm ar", colour: red}
  linear: {spec_args: "--algorithm linear --draft-tokens {k}"}
baselines: [autoregressive, nope]
load: {concurrency: [1, -4], requests: 0, max_tokens: 16, bogus: 1}
"""


def test_validate_reports_the_checks_across_sections_with_the_values_refused(tmp_path: Path) -> None:
    """A file with refused values (a bad duration, a negative concurrency, an unknown load key) and errors
    across sections (an unused variant key, a placeholder no matrix fills, a baseline that is no variant):
    ``validate`` names all seven at once; before, the second kind appeared only once the first was fixed."""
    path = tmp_path / "bad.yaml"
    path.write_text(EVERY_KIND_OF_ERROR)
    proc = run_cli("validate", str(path), env=cli_env(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    for where in (
        "6:41: server.expected_load_time:",
        "9:49: variants.autoregressive.colour: unknown key 'colour'",
        "10:12: variants.linear.spec_args: unknown placeholder {k}",
        "11:29: baselines.1: baseline 'nope' is not a variant",
        "12:25: load.concurrency.1:",
        "12:30: load.requests:",
        "12:59: load.bogus: unknown key 'bogus'",
    ):
        assert f"invalid {path}:{where}" in proc.stderr, (where, proc.stderr)
    assert f"{path}: 7 errors" in proc.stderr, proc.stderr


# -- 13. the latency axes' numbers never overlap --------------------------------------------------------------


def test_the_latency_distributions_axis_numbers_never_overlap(grid: Grid) -> None:
    """The report's latency CDFs of a run the CLI made (inter-token latencies spread over several decades):
    no two numbers of an axis overlap; before, 1, 2, 3, 5 and 7 of every decade were labelled whatever the
    span, and ``0.002 0.003 0.005 0.007`` ran into each other."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    from orchestrator.analysis import analyse
    from orchestrator.analysis import requests as request_samples
    from orchestrator.report import workloads

    analysis = analyse(grid.run_dir)
    assert analysis.run.windows is not None
    samples = request_samples.samples_frame(analysis.path, analysis.run.windows)
    # How many decades the run's own latencies span depends on the machine (58x on a busy CI machine, so no
    # axis of more than two decades; on a busier one a load may have no gap above 0 ms at all, every token of
    # a request read at once): so the widened samples do not come from the run's gaps. Each load's inter-token
    # samples are replaced by the same fixed spread, 0.0005 to 50 ms (five decades), the case that overlapped.
    widened = samples.reset_index(drop=True)
    for load in set(widened["load_label"]):
        rows = widened.index[(widened["load_label"] == load) & (widened["figure"] == "itl_ms")]
        assert len(rows) >= 2, load
        widened.loc[rows, "value"] = np.geomspace(0.0005, 50.0, len(rows))
    spans = []
    for load, frame in itertools.product(sorted(set(analysis.frame["load_label"])), (samples, widened)):
        figure = workloads.latency_cdfs(analysis, frame, load)
        assert figure is not None, load
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
        for ax in figure.axes:
            low, high = ax.get_xlim()
            spans.append(high / low)
            shown = [t for t in ax.xaxis.get_ticklabels() if t.get_visible() and t.get_text()]
            inside = [t for t in shown if low <= t.get_position()[0] <= high]
            boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in inside]
            for (a, box_a), (b, box_b) in itertools.pairwise(boxes):
                assert not box_a.overlaps(box_b), (load, a, b)
    assert max(spans) > 10_000, spans  # the widened samples' axes span more than four decades


def test_inter_token_gaps_of_0_ms_count_in_the_share_and_a_load_without_any_says_so() -> None:
    """A busy client reads several chunks at once, so some inter-token gaps are 0 ms and, at worst, all of a
    load's: the CDF counts them (its curve starts at their share) and a panel with none above 0 ms says so
    instead of drawing an empty log axis with limits of its own (issue 59, item 8)."""
    import matplotlib
    import pandas as pd

    matplotlib.use("Agg")
    from orchestrator.analysis import analyse
    from orchestrator.report import workloads
    from tests.integration.test_notebook import RUNS

    analysis = analyse(RUNS / "sim-demo")
    label, load = str(analysis.frame["label"].iloc[0]), str(analysis.frame["load_label"].iloc[0])

    def drawn(itl: list[float]) -> matplotlib.axes.Axes:
        rows = [{"load_label": load, "label": label, "figure": "ttft_ms", "value": v} for v in (20.0, 40.0)]
        rows += [{"load_label": load, "label": label, "figure": "itl_ms", "value": v} for v in itl]
        figure = workloads.latency_cdfs(analysis, pd.DataFrame(rows), load)
        assert figure is not None
        figure.canvas.draw()
        return figure.axes[1]

    some = drawn([0.0, 0.0, 0.0, 2.0, 4.0])
    ((xs, ys),) = [(line.get_xdata(), line.get_ydata()) for line in some.get_lines()]
    assert list(xs) == [2.0, 4.0] and list(ys) == pytest.approx([0.8, 1.0]), (xs, ys)
    none = drawn([0.0, 0.0, 0.0])
    assert not none.get_lines() and none.get_xscale() == "linear"
    assert [t.get_text() for t in none.texts] == ["no inter-token sample above 0 ms at this load"]


# -- 14. the plan's ETA says what it stands on --------------------------------------------------------------------


def test_the_plans_eta_says_what_it_stands_on(flaky: Flaky, tmp_path: Path) -> None:
    """Without an earlier run the plan's ETA stands on the simulator's own figures (its command's profile and
    --load-seconds: orchestrator/plan/pace.py) and says so, with its figures; with one, on what that run measured
    (and the first guess's ETA beside it); before, a first plan's ETA was a bare figure (2h40m for a search that
    took 3 minutes, with nothing to say where it came from). tests/integration/test_eta_cli.py holds the ETA
    against the time a sweep takes."""
    env = cli_env(flaky.home)
    first = run_cli("plan", str(flaky.path), "--results", str(tmp_path / "none-yet"), env=env)
    assert first.returncode == 0, first.stderr
    said = " ".join(first.stdout.split())
    assert re.search(
        r"ETA \S+ \(the simulator's own figures: its tiny profile's step times, --load-seconds 0.3 \+ 2.5 s per "
        r"start, the lossless probe's 8 prompts at C=1; a sweep learns the real figures as it runs\)",
        said,
    ), said
    learned = run_cli("plan", str(flaky.path), "--results", str(flaky.run_dir.parent.parent), env=env)
    said = " ".join(learned.stdout.split())
    assert re.search(r"ETA \S+ \(learned from \d+ earlier run\(s\): .*; the first guess: ETA \S+\)", said), said
