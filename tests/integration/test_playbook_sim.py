"""`specsweep playbook` end to end on the simulator (loopback, local process service), driven as a user would:
the real CLI as a subprocess. Both outcomes of the single-chain check, a deployment that never starts, the
host check, a captured baseline reused (and refused once the configuration changed), and Ctrl-C."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deployments import build_plan
from orchestrator.playbooks import apply_vars
from orchestrator.runs.store import RunStore
from orchestrator.sweep.baselines import reuse_baselines
from tests.timing import scaled

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _a_home_of_its_own(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's host lock lives under $HOME (~/.local/state/specsweep/NAME.lock): tests of one experiment name
    in two pytest-xdist workers would refuse each other ("driven by another specsweep run")."""
    monkeypatch.setenv("HOME", str(home))


ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0)
    except httpx.HTTPError:
        return False
    return True


@pytest.fixture
def sim_experiment(tmp_path: Path) -> tuple[Path, int]:
    """The shipped sim-chain experiment on a free port (the file is otherwise unchanged)."""
    port = free_port()
    text = (PLAYBOOKS / "experiments" / "sim-chain.yaml").read_text().replace("18182", str(port))
    path = tmp_path / "sim-chain.yaml"
    path.write_text(text)
    return path, port


def specsweep(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=scaled(110),
    )


@pytest.fixture
def run_playbook(tmp_path: Path, sim_experiment: tuple[Path, int]) -> Iterator[Callable[..., Any]]:
    """Run the CLI on the sim experiment; returns the process and expectations.json's content (from the
    ``--json`` output, or from the run directory the console output names)."""
    experiment, port = sim_experiment

    def run(
        playbook: Path, *extra: str, as_json: bool = True
    ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        proc = specsweep(
            "playbook", playbook, "--experiment", experiment, "--var", "profile=tiny", "--results",
            tmp_path / "results", *(["--json"] if as_json else []), *extra, cwd=tmp_path,
        )  # fmt: skip
        if as_json:
            data = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
        else:
            assert "run directory: " in proc.stdout, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
            run_dir = proc.stdout.split("run directory: ", 1)[1].split()[0]
            data = {"run_dir": run_dir, **json.loads((Path(run_dir) / "expectations.json").read_text())}
        return proc, data

    yield run
    assert not answers(port), "the playbook left the simulator running"


def test_single_chain_check_passes_on_a_healthy_simulator(run_playbook: Callable[..., Any]) -> None:
    proc, data = run_playbook(PLAYBOOKS / "single-chain-check.yaml")
    assert proc.returncode == 0, proc.stderr
    assert data["passed"] is True and data["state"] == "done"
    assert [o["status"] for o in data["outcomes"]] == ["pass", "pass"]
    accept, depth = data["outcomes"]
    assert accept["title"] == "tree.accept_len equal linear.accept_len (±10%)"
    assert accept["values"]["tree.accept_len"] == pytest.approx(accept["values"]["linear.accept_len"], rel=0.10)
    assert depth["values"]["tree.ddtree_avg_accepted_depth"] < depth["values"]["tree.ddtree_avg_commit_len"]
    run_dir = Path(data["run_dir"])
    stored = json.loads((run_dir / "expectations.json").read_text())
    assert stored["outcomes"] == data["outcomes"]
    store = RunStore.open(run_dir)
    assert store.info.state == "done"
    assert [r.variant for r in store.records()] == ["linear", "ddtree"]
    assert "restore" in [e["kind"] for e in store.events()]


def test_single_chain_check_fails_on_the_commit_bug_naming_the_contradiction(run_playbook: Callable[..., Any]) -> None:
    proc, data = run_playbook(
        PLAYBOOKS / "single-chain-check.yaml", "--var", "faults=--fault commit-bug", as_json=False
    )
    assert proc.returncode == 1
    # The console: each step as it runs, then every verdict with the numbers, why it must hold, the evidence.
    assert "[1/9] deploy linear" in proc.stderr and "[7/9] restore the host" in proc.stderr
    assert "FAIL" in proc.stdout and "why it must hold: a top-k=1 tree is a chain" in proc.stdout
    assert "DDTREE metrics:" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("specsweep: error: 2 of 2 checks failed")
    assert data["passed"] is False
    accept, depth = data["outcomes"]
    assert accept["status"] == "fail" and "below; allowed ±10%" in accept["detail"]
    assert accept["values"]["tree.accept_len"] < 0.9 * accept["values"]["linear.accept_len"]
    assert depth["status"] == "fail"
    assert "exceeds commit length" in depth["detail"] and "impossible in a well-formed chain" in depth["detail"]
    assert any("DDTREE metrics:" in line for line in depth["evidence"])


def test_a_deployment_that_never_starts_fails_its_expectations_with_the_evidence(
    run_playbook: Callable[..., Any],
) -> None:
    proc, data = run_playbook(PLAYBOOKS / "single-chain-check.yaml", "--var", "faults=--fault fail-start")
    assert proc.returncode == 1
    accept = data["outcomes"][0]
    assert accept["status"] == "fail"
    assert accept["detail"].startswith(
        "cannot compare: measurement 'tree' (ddtree(budget=7, topk=1) @ C=1) failed (start_"
    )
    assert any("Traceback" in line or "Error" in line for line in accept["evidence"])
    assert data["measurements"]["tree"]["status"] == "failed"


def test_a_bad_playbook_exits_2_with_one_line(tmp_path: Path, sim_experiment: tuple[Path, int]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsteps:\n  - deploy: {variant: lineer}\n")
    proc = specsweep("playbook", bad, "-e", sim_experiment[0], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"specsweep: error: {bad}:3:14: steps.0.deploy.variant: experiment 'sim-chain' has no variant 'lineer'; "
        "did you mean 'linear'?"
    )
    proc = specsweep("playbook", PLAYBOOKS / "single-chain-check.yaml", "--var", "profil=tiny", cwd=tmp_path)
    assert proc.returncode == 2 and "did you mean 'profile'?" in proc.stderr


def test_dry_run_touches_nothing(tmp_path: Path, sim_experiment: tuple[Path, int]) -> None:
    proc = specsweep(
        "playbook", PLAYBOOKS / "single-chain-check.yaml", "-e", sim_experiment[0], "--dry-run",
        "--results", tmp_path / "results", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "deploy ddtree(budget=7, topk=1)" in proc.stdout and "2 restart(s), 2 load point(s)" in proc.stdout
    assert not (tmp_path / "results").exists()


def test_host_check_fails_the_smoke_test_when_nothing_serves(run_playbook: Callable[..., Any]) -> None:
    proc, data = run_playbook(PLAYBOOKS / "host-check.yaml")
    assert proc.returncode == 1
    by_title = {o["title"]: o for o in data["outcomes"]}
    assert by_title["doctor: local"]["status"] == "pass"
    smoke = by_title["smoke: 1 request to the server as it runs now"]
    assert smoke["status"] == "fail"
    assert "0/1 answered; the service is inactive" in smoke["detail"]
    assert [o["title"] for o in data["outcomes"] if o["status"] == "fail"] == [smoke["title"]]


def test_host_check_smokes_a_running_server_and_says_its_port_is_taken(
    tmp_path: Path, sim_experiment: tuple[Path, int]
) -> None:
    """A server the experiment's process service did not start holds its port: the one request to it answers,
    and the doctor fails the port (a sweep's own server could not listen there), naming the process."""
    experiment, port = sim_experiment
    server = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.sim", "--profile", "tiny", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + scaled(30)
        while not answers(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        proc = specsweep(
            "playbook", PLAYBOOKS / "host-check.yaml", "-e", experiment, "--json", "--results", tmp_path / "r",
            cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stdout + proc.stderr
        data = json.loads(proc.stdout)
        smoke = data["outcomes"][-1]
        assert smoke["status"] == "pass" and "1/1 answered" in smoke["detail"]
        assert "1 of 9 checks failed (doctor: port)" in proc.stderr
        assert f"port {port} is in use by" in proc.stdout and f"pid {server.pid}" in proc.stdout
        assert server.poll() is None  # the smoke test changed nothing
    finally:
        server.kill()
        server.wait(timeout=scaled(10))


def test_captured_baselines_are_reused_when_identical_and_refused_when_changed(
    run_playbook: Callable[..., Any], sim_experiment: tuple[Path, int]
) -> None:
    proc, data = run_playbook(PLAYBOOKS / "baseline-capture.yaml")
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(data["run_dir"])
    experiment = apply_vars(load_experiment(sim_experiment[0]), {"profile": "tiny"})
    plan = build_plan(experiment)
    reuse = reuse_baselines(experiment, plan, run_dir)
    assert reuse.reasons == []
    assert reuse.plan.restarts == plan.restarts - 2
    assert {(r.variant, r.concurrency) for r in reuse.records} == {
        (v, c) for v in ("autoregressive", "linear") for c in (1, 4)
    }
    changed = apply_vars(experiment, {"profile": "k26"})
    refused = reuse_baselines(changed, build_plan(changed), run_dir)
    assert refused.records == [] and refused.plan.restarts == plan.restarts
    assert all("'--profile tiny' became '--profile k26'" in reason for reason in refused.reasons)


def test_ctrl_c_restores_the_host_and_marks_the_run_interrupted(
    tmp_path: Path, sim_experiment: tuple[Path, int]
) -> None:
    experiment, port = sim_experiment
    playbook = tmp_path / "long.yaml"
    playbook.write_text(
        "name: long\nsteps:\n  - deploy: {variant: linear}\n"
        "  - load: {concurrency: 1, requests: 5000}\n  - measure: m\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "playbook", str(playbook), "-e", str(experiment),
         "--var", "profile=tiny", "--results", str(tmp_path / "results")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "[2/3] load" in line:
                break
        deadline = time.monotonic() + scaled(30)
        while not answers(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=scaled(60))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=scaled(10))
    assert proc.returncode == 130, "".join(seen) + err
    assert "interrupted; host restored" in err
    assert not answers(port)
    (run_dir,) = (tmp_path / "results" / "long").iterdir()
    assert RunStore.open(run_dir).info.state == "interrupted"
    assert json.loads((run_dir / "expectations.json").read_text())["state"] == "interrupted"


def test_shell_steps_keep_their_output_and_fail_on_a_non_zero_exit(
    tmp_path: Path, sim_experiment: tuple[Path, int]
) -> None:
    from orchestrator.playbooks import PlaybookOptions, prepare
    from orchestrator.playbooks import run_playbook as run_library

    playbook = tmp_path / "shell.yaml"
    playbook.write_text(
        "name: shell\nallow_shell: true\nsteps:\n"
        "  - shell: {command: 'echo hello; echo oops >&2; exit 3'}\n"
        "  - shell: {command: 'exit 4', check: false}\n"
    )
    program = prepare(playbook, experiment_file=sim_experiment[0])
    result = run_library(program, PlaybookOptions(results_root=tmp_path / "results"))
    first, second = result.outcomes
    assert (first.status, first.detail) == ("fail", "exit 3; output in shell/step-00.log")
    assert first.evidence == ("hello", "oops")
    assert (second.status, second.detail) == ("pass", "exit 4; output in shell/step-01.log")
    kept = (result.run_dir / "shell" / "step-00.log").read_text()
    assert kept.startswith("$ echo hello; echo oops >&2; exit 3\n# exit 3\n--- stdout\nhello\n--- stderr\noops\n")
    assert not result.passed and result.state == "done"


def test_an_unreachable_host_is_an_error_naming_the_run_directory(tmp_path: Path) -> None:
    from orchestrator.errors import HostError
    from orchestrator.playbooks import PlaybookOptions, prepare
    from orchestrator.playbooks import run_playbook as run_library

    port = free_port()  # nothing listens there: the SSH connection is refused on loopback
    experiment = tmp_path / "ssh.yaml"
    experiment.write_text(
        f'name: unreachable\nhost: {{ssh: "root@127.0.0.1:{port}", connect_timeout: 2s}}\n'
        "service: {kind: systemd, unit: sim.service, exec_start: '/bin/sim {args}'}\n"
        f'server: {{url: "http://127.0.0.1:{port}"}}\nengine: sim\n'
        "variants: {linear: {args: ''}}\nload: {concurrency: [1]}\n"
    )
    playbook = tmp_path / "pb.yaml"
    playbook.write_text("name: pb\nsteps:\n  - deploy: {variant: linear}\n  - load: {concurrency: 1}\n")
    with pytest.raises(HostError) as info:
        run_library(prepare(playbook, experiment_file=experiment), PlaybookOptions(results_root=tmp_path / "r"))
    (run_dir,) = (tmp_path / "r" / "pb").iterdir()
    assert f"127.0.0.1:{port}" in str(info.value)
    assert str(info.value).endswith(f"(run directory: {run_dir}; host restored)")
    stored = json.loads((run_dir / "expectations.json").read_text())
    assert stored["state"] == "failed" and stored["passed"] is False
    assert RunStore.open(run_dir).info.state == "failed"
