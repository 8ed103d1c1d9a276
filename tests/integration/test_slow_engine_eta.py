"""Issue 59, item 2: a slow engine's ETA is its own from the warm-up on, and its first point is not behind the probe.

The simulator runs behind a shell (``sh -c 'exec "$0" -m orchestrator.sim "$@"'``), as a real engine's command
would: the plan cannot read its speed and takes the file's guess (``expected_tokens_per_second: 5000``), while
the engine serves about 50 tok/s a user (``--itl-ms 20``), a hundred times slower. Over real HTTP:

- after the warm-up's answers the ETA has the engine's speed (before, it kept the plan's guess until the first
  point ended: on SGLang, 19 minutes);
- each deployment measures its points before its lossless probe, and the probe's answers are still kept for both
  configurations, so the verdict stands on the same requests.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orchestrator.analysis.lossless import LOSSLESS_DIR
from orchestrator.experiment.schema import load_experiment
from orchestrator.sweep.events import PhaseProgress, PointFinished, PointStarted, SweepEvent
from orchestrator.sweep.runner import SweepOptions, run_sweep
from tests.reliability.harness import free_port, local_experiment, local_leftovers_restored, write_experiment

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def _experiment(tmp_path: Path) -> Path:
    port = free_port()
    load = {"concurrency": [1, 2], "warmup": 2, "requests": 6, "max_tokens": 32, "temperature": 0}
    doc = local_experiment("slow", port, {"ar": "--algorithm ar", "linear": "--algorithm linear --draft-tokens 3"},
                           load=load)  # fmt: skip
    doc["service"]["command"] = (
        """sh -c 'exec "$0" -m orchestrator.sim "$@"' {python} """
        f"--host 127.0.0.1 --port {port} --profile tiny --load-seconds 0.3 --decode-log-interval 1 --itl-ms 20 "
        "{spec_args}"
    )
    doc["server"]["expected_tokens_per_second"] = 5000
    doc["lossless"] = {"prompts": 2}
    return write_experiment(tmp_path / "slow.yaml", doc)


def test_a_slow_engines_eta_after_its_warm_up_is_its_own_and_its_points_come_before_the_probe(
    tmp_path: Path, home: Path
) -> None:
    path = _experiment(tmp_path)
    events: list[tuple[float, SweepEvent]] = []
    results = tmp_path / "results"
    with local_leftovers_restored(home, path):
        run_sweep(
            load_experiment(path),
            SweepOptions(results_root=results),
            observer=lambda event: events.append((time.monotonic(), event)),
        )
    ended = events[-1][0]
    warm = [(t, e) for t, e in events if isinstance(e, PhaseProgress) and e.phase == "warm-up"]
    before = next(e for _, e in warm if e.done == 0)  # the first deployment healthy, no request timed yet
    at, after = next((t, e) for t, e in warm if e.done == e.total)
    assert before.eta_seconds is not None and after.eta_seconds is not None
    # The plan expects each request 100 times sooner than it comes: the points alone now weigh 100 times more.
    assert after.eta_seconds >= 3 * before.eta_seconds, (before.eta_seconds, after.eta_seconds)
    left = ended - at
    assert after.eta_seconds >= left / 2.5, (after.eta_seconds, left)
    # Each deployment: its points, then its probe, on the same server.
    order = [
        (e.deployment_id, "point" if isinstance(e, PointStarted | PointFinished) else "probe")
        for _, e in events
        if isinstance(e, PointStarted | PointFinished) or (isinstance(e, PhaseProgress) and e.phase == "lossless probe")
    ]
    deployments = list(dict.fromkeys(d for d, _ in order))
    assert len(deployments) == 2, order
    for deployment in deployments:
        kinds = [k for d, k in order if d == deployment]
        assert kinds.index("probe") > len(kinds) - 1 - kinds[::-1].index("point"), (deployment, kinds)
    run_dir = next(p for p in (results / "slow").iterdir() if p.is_dir())
    kept = sorted(p.stem for p in (run_dir / LOSSLESS_DIR).rglob("*.jsonl"))
    assert kept == sorted(deployments), kept
