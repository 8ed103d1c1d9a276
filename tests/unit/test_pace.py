"""The plan's first guess (orchestrator/plan/pace.py): the simulator's own figures when the command runs it, the
file's guesses otherwise, and never a word printed for a command the simulator would refuse."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deployments import build_plan
from orchestrator.plan.eta import planned_start_seconds
from orchestrator.plan.pace import SIM_START_SECONDS, pace_of, plan_basis, sim_config

SIM = "{python} -m orchestrator.sim --port 18999 --profile k26 --load-seconds 0.2 {spec_args}"


def experiment(tmp_path: Path, command: str, **server: object):
    doc = {
        "name": "t",
        "host": "local",
        "service": {"kind": "process", "command": command},
        "server": {"url": "http://127.0.0.1:18999", "expected_load_time": "480s", **server},
        "engine": "sim",
        "variants": {
            "ar": {"spec_args": "--algorithm ar"},
            "linear": {"spec_args": "--algorithm linear --draft-tokens 7"},
        },
        "baselines": ["ar"],
        "load": {"concurrency": [1, 16], "requests": 16, "max_tokens": 64, "warmup": 0},
    }
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_experiment(path)


def test_a_simulator_deployment_is_timed_by_the_simulators_own_model(tmp_path: Path) -> None:
    exp = experiment(tmp_path, SIM)
    plan = build_plan(exp)
    ar, linear = plan.deployments
    # The start: --load-seconds and the process's own start, not the file's 480 s (kept for the GPU-hours).
    # The lossless probe (8 prompts of 64 tokens at C=1 by default; the AR baseline three passes) comes on top.
    probe = 8 * 64 / 98
    assert ar.start_seconds == pytest.approx(0.2 + SIM_START_SECONDS + 3 * probe, rel=0.15)
    assert linear.start_seconds is not None and linear.start_seconds < ar.start_seconds
    assert ar.expected_load_seconds == 480.0
    assert planned_start_seconds(plan, 480.0) == pytest.approx((ar.start_seconds + linear.start_seconds) / 2)
    # k26's AR serves about 98 tok/s to one user (the profile's calibration), slower per user at C=16.
    c1, c16 = ar.load_points
    assert 16 * 64 / 110 <= c1.estimated_seconds <= 16 * 64 / 85
    assert c16.estimated_seconds > c1.estimated_seconds / 16 * 1.3
    # A chain of 7 commits several tokens a step: faster than AR at C=1 (the demo measures 131 against 97 tok/s).
    assert linear.load_points[0].estimated_seconds < c1.estimated_seconds / 1.2
    assert plan.eta_seconds == pytest.approx(sum(d.wall_seconds() for d in plan.deployments))
    assert plan.eta_seconds < 2 * 60
    assert "the simulator's own figures: its k26 profile's step times, --load-seconds 0.2" in plan_basis(
        exp, [d.command for d in plan.deployments]
    )


def test_another_server_stands_on_the_files_guesses(tmp_path: Path) -> None:
    exp = experiment(tmp_path, "my-server --port 18999 {spec_args}", expected_tokens_per_second=32)
    plan = build_plan(exp)
    dep = plan.deployments[0]
    assert dep.start_seconds == pytest.approx(480 + 3 * 8 * 64 / 32)  # the lossless probe's 3 passes on top
    assert dep.estimated_seconds() == pytest.approx(480 + sum(p.estimated_seconds for p in dep.load_points))
    assert dep.load_points[0].estimated_seconds == pytest.approx(16 * 64 / 32)
    assert plan_basis(exp, [d.command for d in plan.deployments]) == (
        "the file's guesses: server.expected_load_time 480 s per start, expected_tokens_per_second 32 per user"
    )


@pytest.mark.parametrize(
    "command",
    [
        "python -m orchestrator.sim --no-such-flag",
        "python -m orchestrator.sim --algorithm nope",
        "python -m orchestrator.sim --profile nope",
        "python -m orchestrator.sim 'unclosed",
        "python -m orchestrator.simulate --port 1",
    ],
)
def test_a_command_the_simulator_would_refuse_is_not_its_own_quietly(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sim_config(command) is None
    out, err = capsys.readouterr()
    assert out == err == ""


def test_specsweep_sim_is_the_simulator_too(tmp_path: Path) -> None:
    config = sim_config("/opt/venv/bin/specsweep sim --profile tiny --load-seconds 3")
    assert config is not None and config.load_seconds == 3.0 and config.profile.name == "tiny"
    exp = experiment(tmp_path, SIM)
    assert pace_of(exp, "specsweep sim --profile metronome --ttft-ms 100 --itl-ms 10").request_seconds(11) == (
        pytest.approx(0.2)
    )
