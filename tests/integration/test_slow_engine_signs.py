"""Issue 59, item 2 (and issue 58, S8/S14): a slow engine shows signs of life and obeys a stop in every phase.

On the simulator, over real HTTP:

- the lossless probe obeys a stop inside an answer, not at the end of an answer that takes minutes on a real
  engine (tests/integration/test_probe_bounds.py, against a server that streams for ever or sends nothing);
- a sweep says each phase that is not a point (``warm-up: 1 of 1``, ``lossless probe: 3 of 6 answers``), on the
  console's lines too, and what a stop waits for;
- a decide round is said (``decide round 1 of at most 2``) and its work is in the ETA, which does not read 0
  while the round runs.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.cli.progress import SweepProgress
from orchestrator.experiment.schema import load_experiment
from orchestrator.sweep.events import PhaseProgress, SweepEvent
from orchestrator.sweep.runner import SweepOptions, run_sweep
from tests.integration.test_decide_cli import _experiment as decide_experiment
from tests.reliability.harness import free_port, local_experiment, local_leftovers_restored, write_experiment

pytestmark = pytest.mark.timeout(600)

MAX_TOKENS = 400


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def _phases(events: list[SweepEvent], phase: str) -> list[PhaseProgress]:
    return [e for e in events if isinstance(e, PhaseProgress) and e.phase == phase]


def test_a_sweep_says_its_warm_up_and_lossless_probe_on_its_lines_and_what_a_stop_waits_for(
    tmp_path: Path, home: Path
) -> None:
    load = {"concurrency": [1], "warmup": 2, "requests": 2, "max_tokens": 8}
    doc = local_experiment("phases", free_port(), {"ar": "--algorithm ar", "linear": "--algorithm linear"},
                           load=load, itl_ms=2)  # fmt: skip
    doc["lossless"] = {"prompts": 3}
    path = write_experiment(tmp_path / "phases.yaml", doc)
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None, force_terminal=False)
    events: list[SweepEvent] = []
    stopping: list[str] = []
    with SweepProgress(console, lines=True) as shown:

        def observer(event: SweepEvent) -> None:
            events.append(event)
            shown.observe(event)
            if isinstance(event, PhaseProgress) and event.phase == "lossless probe" and event.done == 1:
                stopping.append(shown.stopping_text(30))

        with local_leftovers_restored(home, path):
            run_sweep(load_experiment(path), SweepOptions(results_root=tmp_path / "results"), observer=observer)
    warm = _phases(events, "warm-up")
    assert [(e.done, e.total) for e in warm][:1] == [(0, 2)] and (2, 2) in [(e.done, e.total) for e in warm]
    probe_events = _phases(events, "lossless probe")
    totals = sorted({e.total for e in probe_events if e.total})
    assert len(totals) == 2 and totals[0] == 3, totals  # linear: 3 answers; ar: twice alone, then batched
    assert {e.done for e in probe_events if e.total == 3} == {0, 1, 2, 3}
    assert all(e.eta_seconds is not None for e in probe_events)
    text = out.getvalue()
    assert "ar: warm-up: 0 of 2" not in text and "warm-up: 0 of 2" in text, text
    assert "linear: lossless probe: 0 of 3 answers (ETA " in text, text
    assert stopping and stopping[0].startswith("stopping: cutting the lossless probe's answer in flight"), stopping
    assert "then restoring the host (stopping the server: at most 30 s)" in stopping[0]


def test_a_decide_round_is_said_and_counted_in_the_eta(tmp_path: Path, home: Path) -> None:
    path = decide_experiment(tmp_path, free_port())  # ar and ar_again are the same server: a tie, so a round
    events: list[SweepEvent] = []
    with local_leftovers_restored(home, path):
        run_sweep(load_experiment(path), SweepOptions(results_root=tmp_path / "results"), observer=events.append)
    rounds = _phases(events, "decide round")
    assert rounds, [type(e).__name__ for e in events]
    first = rounds[0]
    assert (first.done, first.total, first.text) == (1, 2, "decide round 1 of at most 2")
    assert first.eta_seconds is not None and first.eta_seconds > 0  # the round's starts and points


def test_the_heartbeat_says_what_runs_when_nothing_was_said() -> None:
    out = io.StringIO()
    shown = SweepProgress(Console(file=out, width=200, color_system=None, force_terminal=False), lines=True)
    shown.observe(PhaseProgress(phase="lossless probe", done=3, total=10, eta_seconds=600.0, deployment_id="d"))
    said = out.getvalue()
    shown.tick(now=0.0)  # nothing: a line was just said
    assert out.getvalue() == said
    later = time.monotonic() + 31
    shown.tick(now=later)
    line = out.getvalue()[len(said) :].strip()
    assert line.startswith("still running: lossless probe: 3 of 10 answers, for "), line
    assert line.endswith("(ETA 10m00s)"), line
    shown.tick(now=later + 1)  # said: the next in 30 s
    assert out.getvalue()[len(said) :].strip() == line
    shown.stopping_text()  # no lock taken: a signal handler may ask while an event is drawn
