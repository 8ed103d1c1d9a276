"""Measuring one point (orchestrator/sweep/measure.py): the pure classification, the server figures, and the
window -> load -> window -> parse -> record sequence driven with fakes."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from orchestrator.plan.deployments import build_plan
from orchestrator.sweep.measure import (
    Classification,
    PointMeasurer,
    Tools,
    classify_point,
    point_settings,
    server_metrics,
)
from tests.unit.launch_fakes import DECODE, FakeSlot, fake_tools, make_experiment


@pytest.mark.parametrize(
    ("client", "alive", "stopped", "status", "kind"),
    [
        ({"requests": 8, "errors": 0}, True, False, "ok", None),
        ({"requests": 8, "errors": 3}, True, False, "ok", None),  # some failed requests are counted, not a failure
        ({"requests": 8, "errors": 8}, True, False, "failed", "all_requests_failed"),
        ({"requests": 0, "errors": 0}, True, False, "ok", None),  # a duration point that sent nothing
        ({"requests": 8, "errors": 0}, False, False, "failed", "server_died"),
        ({"requests": 8, "errors": 8}, False, False, "failed", "server_died"),  # the death explains the errors
        ({"requests": 3, "errors": 0, "partial": True}, True, True, "skipped", "interrupted"),
        ({"requests": 3, "errors": 0, "partial": True}, False, True, "skipped", "interrupted"),
        ({"requests": 8, "errors": 0, "partial": False}, True, True, "ok", None),  # stopped after it finished
        ({"requests": 8, "errors": 0, "partial": True}, True, False, "ok", None),  # partial without a stop
    ],
)
def test_classify_point(client: dict[str, Any], alive: bool, stopped: bool, status: str, kind: str | None) -> None:
    verdict = classify_point(client, alive=alive, stopped=stopped)
    assert (verdict.status, verdict.kind) == (status, kind)
    assert verdict.server_died == (kind == "server_died")


def test_classification_errors_carry_their_evidence() -> None:
    assert Classification("ok").error() is None
    died = classify_point({"requests": 1}, alive=False, stopped=False)
    assert died.error(["line 1", "line 2"]) == {
        "kind": "server_died",
        "message": "the server stopped during the point",
        "evidence": ["line 1", "line 2"],
    }
    failed = classify_point({"requests": 4, "errors": 4, "errors_by_kind": {"http_500": 4}}, alive=True, stopped=False)
    assert failed.error() == {
        "kind": "all_requests_failed",
        "message": "all 4 requests failed",
        "evidence": ["http_500: 4"],
    }
    assert classify_point({"requests": 4, "errors": 4}, alive=True, stopped=False).error()["evidence"] == []  # type: ignore[index]
    skipped = classify_point({"partial": True}, alive=True, stopped=True).error()
    assert skipped == {"kind": "interrupted", "message": "stopped by the user mid-point"}


def test_server_metrics_parse_the_window_and_compare_sources(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path)
    text = "".join(DECODE.format(i=i, accept=a) + "\n" for i, a in enumerate((9.0, 2.0, 4.0)))
    server = server_metrics(
        exp, text, {"output_tok_s": 50.0}, before=None, after=None, during=[], elapsed_s=1.0, version=None
    )
    assert server["accept_len"] == pytest.approx(3.0)  # the cut window's first line is an edge: left out
    assert "prometheus" not in server
    assert "sources" in server


def test_point_settings_follow_the_point_and_the_experiment(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path, extra="")
    point = build_plan(exp).deployments[0].load_points[1]
    settings = point_settings(exp, "http://x:1", point)
    assert (settings.url, settings.concurrency, settings.requests, settings.max_tokens) == ("http://x:1", 4, 8, 32)
    warm = point_settings(exp, "http://x:1", None, concurrency=1, requests=3)
    assert (warm.concurrency, warm.requests, warm.warmup) == (1, 3, 0)


def _measure(tmp_path: Path, *, tools: Tools | None = None, dies: bool = False, stop: bool = False) -> Any:
    exp = make_experiment(tmp_path)
    deployment = build_plan(exp).deployments[0]
    slot = FakeSlot("box", url="http://box:9000")
    server = slot.launch(deployment, progress=None, stop=threading.Event())
    server.dies = dies  # type: ignore[attr-defined]
    windows: list[str] = []

    def write_window(text: str) -> str:
        windows.append(text)
        return f"windows/{len(windows)}.log"

    stop_event = threading.Event()
    if stop:
        stop_event.set()
    measured = PointMeasurer(exp, tools or fake_tools([slot])).measure(
        server,
        deployment,
        deployment.load_points[0],
        run_id="run-1",
        host="box",
        attempt=2,
        stop=stop_event,
        write_window=write_window,
        engine_info={"version": "0.5.23"},
        progress=lambda report: None,
    )
    return measured, windows, deployment


def test_a_point_is_measured_in_its_own_window(tmp_path: Path) -> None:
    measured, windows, deployment = _measure(tmp_path)
    record = measured.record
    assert (record.status, record.error, measured.server_died) == ("ok", None, False)
    assert (record.run_id, record.host, record.attempt, record.window_file) == ("run-1", "box", 2, "windows/1.log")
    assert (record.deployment_id, record.config_hash, record.variant) == (
        deployment.id,
        deployment.config_hash,
        deployment.variant,
    )
    assert record.engine_info == {"version": "0.5.23"}
    # The window holds what the server logged during the load, not what it logged when it started.
    assert len(windows) == 1 and "starting" not in windows[0] and windows[0].count("Decode batch") == 3
    assert record.server is not None and record.server["accept_len"] == pytest.approx(3.0)
    assert record.client is not None and record.client["output_tok_s"] == 100.0


def test_a_server_that_died_during_the_point_fails_it_with_its_log(tmp_path: Path) -> None:
    measured, _windows, _ = _measure(tmp_path, dies=True)
    assert measured.server_died and measured.record.status == "failed"
    error = measured.record.error
    assert error["kind"] == "server_died" and any("Decode batch" in line for line in error["evidence"])


def test_a_stopped_point_is_skipped(tmp_path: Path) -> None:
    measured, windows, _ = _measure(tmp_path, stop=True)
    assert measured.record.status == "skipped" and not measured.server_died
    assert len(windows) == 1  # the window is kept even so


def test_metrics_are_scraped_around_the_load_and_sampled_through_it(tmp_path: Path) -> None:
    calls: list[str] = []
    texts = iter(["sglang:generation_tokens_total 100\n", "sglang:generation_tokens_total 400\n"])

    def scrape(url: str, path: str | None, key: str | None) -> str | None:
        calls.append(f"scrape {path}")
        return next(texts)

    class Sampler:
        def __init__(self, *args: Any) -> None:
            calls.append("sample")

        def finish(self) -> list[str]:
            calls.append("finish")
            return []

    base = fake_tools(on_load=lambda settings: calls.append("load"))
    tools = Tools(load=base.load, scrape=scrape, get=base.get, sampler=Sampler)
    measured, _windows, _ = _measure(tmp_path, tools=tools)
    assert calls == ["scrape /metrics", "sample", "load", "finish", "scrape /metrics"]
    assert "prometheus" in measured.record.server


def test_warm_up_and_engine_info_go_through_the_tools(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path, warmup=3)
    seen: list[Any] = []
    base = fake_tools(on_load=seen.append)
    measurer = PointMeasurer(exp, base)
    client = measurer.warm_up("http://box:9000", threading.Event())
    assert client is not None and seen[0].requests == 3 and seen[0].concurrency == 1
    stopped = threading.Event()
    stopped.set()
    assert measurer.warm_up("http://box:9000", stopped) is None
    assert PointMeasurer(make_experiment(tmp_path), base).warm_up("http://box:9000", threading.Event()) is None
    assert isinstance(measurer.engine_info("http://box:9000"), dict)
