"""The sweep's piped progress lines (orchestrator/cli/progress.py): the ``[n/N]`` counter counts points as the
answer does, and a line whose measurement adds no point says why its counter stands still (issue 59, item 7)."""

from __future__ import annotations

import io

from rich.console import Console

from orchestrator.cli.progress import SweepProgress
from orchestrator.sweep.events import DeploymentStarted, PointFinished, SweepStarted


def _lines(events: list[object]) -> list[str]:
    console = Console(file=io.StringIO(), width=200, color_system=None, force_terminal=False)
    progress = SweepProgress(console, lines=True)
    with progress:
        for event in events:
            progress.observe(event)  # type: ignore[arg-type]
    out = console.file
    assert isinstance(out, io.StringIO)
    return [line for line in out.getvalue().splitlines() if line.startswith("[")]


def _finished(label: str, complete: int, deployment: str = "d-ar") -> PointFinished:
    summary = {"output_tok_s": 100.0, "requests": 4, "errors": 0}
    return PointFinished(deployment_id=deployment, label=label, status="ok", summary=summary, points_complete=complete)


def test_a_repeat_and_a_point_measured_again_say_why_the_counter_did_not_move() -> None:
    lines = _lines(
        [
            SweepStarted(run_dir="", total_points=2, pending_points=2, deployments=1),
            DeploymentStarted(deployment_id="d-ar", label="autoregressive", index=1, total=1),
            _finished("C=1", 0),  # the first of its two repeats: no point complete yet
            _finished("C=4", 0),
            _finished("C=1 #2", 1),
            _finished("C=4 #2", 2),
            DeploymentStarted(deployment_id="d-ar2", label="autoregressive [restart 2]", index=2, total=2),
            _finished("C=4", 2, "d-ar2"),  # a later round measures a counted point again
        ]
    )
    assert [line.split("] ", 1)[0] + "]" for line in lines] == ["[0/2]", "[0/2]", "[1/2]", "[2/2]", "[2/2]"], lines
    waiting = "; the point counts once all its measurements are done)"
    assert lines[0].endswith(waiting) and lines[1].endswith(waiting), lines
    assert all(line.endswith("(ETA 0s)") for line in lines[2:4]), lines
    assert lines[4].endswith("; a point counted already, measured again)"), lines
