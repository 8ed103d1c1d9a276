"""Issue 16, output and conventions, through the real CLI as a subprocess (at 80 columns where width matters:
``COLUMNS=80`` for a pipe, a pseudo-terminal of 80 columns for a terminal).

Two small sweeps of the simulator (tiny profile) are shared by the module: the first piped at ``COLUMNS=80``, the
second through an 80-column pty; every other test reads their run directories or runs a command of its own.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cli.app import COMMANDS
from orchestrator.experiment.starter import HOST_KINDS, starter_engines
from tests.reliability.harness import (
    PYTHON,
    ROOT,
    cli_command,
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    run_cli,
    sim_template,
    wait_until,
    write_experiment,
)
from tests.timing import scaled

pytestmark = pytest.mark.timeout(300)

LABELS = ["autoregressive", "linear", "ddtree(budget=7, topk=1)", "ddtree(budget=16, topk=4)"]
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def narrow(home: Path, **extra: str) -> dict[str, str]:
    """The CLI's environment at 80 columns, as a pipe or a CI log sees it."""
    return cli_env(home, COLUMNS="80", **extra)


def run_in_pty(args: list[str], env: dict[str, str], *, columns: int = 80, timeout: float = 240) -> tuple[int, str]:
    """Run the CLI with a pseudo-terminal of ``columns`` columns as stdin, stdout and stderr; (exit code, text
    with the terminal's control sequences removed)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    environment = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    environment["TERM"] = "xterm"
    proc = subprocess.Popen(
        cli_command(*args), env=environment, cwd=ROOT, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + scaled(timeout)
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the other side closed
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=scaled(30))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
    return code, _ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


@dataclass
class Sweeps:
    home: Path
    results: Path
    file: Path
    first: subprocess.CompletedProcess[str]
    pty_code: int
    pty_text: str
    runs: list[Path]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sweeps]:
    base = tmp_path_factory.mktemp("issue16")
    home = base / "home"
    home.mkdir()
    port = free_port()
    doc = local_experiment(
        "narrow",
        port,
        {
            "autoregressive": "--algorithm ar",
            "linear": "--algorithm linear --draft-tokens 7",
            "ddtree": "--algorithm ddtree --budget {budget} --topk {topk}",
        },
        baselines=["autoregressive", "linear"],
        load={"concurrency": [1, 4], "warmup": 1, "requests": 4, "max_tokens": 16},
    )
    doc["variants"]["ddtree"]["matrix"] = {"budget": [7, 16], "topk": [1, 4]}
    file = write_experiment(base / "narrow.yaml", doc)
    results = base / "results"
    with local_leftovers_restored(home, file):
        first = run_cli("sweep", str(file), "--results", str(results), env=narrow(home))
        assert first.returncode == 0, first.stderr
        code, text = run_in_pty(["sweep", str(file), "--results", str(results)], cli_env(home))
        assert code == 0, text
        runs = sorted((results / "narrow").iterdir())
        assert len(runs) == 2
        yield Sweeps(home, results, file, first, code, text, runs)


def _table_lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


# -- output that reads at 80 columns -------------------------------------------------------------------------


def _points_table(text: str) -> str:
    """The last summary table in ``text``: from its title to the best-configuration table."""
    start = text.rindex("narrow (")
    return text[start : text.index("best configuration at each load", start)]


def test_the_summary_keeps_every_configuration_whole_at_80_columns(sweeps: Sweeps) -> None:
    for text in (sweeps.first.stdout, sweeps.pty_text):
        table = _points_table(text)
        lines = _table_lines(table)
        for label in LABELS:
            # Named once (rows are grouped by configuration), on one line, never cut.
            assert sum(line.lstrip().startswith(f"{label} ") for line in lines) == 1, (label, table)
        assert "…" not in table, table
        assert max(len(line) for line in lines) <= 80, table
    # The whole piped output is at most 80 columns wide (a CI log or a file), but for the paths, each error
    # or warning finding with its advice, kept whole (one line each, for grep), and "how it was made" (its
    # server command and arguments whole, to be copied: issue 50).
    whole = ("run directory:", "report:", "error ", "warning ")
    made = sweeps.first.stdout.split("how it was made")[0]
    lines = [line for line in _table_lines(made) if not line.startswith(whole)]
    assert max(len(line) for line in lines) <= 80


def test_the_end_of_a_sweep_answers_which_configuration_is_best_and_how_the_run_was_made(sweeps: Sweeps) -> None:
    out = sweeps.first.stdout
    assert "best configuration at each load" in out and "95% intervals" in out
    best = out[out.index("best configuration at each load") : out.index("how it was made")]
    for load in ("C=1", "C=4"):
        assert re.search(rf"^\s*{load}\s+\S", best, re.M), best
    assert "how it was made: engine sim, version " in out
    assert "workload: concurrency 1, 4; requests per point 4" in out
    assert "server command:" in out and "--algorithm ddtree --budget 16 --topk 4" in out


def test_progress_outside_a_terminal_names_the_configuration_and_the_load(sweeps: Sweeps) -> None:
    err = sweeps.first.stderr
    for label in LABELS:
        for load in ("C=1", "C=4"):
            assert re.search(rf"^\[\d+/12\] {re.escape(label)} {load}: [\d,.]+ tok/s.*\(ETA ", err, re.M), (label, err)
    assert re.search(r"^deploy 3/6 ddtree\(budget=7, topk=1\)$", err, re.M)
    assert "━" not in err  # no progress bars in a pipe


def test_report_and_summary_csv_name_how_the_run_was_made(sweeps: Sweeps) -> None:
    run = sweeps.runs[0]
    markdown = (run / "report.md").read_text()
    assert "## How this run was made" in markdown and "--algorithm linear --draft-tokens 7" in markdown
    assert "requests per point" in markdown and "version" in markdown
    header = (run / "summary.csv").read_text().splitlines()[0].split(",")
    for column in ("tpot_ms_p50", "e2e_ms_p50", "requests_per_s", "engine_version", "command"):
        assert column in header, column


def test_compare_shows_the_figures_that_changed(sweeps: Sweeps) -> None:
    proc = run_cli(
        "compare",
        "narrow/latest~1",
        "narrow/latest",
        "--threshold",
        "0.02",
        "--results",
        str(sweeps.results),
        env=narrow(sweeps.home),
    )
    assert proc.returncode == 0, proc.stderr
    # Notes may come first (provenance that differs: a commit of specsweep between the two sweeps).
    flat = " ".join(proc.stdout.split())
    assert re.search(r"(\d+) of 12 points changed by at least 2% \(or in status\): ", flat), proc.stdout
    assert max(len(line) for line in _table_lines(proc.stdout)) <= 80
    data = json.loads(
        run_cli(
            "compare",
            str(sweeps.runs[0]),
            str(sweeps.runs[1]),
            "--threshold",
            "0.02",
            "--json",
            env=narrow(sweeps.home),
        ).stdout
    )
    changed = [p for p in data["points"] if p["changed"]]
    assert data["changed"] == len(changed) and data["changed_by_figure"]
    for point in changed:
        assert point["changed_figures"] or point["status_a"] != point["status_b"]
        for figure in point["changed_figures"]:  # what it shows moved by at least the threshold
            assert abs(point[f"{figure}_change"]) >= 0.02
            names = {"output_tok_s": "tok/s", "ttft_ms_p50": "TTFT p50 ms", "itl_ms_p50": "ITL p50 ms"}
            if figure in names:
                assert names[figure] in proc.stdout
    # One run compared with the one before it.
    assert run_cli("compare", "latest", "--results", str(sweeps.results), env=narrow(sweeps.home)).returncode == 0


# -- commands and conventions ----------------------------------------------------------------------------------


def test_ls_lists_the_runs(sweeps: Sweeps) -> None:
    proc = run_cli("ls", "--results", str(sweeps.results), env=narrow(sweeps.home))
    assert proc.returncode == 0, proc.stderr
    for run in sweeps.runs:
        line = next(line for line in proc.stdout.splitlines() if run.name in line)
        assert re.search(r"narrow\s+\S+\s+done\s+12\s+0\b", line), line
    # By its experiment file: the runs beside it (its results root is results/ beside the file).
    data = json.loads(run_cli("ls", str(sweeps.file), "--json", env=narrow(sweeps.home)).stdout)
    assert [r["run_id"] for r in data["runs"]] == [p.name for p in sweeps.runs]
    data = json.loads(run_cli("ls", "--results", str(sweeps.results), "--json", env=narrow(sweeps.home)).stdout)
    (run,) = [r for r in data["runs"] if r["run_id"] == sweeps.runs[0].name]
    assert run["state"] == "done" and run["ok"] == 12 and run["failed"] == 0 and run["hosts"] and run["started_at"]


def test_report_latest_opens_the_page_in_the_browser(sweeps: Sweeps, tmp_path: Path) -> None:
    log = tmp_path / "opened"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {log}\n')
    browser.chmod(0o755)
    proc = run_cli(
        "report",
        "latest",
        "--open",
        "-q",
        "--results",
        str(sweeps.results),
        env=narrow(sweeps.home, BROWSER=str(browser)),
    )
    assert proc.returncode == 0, proc.stderr
    page = sweeps.runs[-1] / "report.html"
    assert proc.stdout.strip() == str(page)
    assert log.read_text().split() == [page.resolve().as_uri()]


def test_report_open_on_a_host_without_a_browser_says_where_the_page_is(sweeps: Sweeps, tmp_path: Path) -> None:
    """Issue 29: a headless GPU host is the common case; the report is built, so --open exits 0 with its path."""
    missing = tmp_path / "no-such-browser"
    env = {k: v for k, v in narrow(sweeps.home, BROWSER=str(missing)).items() if k != "DISPLAY"}
    proc = run_cli("report", "latest", "--open", "-q", "--results", str(sweeps.results), env=env)
    assert proc.returncode == 0, proc.stderr
    page = sweeps.runs[-1] / "report.html"
    assert proc.stdout.strip() == str(page) and f"no web browser here to open it: {page}" in proc.stderr


def test_ls_of_what_does_not_exist_says_so(sweeps: Sweeps, tmp_path: Path) -> None:
    """Issue 29: `ls` of a file that does not exist said "no runs" and exit 0."""
    env = narrow(sweeps.home)
    missing = run_cli("ls", str(tmp_path / "nope.yaml"), env=env)
    assert missing.returncode == 2 and "nope.yaml: no such experiment file" in missing.stderr
    typo = run_cli("ls", "narow", "--results", str(sweeps.results), env=env)
    assert typo.returncode == 2 and "did you mean 'narrow'?" in typo.stderr
    assert run_cli("ls", "narrow", "--results", str(sweeps.results), env=env).returncode == 0


def test_every_command_that_prints_results_has_json(sweeps: Sweeps, tmp_path: Path) -> None:
    env = narrow(sweeps.home)
    window = next((sweeps.runs[0] / "windows").iterdir())
    commands = [
        ["validate", str(sweeps.file), "--json"],
        ["plan", str(sweeps.file), "--json", "--results", str(sweeps.results)],
        ["report", str(sweeps.runs[0]), "--json"],
        ["compare", str(sweeps.runs[0]), str(sweeps.runs[1]), "--json"],
        ["ls", "--results", str(sweeps.results), "--json"],
        ["doctor", str(sweeps.file), "--json"],
        ["restore", str(sweeps.file), "--json", "--dry-run"],
        ["init", str(tmp_path / "new.yaml"), "--json"],
        ["parse", "--engine", "sim", str(window), "--json"],
    ]
    for args in commands:
        proc = run_cli(*args, env=env)
        assert proc.returncode == 0, (args, proc.stderr)
        json.loads(proc.stdout)


def test_help_is_typers_everywhere_without_bool_and_documents_completion(tmp_path: Path) -> None:
    env = cli_env(tmp_path, COLUMNS="100")
    root = run_cli("--help", env=env)
    assert "--install-completion" in root.stdout and "--show-completion" in root.stdout
    for command in COMMANDS:
        proc = run_cli(command, "--help", env=env)
        assert proc.returncode == 0, (command, proc.stderr)
        assert "<bool>" not in proc.stdout, (command, proc.stdout)
        assert f"Usage: specsweep {command} [OPTIONS]" in proc.stdout and "─ Options ─" in proc.stdout, command
        assert not re.search(r"\{[a-z_]+\}", proc.stdout.splitlines()[1]), proc.stdout.splitlines()[1]


def test_init_writes_a_valid_file_for_every_engine_and_host(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    files = []
    engines = starter_engines()
    assert set(engines) == {"sglang", "vllm", "llamacpp", "sim"}
    for engine in engines:
        for host in HOST_KINDS:
            path = tmp_path / f"{engine}-{host}.yaml"
            proc = run_cli("init", str(path), "--engine", engine, "--host", host, env=env)
            assert proc.returncode == 0, proc.stderr
            assert path.read_text().startswith("# ") and "specsweep validate" in path.read_text()
            files.append(str(path))
    proc = run_cli("validate", *files, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("ok ") == len(engines) * len(HOST_KINDS)
    # The simulator's needs nothing else: its plan is the demo's shape, and init refuses to overwrite.
    sim_local = str(tmp_path / "sim-local.yaml")
    plan = json.loads(run_cli("plan", sim_local, "--json", env=env).stdout)
    assert plan["totals"]["restarts"] == 6
    # Issue 29: the simulator's starter is a first run (minutes, not 35), and on this machine listens on
    # loopback only; on an SSH host it must be reachable, so there it listens on every address.
    eta = next(v for k, v in plan["totals"].items() if "eta" in k.lower() and isinstance(v, int | float))
    assert eta < 10 * 60, plan["totals"]
    local = Path(tmp_path / "sim-local.yaml").read_text()
    assert "--host 127.0.0.1" in local and "0.0.0.0" not in local
    assert "--host 0.0.0.0" in Path(tmp_path / "sim-ssh.yaml").read_text()
    again = run_cli("init", files[0], "--engine", "sglang", env=env)
    assert again.returncode == 1 and "exists" in again.stderr


def test_validate_reports_every_error_of_a_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    doc = local_experiment("bad", 1, {"autoregressive": "--algorithm ar", "linear": "--algorithm linear"})
    doc["variants"]["ddtree"] = {"spec_args": "--budget {budget}", "matrix": {"budegt": [7]}}
    doc["variants"]["linear"] = {"spec_arg": "x"}
    doc["baselines"] = ["autoregresive"]
    write_experiment(bad, doc)
    proc = run_cli("validate", str(bad), env=cli_env(tmp_path))
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("invalid ")]
    assert len(errors) == 3 and f"{bad}: 3 errors" in proc.stderr, proc.stderr
    for key in ("variants.ddtree.matrix.budegt", "variants.linear.spec_arg", "baselines.0"):
        assert any(re.search(rf"bad\.yaml:\d+:\d+: {re.escape(key)}: ", e) for e in errors), key


def test_results_land_beside_the_experiment_or_where_configured(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    port = free_port()
    doc = local_experiment(
        "where", port, {"ar": "--algorithm ar"}, load={"concurrency": [1], "requests": 1, "warmup": 0, "max_tokens": 4}
    )
    folder = tmp_path / "experiments"
    folder.mkdir()
    file = write_experiment(folder / "where.yaml", doc)
    configured = write_experiment(folder / "configured.yaml", {**doc, "results_dir": "../kept"})

    def sweep(path: Path, *extra: str, **env: str) -> Path:
        proc = subprocess.run(
            [*cli_command("sweep", str(path), "-q", "--no-report", *extra)],
            env=cli_env(home, **env),
            cwd=elsewhere,
            capture_output=True,
            text=True,
            timeout=scaled(120),
        )
        assert proc.returncode == 0, proc.stderr
        return Path(proc.stdout.strip())

    with local_leftovers_restored(home, file, configured):
        assert sweep(file).parent.parent == folder / "results"  # not the shell's directory
        assert sweep(file, SPECSWEEP_RESULTS=str(tmp_path / "env")).parent.parent == tmp_path / "env"
        assert sweep(configured, SPECSWEEP_RESULTS=str(tmp_path / "env")).parent.parent == tmp_path / "kept"
        assert sweep(configured, "--results", str(tmp_path / "flag")).parent.parent == tmp_path / "flag"
    assert not list(elsewhere.iterdir())


def test_the_eta_learns_from_an_earlier_run(sweeps: Sweeps) -> None:
    data = json.loads(
        run_cli("plan", str(sweeps.file), "--json", "--results", str(sweeps.results), env=narrow(sweeps.home)).stdout
    )
    info = json.loads((sweeps.runs[-1] / "run.json").read_text())

    def seconds(text: str) -> float:
        from datetime import datetime

        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

    actual = seconds(info["ended_at"]) - seconds(info["started_at"])
    learned, guess = data["eta_learned"]["eta_seconds"], data["totals"]["eta_seconds"]
    assert data["eta_learned"]["runs"] == 2
    # Learned from the runs, not the file's guess, and of the run's size. Which of the two lands nearer the run's
    # own time is the machine's noise (a busy core moved a 17.6 s run's learned 15.5 s below a guess of 19.4 s).
    assert learned != guess and 0.4 * actual < learned < 2.5 * actual, (learned, guess, actual)
    text = run_cli("plan", str(sweeps.file), "--results", str(sweeps.results), env=narrow(sweeps.home)).stdout
    assert "learned from 2 earlier run(s)" in " ".join(text.split())


# -- an existing server ------------------------------------------------------------------------------------------


@pytest.fixture
def running_server(tmp_path: Path) -> Iterator[tuple[int, Path, subprocess.Popen[bytes]]]:
    """A simulator started by the test (not by specsweep), logging to a file."""
    port = free_port()
    log = tmp_path / "server.log"
    command = sim_template(port, load_seconds=0.2).replace("{python}", PYTHON).replace("{spec_args}", "")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*command.split(), "--algorithm", "linear", "--draft-tokens", "4"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        import httpx

        assert wait_until(lambda: _answers(httpx, port), timeout=30)
        yield port, log, proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=scaled(30))


def _answers(httpx: Any, port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_an_existing_server_is_measured_as_it_runs(tmp_path: Path, running_server: tuple[int, Path, Any]) -> None:
    port, log, proc = running_server
    home = tmp_path / "home"
    home.mkdir()
    doc = {
        "name": "existing",
        "host": "local",
        "service": {"kind": "none", "log_file": str(log)},
        "server": {"url": f"http://127.0.0.1:{port}", "model": "sim"},
        "engine": "sim",
        "load": {"concurrency": [1, 2], "warmup": 1, "requests": 4, "max_tokens": 16},
    }
    file = write_experiment(tmp_path / "existing.yaml", doc)
    results = tmp_path / "results"
    dry = run_cli("sweep", str(file), "--dry-run", env=narrow(home))
    assert "nothing is written or restarted" in dry.stdout and "nothing to restore" in dry.stdout
    proc_sweep = run_cli("sweep", str(file), "--results", str(results), "--json", env=narrow(home))
    assert proc_sweep.returncode == 0, proc_sweep.stderr
    summary = json.loads(proc_sweep.stdout)
    assert summary["state"] == "done" and [r["status"] for r in summary["records"]] == ["ok", "ok"]
    assert all(r["variant"] == "current" and r["accept_len"] > 1 for r in summary["records"])  # from its log
    assert proc.poll() is None  # still the same process: never restarted, never stopped
    plan = json.loads((Path(summary["run_dir"]) / "plan.json").read_text())
    assert len(plan["deployments"]) == 1 and plan["deployments"][0]["command"] is None
    state = home / ".local" / "state" / "specsweep"
    assert not state.exists() or not [p for p in state.iterdir() if not p.name.endswith(".log")]
    # A variant that needs the server reconfigured is refused before anything runs.
    doc["variants"] = {"eagle": {"spec_args": "--speculative-algorithm EAGLE"}}
    bad = write_experiment(tmp_path / "bad.yaml", doc)
    refused = run_cli("validate", str(bad), env=narrow(home))
    assert refused.returncode == 2 and "service kind none never changes" in refused.stderr


def test_an_existing_server_that_is_not_running_fails_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    doc = {
        "name": "gone",
        "host": "local",
        "service": {"kind": "none"},
        "server": {"url": f"http://127.0.0.1:{free_port()}", "model": "sim", "ready_timeout": "10m"},
        "engine": "sim",
        "load": {"concurrency": [1], "requests": 2},
    }
    file = write_experiment(tmp_path / "gone.yaml", doc)
    started = time.monotonic()
    proc = run_cli(
        "sweep", str(file), "--results", str(tmp_path / "results"), "--json", "--no-report", env=narrow(home)
    )
    assert time.monotonic() - started < 60  # not the 10 minute ready timeout
    assert proc.returncode == 3, proc.stderr
    (record,) = json.loads(proc.stdout)["records"]
    assert record["status"] == "failed"
    assert "never starts one" in (Path(json.loads(proc.stdout)["run_dir"]) / "records.jsonl").read_text()


def test_a_dry_run_ends_with_the_restore_of_its_own_service(tmp_path: Path) -> None:
    """Issue 28, item 10: a process service's dry run said it would remove a drop-in and daemon-reload; it
    says what the process service undoes, and a systemd service's says what the drop-in (or unit) mode does."""
    home = tmp_path / "home"
    home.mkdir()
    doc = local_experiment("dry", free_port(), {"autoregressive": "--algorithm ar"})
    process = run_cli("sweep", str(write_experiment(tmp_path / "p.yaml", doc)), "--dry-run", env=narrow(home))
    assert process.returncode == 0, process.stderr
    last = process.stdout.strip().splitlines()[-1]
    assert last.startswith("finally: restore every host") and "process group stopped" in last
    assert "daemon-reload" not in last and "drop-in" not in last
    doc["service"] = {"kind": "systemd", "unit": "sim.service", "exec_start": doc["service"]["command"]}
    systemd = run_cli("sweep", str(write_experiment(tmp_path / "s.yaml", doc)), "--dry-run", env=narrow(home))
    assert systemd.returncode == 0, systemd.stderr
    assert "drop-in removed, daemon-reload" in systemd.stdout.strip().splitlines()[-1]


def test_the_best_table_names_ties_and_the_beaten_piped_and_in_a_terminal_at_80_columns(sweeps: Sweeps) -> None:
    """Issue 29: "tied with" and "over" are never dropped at 80 columns (the ratios to the baselines go first);
    each row names every configuration the analysis ties with its winner and every one it beats."""
    from orchestrator.analysis import analyse
    from tests.integration.test_first_hour_cli import _best_rows, _names

    for text, run in ((sweeps.first.stdout, sweeps.runs[0]), (sweeps.pty_text, sweeps.runs[1])):
        analysis = analyse(run)
        best, everyone = analysis.best, set(analysis.frame["label"])
        section = text[text.rindex("best configuration at each load") :]
        section = section[: section.index("how it was made")]
        assert max(len(line.rstrip()) for line in section.splitlines() if not line.startswith(("error", "warn"))) <= 80
        left_out = next((line for line in section.splitlines() if line.startswith("left out at this width")), "")
        assert "tied with" not in left_out and "over" not in left_out, section
        rows = _best_rows(text[text.rindex("best configuration at each load") :])
        assert [r["best"] for r in rows] == list(best["label"]), section
        for row, (_i, expected) in zip(rows, best.iterrows(), strict=True):
            assert _names(row.get("tied with", "")) == list(expected["tied"]), (row, section)
            others = everyone - {expected["label"], *expected["tied"]}
            assert set(_names(row.get("over", ""))) == others, (row, section)
