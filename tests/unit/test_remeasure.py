"""A point whose window the server restarted in is measured again, once (orchestrator/sweep/runner.py), on fake
launchers: its first record says why, the second is the point's, and a restarted server that reports another
configuration is re-applied first. Also the measure's pieces: ``window_restart``, ``wait_serving``, and no
``/metrics`` figure across a restart the journal shows."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestrator.runs.store import RunStore
from orchestrator.sweep.events import Notice, PointFinished
from orchestrator.sweep.measure import PointMeasurer, server_metrics, window_restart
from orchestrator.sweep.runner import REMEASURED, SweepOptions, run_sweep
from tests.unit.launch_fakes import DECODE, FakeLauncher, FakeSlot, fake_tools, make_experiment

# sglang/srt/entrypoints/engine.py Engine._launch_subprocesses (0.5.23): once per process start.
START = "[2026-05-30 00:40:00] server_args={'model_path': 'm', 'speculative_num_draft_tokens': 8}"


def _info(settings: dict[str, Any]) -> str:
    return json.dumps({"version": "0.5.23", **settings})


def _tools(slot: FakeSlot, *, restart_in: set[int], settings_after: dict[str, Any] | None = None) -> Any:
    """Fake tools whose loads number 1, 2, ...: in the loads of ``restart_in`` the server logs a process start
    between its decode lines (systemd restarted it); its info answers ``settings_after`` once it restarted."""
    base = fake_tools([slot])
    loads = {"n": 0, "restarted": False}

    def load(settings: Any, stop: threading.Event, progress: Any) -> dict[str, Any]:
        if settings.warmup_prompts:  # the warm-up
            return base.load(settings, stop, progress)
        loads["n"] += 1
        if loads["n"] in restart_in:
            for i, value in enumerate((4.0, 4.2)):
                slot.logs.log(DECODE.format(i=i, accept=value))
            slot.logs.log(START)
            loads["restarted"] = True
            for i, value in enumerate((2.0, 2.5, 2.5)):
                slot.logs.log(DECODE.format(i=i + 2, accept=value))
            return {"requests": 8, "errors": 2, "output_tok_s": 50.0, "partial": False, "spec": {}}
        return base.load(settings, stop, progress)

    def get(url: str, path: str, key: str | None) -> tuple[int | None, str | None]:
        if path in ("/server_info", "/get_server_info"):
            after = settings_after if loads["restarted"] and settings_after is not None else {}
            return 200, _info({"speculative_num_draft_tokens": 8, **after})
        return 200, "{}"

    return replace(base, load=load, get=get), loads


def _run(tmp_path: Path, slot: FakeSlot, tools: Any, seen: list[Any]) -> Any:
    exp = make_experiment(tmp_path, warmup=1)
    return run_sweep(
        exp,
        SweepOptions(results_root=tmp_path / "results"),
        observer=seen.append,
        launcher=FakeLauncher(slot),
        measurer=PointMeasurer(exp, tools),
    )


def test_a_point_the_server_restarted_in_is_measured_again_once(tmp_path: Path) -> None:
    slot = FakeSlot("box")
    tools, _ = _tools(slot, restart_in={3})  # the third point: linear at C=1
    seen: list[Any] = []
    result = _run(tmp_path, slot, tools, seen)
    assert result.state == "done" and result.points == {"planned": 8, "ok": 8, "failed": 0}
    assert result.failed == 0
    stored = RunStore.open(result.run_dir).records()
    assert len(stored) == 9
    again = [r for r in stored if r.point_id == stored[2].point_id]
    assert [(r.attempt, r.status) for r in again] == [(1, "failed"), (2, "ok")]
    first, second = again
    assert first.error is not None and first.error["kind"] == REMEASURED == "window_restart"
    assert first.error["message"].startswith("window not whole: restart: the server started again inside the window")
    assert "measured again (attempt 2)" in first.error["message"] and first.error["status_measured"] == "ok"
    assert first.error["evidence"] == [f"sglang: {START}"]
    # The first record holds no figure of the broken window: only the part after the restart, labelled.
    server = first.server or {}
    assert server["integrity"]["part"] == "since_restart" and server["accept_len"] == 2.5
    assert second.server is not None and second.server["integrity"]["whole"]
    assert first.window_file != second.window_file and (second.window_file or "").endswith(".attempt2.log")
    assert slot.launches.count("linear") == 1  # the same configuration: measured again without a restart
    notices = [e.message for e in seen if isinstance(e, Notice)]
    assert any("restarted inside the point's window" in m and "measured again once" in m for m in notices)
    assert sum(isinstance(e, PointFinished) for e in seen) == 8  # one per point
    events = [json.loads(line) for line in (result.run_dir / "events.jsonl").read_text().splitlines()]
    remeasures = [e for e in events if e["kind"] == "remeasure"]
    assert len(remeasures) == 1 and remeasures[0]["attempt"] == 1 and remeasures[0]["point"] == first.point_id


def test_a_second_restart_in_the_same_point_is_not_measured_a_third_time(tmp_path: Path) -> None:
    slot = FakeSlot("box")
    tools, _ = _tools(slot, restart_in={3, 4})
    result = _run(tmp_path, slot, tools, [])
    stored = RunStore.open(result.run_dir).records()
    again = [r for r in stored if r.point_id == stored[2].point_id]
    assert [(r.attempt, r.status) for r in again] == [(1, "failed"), (2, "ok")]
    assert again[1].server is not None and again[1].server["integrity"]["part"] == "since_restart"
    assert len(stored) == 9


def test_a_restarted_server_in_another_configuration_is_re_applied_first(tmp_path: Path) -> None:
    slot = FakeSlot("box")
    tools, _ = _tools(slot, restart_in={3}, settings_after={"speculative_num_draft_tokens": 4})
    seen: list[Any] = []
    result = _run(tmp_path, slot, tools, seen)
    assert slot.launches.count("linear") == 2
    assert any(isinstance(e, Notice) and "reports another configuration" in e.message for e in seen)
    stored = RunStore.open(result.run_dir).records()
    again = [r for r in stored if r.point_id == stored[2].point_id]
    assert [(r.attempt, r.status) for r in again] == [(1, "failed"), (2, "ok")]


def test_window_restart_reads_either_source() -> None:
    assert window_restart(None) is None and window_restart({"integrity": {"whole": True, "reasons": []}}) is None
    journal = {"integrity": {"reasons": [{"reason": "restart", "detail": "line 4"}], "part": "since_restart"}}
    assert window_restart(journal) == "window not whole: restart: line 4 (figures from the since restart part only)"
    prom = {"prometheus": {"integrity": {"reasons": [{"reason": "restart", "detail": "x"}], "part": None}}}
    assert window_restart(prom) == "window not whole: restart: x (no figures)"
    other = {"integrity": {"reasons": [{"reason": "cut_pair", "detail": "y"}], "part": "whole_pairs"}}
    assert window_restart(other) is None


def test_no_metrics_figure_across_a_restart_the_journal_shows(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path)
    # sglang/srt/observability/metrics_collector.py counters, both scrapes of one process as far as they show.
    before = "sglang:generation_tokens_total 100\nsglang:spec_verify_calls_total 40\nsglang:num_requests_total 4\n"
    after = "sglang:generation_tokens_total 900\nsglang:spec_verify_calls_total 300\nsglang:num_requests_total 12\n"
    lines = [DECODE.format(i=0, accept=3.0), START, DECODE.format(i=1, accept=2.0), DECODE.format(i=2, accept=2.5)]
    server = server_metrics(
        exp, "\n".join(lines) + "\n", {}, before=before, after=after, during=[], elapsed_s=10.0, version=None
    )
    prom = server["prometheus"]
    assert "restart" in [r["reason"] for r in prom["integrity"]["reasons"]]
    assert prom["accept_len"] is None and prom["gen_throughput"] is None
    plain = server_metrics(
        exp,
        "\n".join(lines[:1] + lines[2:]) + "\n",
        {},
        before=before,
        after=after,
        during=[],
        elapsed_s=10.0,
        version=None,
    )
    assert plain["prometheus"]["accept_len"] is not None


def test_wait_serving_polls_the_health_paths_until_they_answer(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path)
    answers = iter([(None, None), (503, "loading"), (200, "{}")] + [(200, "{}")] * 10)
    now = {"t": 0.0}

    def clock() -> float:
        now["t"] += 1.0
        return now["t"]

    tools = replace(fake_tools(), get=lambda url, path, key: next(answers), clock=clock)
    stop = threading.Event()
    assert PointMeasurer(exp, tools).wait_serving("http://x", stop, timeout=100.0, poll=0.001)
    never = replace(fake_tools(), get=lambda url, path, key: (503, None), clock=clock)
    assert not PointMeasurer(exp, never).wait_serving("http://x", stop, timeout=5.0, poll=0.001)
    stop.set()
    assert not PointMeasurer(exp, tools).wait_serving("http://x", stop, timeout=100.0)
