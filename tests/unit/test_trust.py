"""Answers you can trust (issue 17), the pure parts: repeats and restarts in the plan, the bootstrap over requests,
the combination of windows, significance, adaptive stopping, the lossless check, the cache flush, GPU facts
and telemetry, provenance, and the simulator's token stream."""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from orchestrator.analysis.compare import best_per_load, pareto_front, significance
from orchestrator.analysis.intervals import aggregate_windows, difference
from orchestrator.analysis.lossless import check_lossless, first_difference
from orchestrator.engines.cache import flush_prefix_cache
from orchestrator.engines.responses import SpecFigures
from orchestrator.engines.sglang.responses import SGLANG_SGLEXT
from orchestrator.experiment.schema import load_experiment
from orchestrator.hosts.local import LocalHost
from orchestrator.hosts.telemetry import (
    GpuTelemetry,
    LineStream,
    gpu_facts,
    parse_facts,
    parse_samples,
    summarize_samples,
)
from orchestrator.load.adaptive import AdaptiveStop
from orchestrator.load.loops import LoopState
from orchestrator.load.records import RequestRecord, request_row
from orchestrator.load.stats import summarize
from orchestrator.load.uncertainty import window_intervals
from orchestrator.plan.deployments import build_plan, content_id
from orchestrator.runs.provenance import experiment_hash, provenance_differences, running_command
from orchestrator.sweep.lossless import Answer, read_stream
from orchestrator.sweep.schedule import Schedule

FAKE_SMI = Path(__file__).resolve().parents[1] / "data" / "fake-nvidia-smi"

EXPERIMENT = """
name: trust
host: local
service: {{kind: process, command: "{{python}} -m orchestrator.sim --port 18999 {{spec_args}}"}}
server: {{url: "http://127.0.0.1:18999", model: sim}}
engine: sim
variants:
  autoregressive: {{spec_args: "--algorithm ar"}}
  linear: {{spec_args: "--algorithm linear"}}
  tree: {{spec_args: "--algorithm ddtree --budget {{budget}}", matrix: {{budget: [4, 8]}}}}
baselines: [autoregressive, linear]
load: {{concurrency: [1, 4], requests: 8, max_tokens: 32{extra}}}
"""


def experiment(tmp_path: Path, extra: str = "") -> Any:
    path = tmp_path / "trust.yaml"
    path.write_text(EXPERIMENT.format(extra=extra))
    return load_experiment(path)


# -- the plan -----------------------------------------------------------------------------------------------


def test_without_repeats_ids_are_what_they_were(tmp_path: Path) -> None:
    plan = build_plan(experiment(tmp_path))
    first = plan.deployments[0]
    content = {"mode": "concurrency", "concurrency": 1, "requests": 8, "duration": None}
    assert first.load_points[0].id == content_id("p", [first.config_hash, content])
    assert [p.label for p in first.load_points] == ["C=1", "C=4"]
    assert plan.restarts == 4 and plan.load_point_count == 8


def test_repeats_interleave_loads_and_give_each_window_its_prompts(tmp_path: Path) -> None:
    one = build_plan(experiment(tmp_path))
    plan = build_plan(experiment(tmp_path, ", repeats: 3"))
    points = plan.deployments[0].load_points
    assert [p.label for p in points] == ["C=1", "C=4", "C=1 #2", "C=4 #2", "C=1 #3", "C=4 #3"]
    assert [p.seed for p in points] == [None, None, 1, 1, 2, 2]
    assert points[0].id == one.deployments[0].load_points[0].id  # repeat 1 keeps the old id
    assert len({p.id for d in plan.deployments for p in d.load_points}) == 24


def test_restarts_deploy_every_configuration_before_any_again(tmp_path: Path) -> None:
    plan = build_plan(experiment(tmp_path, ", repeats: 2, repeats_across_restarts: 2"))
    labels = [d.label for d in plan.deployments]
    assert labels == [
        "autoregressive",
        "linear",
        "tree(budget=4)",
        "tree(budget=8)",
        "autoregressive [restart 2]",
        "linear [restart 2]",
        "tree(budget=4) [restart 2]",
        "tree(budget=8) [restart 2]",
    ]
    assert plan.deployments[0].config_hash == plan.deployments[4].config_hash
    assert plan.deployments[0].id != plan.deployments[4].id
    seeds = [p.seed for p in plan.deployments[4].load_points]
    assert seeds == [2, 2, 3, 3]  # restart 2's windows come after restart 1's two repeats
    schedule = Schedule(plan, ["local"], set())
    order = [d.label for d in schedule.deployments_for("local", going=lambda: True, skipped=lambda: None)]
    assert order == labels


def test_until_enters_the_point_ids_and_estimates(tmp_path: Path) -> None:
    plan = build_plan(experiment(tmp_path, ", until: {rel_ci: 0.05, max_requests: 200, min_requests: 10}"))
    point = plan.deployments[0].load_points[0]
    assert point.until == {"rel_ci": 0.05, "figure": "output_tok_s", "min_requests": 10}
    assert point.requests == 200
    assert point.id != build_plan(experiment(tmp_path)).deployments[0].load_points[0].id


def test_until_needs_a_cap(tmp_path: Path) -> None:
    from orchestrator.errors import ConfigError

    with pytest.raises(ConfigError, match="cap"):
        experiment(tmp_path, ", until: {rel_ci: 0.05}")


# -- the bootstrap over requests ----------------------------------------------------------------------------


def fake_requests(n: int, rng: random.Random, *, concurrency: int = 1, accept: bool = True) -> list[RequestRecord]:
    """Requests of a closed loop: 64 tokens in chunks of a random size, at a random per-request speed."""
    out = []
    clock = 0.0
    for i in range(n):
        record = RequestRecord(index=i)
        record.dispatched = record.sent = clock
        step = rng.uniform(0.008, 0.012)
        t = clock + 0.05
        record.first_token = t
        times, counts, done, steps = [t], [1], 1, 0
        while done < 64:
            k = min(64 - done, rng.choice([1, 2, 3, 4]))
            t += step
            times.append(t)
            counts.append(k)
            done += k
            steps += 1
        record.chunk_times, record.chunk_tokens = times, counts
        record.end = t
        record.output_tokens = 64
        record.finish_reason = "length"
        if accept:
            record.spec = SpecFigures(source=SGLANG_SGLEXT, verify_steps=steps)
        out.append(record)
        clock = t if concurrency == 1 else clock + (t - clock) / concurrency
    return out


def test_window_intervals_hold_the_figures_the_window_reports() -> None:
    records = fake_requests(40, random.Random(1))
    figures = summarize(records, open_loop=False, concurrency=1, started=0.0, ended=None)
    intervals = window_intervals(records, output_tok_s=figures["output_tok_s"], open_loop=False, concurrency=1)
    assert set(intervals) >= {"output_tok_s", "accept_len", "ttft_ms_p50", "itl_ms_p50", "itl_ms_p99", "tpot_ms_p50"}
    for name, interval in intervals.items():
        assert interval.lo <= interval.value <= interval.hi or name.endswith("p99"), name
    assert intervals["output_tok_s"].value == figures["output_tok_s"]
    assert intervals["ttft_ms_p50"].value == pytest.approx(figures["ttft_ms"]["p50"], abs=1e-3)
    assert intervals["itl_ms_p50"].value == pytest.approx(figures["itl_ms"]["p50"], abs=1e-3)
    assert intervals["accept_len"].value == pytest.approx(figures["spec"]["accept_len"])
    assert window_intervals(records[:1], output_tok_s=1.0, open_loop=False, concurrency=1) == {}


def test_the_accept_length_interval_covers_its_truth_about_95_percent_of_the_time() -> None:
    """Accept length per response: verify steps of a chain with per-position acceptance 0.7 and 4 drafts."""
    alpha, drafts, covered, trials = 0.7, 4, 0, 300
    truth = (1 - alpha ** (drafts + 1)) / (1 - alpha)
    rng = np.random.default_rng(7)
    for trial in range(trials):
        records = []
        for i in range(32):
            committed = 0
            steps = 0
            while committed < 200:
                accepted = 0
                while accepted < drafts and rng.random() < alpha:
                    accepted += 1
                committed += accepted + 1
                steps += 1
            record = RequestRecord(index=i, output_tokens=committed + 1, end=1.0, first_token=0.5)
            record.spec = SpecFigures(source=SGLANG_SGLEXT, verify_steps=steps)
            records.append(record)
        interval = window_intervals(
            records, output_tok_s=None, open_loop=False, concurrency=1, figures=["accept_len"], seed=trial
        )["accept_len"]
        covered += interval.lo <= truth <= interval.hi
    assert 0.91 <= covered / trials <= 0.98


def test_request_rows_summarise_each_request() -> None:
    record = fake_requests(1, random.Random(2))[0]
    row = request_row(record, 0.0)
    assert row["output_tokens"] == 64 and row["ok"] is True and row["spec"]["verify_steps"] > 0
    assert row["itl_ms"]["n"] == 63 and row["itl_ms"]["p50"] <= row["itl_ms"]["max"]
    json.dumps(row)


def test_adaptive_stop_waits_for_the_minimum_then_for_the_width() -> None:
    rule = AdaptiveStop(rel_ci=0.05, min_requests=10, min_interval_s=0.0)
    state = LoopState()
    records = fake_requests(200, random.Random(3))
    for record in records[:9]:
        state.note(record)
    assert rule.keep_going(state)
    asked = 9
    while rule.keep_going(state) and asked < len(records):
        state.note(records[asked])
        asked += 1
    assert rule.reached and rule.reached_rel is not None and rule.reached_rel <= 0.05
    assert 10 <= asked < 200 and not rule.keep_going(state)


# -- windows, points, significance --------------------------------------------------------------------------


def window(label: str, value: float, se: float, *, restart: int = 1, status: str = "ok", **extra: Any) -> dict:
    return {
        "host": "h",
        "label": label,
        "variant": label,
        "mode": "concurrency",
        "load": 1.0,
        "load_label": "C=1",
        "status": status,
        "alias_of": None,
        "point_id": f"p-{label}-{restart}-{value}",
        "restart": restart,
        "requests": 16,
        "output_tok_s": value,
        "output_tok_s_lo": value - 1.96 * se,
        "output_tok_s_hi": value + 1.96 * se,
        "output_tok_s_se": se,
        "per_user_tok_s": value,
        "per_user_tok_s_se": se,
        **extra,
    }


def test_one_window_keeps_its_interval_and_several_are_combined() -> None:
    frame = pd.DataFrame(
        [window("a", 100.0, 2.0)]
        + [window("b", v, 2.0, restart=r) for r, v in ((1, 100.0), (1, 104.0), (2, 110.0), (2, 112.0))]
        + [window("c", 0.0, 0.0, status="failed"), window("c", 90.0, 3.0)]
    )
    points = aggregate_windows(frame)
    a = points[points["label"] == "a"].iloc[0]
    assert (a["output_tok_s"], a["windows"], a["ci_method"]) == (100.0, 1, "bootstrap over requests")
    b = points[points["label"] == "b"].iloc[0]
    assert b["output_tok_s"] == pytest.approx(106.5)
    assert b["ci_method"] == "bootstrap over 2 restarts (2 repeats each) and their requests"
    assert b["requests"] == 64 and b["windows"] == 4
    assert b["output_tok_s_lo"] < 102 and b["output_tok_s_hi"] > 111  # the restart-to-restart spread shows
    c = points[points["label"] == "c"]
    assert list(c["status"]) == ["failed", "ok"] and c.iloc[1]["windows_failed"] == 1


def test_difference_is_significant_only_beyond_noise() -> None:
    apart = difference(110.0, 1.0, 100.0, 1.0)
    assert apart is not None and apart.significant is True and apart.lo > 0.07
    close = difference(101.0, 2.0, 100.0, 2.0)
    assert close is not None and close.significant is False and close.lo < 0 < close.hi
    assert difference(1.0, None, 1.0, 1.0).significant is None  # type: ignore[union-attr]


def test_the_winner_needs_significance_and_ties_are_named() -> None:
    frame = pd.DataFrame([window("a", 101.0, 2.0), window("b", 100.0, 2.0), window("c", 80.0, 1.0)])
    best = best_per_load(frame, rule=significance(0.95)).iloc[0]
    assert best["label"] == "a" and best["decided"] is False and best["tied"] == ["b"]
    assert best["margin_lo"] < 0 < best["margin_hi"]
    frame = pd.DataFrame([window("a", 110.0, 1.0), window("b", 100.0, 1.0)])
    best = best_per_load(frame, rule=significance(0.95)).iloc[0]
    assert best["decided"] is True and best["tied"] == [] and best["basis"] == "95% intervals"


def test_the_pareto_front_keeps_points_within_noise_of_it() -> None:
    rows = [window("a", 100.0, 3.0), window("b", 99.0, 3.0), window("c", 50.0, 1.0)]
    rows[1]["per_user_tok_s"] = 99.5
    frame = pd.DataFrame(rows)
    assert set(pareto_front(frame)["label"]) == {"a"}
    assert set(pareto_front(frame, level=0.95)["label"]) == {"a", "b"}


# -- the lossless check -------------------------------------------------------------------------------------


def lines(*events: dict | str) -> list[str]:
    out = []
    for event in events:
        out += [f"data: {event if isinstance(event, str) else json.dumps(event)}", ""]
    return out


def test_read_stream_reads_every_api() -> None:
    chat = Answer(0, "x", 1)
    read_stream(
        "chat",
        iter(
            lines(
                {"choices": [{"delta": {"role": "assistant"}}]},
                {"choices": [{"delta": {"content": " a b"}}], "usage": {"completion_tokens": 2}},
                {
                    "choices": [{"delta": {"content": " c"}, "finish_reason": "length"}],
                    "usage": {"completion_tokens": 3},
                },
                "[DONE]",
            )
        ),
        chat,
    )
    assert (chat.text, chat.chunk_ends, chat.chunk_tokens, chat.finish_reason) == (" a b c", [4, 6], [2, 3], "length")
    generate = Answer(0, "x", 1)
    read_stream(
        "generate", iter(lines({"text": " a"}, {"text": " a b", "meta_info": {"completion_tokens": 2}})), generate
    )
    assert generate.text == " a b" and generate.chunk_ends == [2, 4]
    llama = Answer(0, "x", 1)
    read_stream("llamacpp", iter(lines({"content": " a"}, {"content": "", "stop": True, "stop_type": "limit"})), llama)
    assert llama.text == " a" and llama.finish_reason == "limit"


def answers(text: str, run: int = 1, index: int = 0) -> dict[str, Any]:
    ends = list(range(1, len(text) + 1))
    return {
        "prompt_index": index,
        "prompt_sha256": "s",
        "run": run,
        "text": text,
        "chunk_ends": ends,
        "chunk_tokens": None,
    }


def test_the_check_names_configuration_prompt_and_position() -> None:
    base = [answers("the quick brown fox"), answers("the quick brown fox", run=2), answers("jumps", index=1)]
    same = [answers("the quick brown fox"), answers("jumps", index=1)]
    wrong = [answers("the quick brawn fox"), answers("jumps", index=1)]
    result = check_lossless(
        {("h", "ar"): base, ("h", "lin"): same, ("h", "bad"): wrong},
        {("h", "ar"): "autoregressive", ("h", "lin"): "linear", ("h", "bad"): "broken"},
        {"h": ("h", "ar")},
    )
    assert not result.passed and result.compared == 4 and result.configurations == 2
    [finding] = [f for f in result.findings if f.kind == "lossy"]
    assert (finding.config, finding.prompt_index, finding.position, finding.token) == ("broken", 0, 12, 12)
    assert "prompt 0" in finding.message and "character 12" in finding.message
    assert first_difference("abc", "abc") is None and first_difference("ab", "abc") == 2


def test_a_baseline_that_differs_from_itself_bounds_what_is_called_lossy() -> None:
    base = [answers("the quick brown fox"), answers("the quick brown cat", run=2)]
    result = check_lossless(
        {("h", "ar"): base, ("h", "bad"): [answers("something else")], ("h", "ok"): [answers("the quick brown cow")]},
        {("h", "ar"): "autoregressive", ("h", "bad"): "broken", ("h", "ok"): "rounded"},
        {"h": ("h", "ar")},
    )
    assert not result.passed
    assert [(f.kind, f.config) for f in result.findings] == [
        ("baseline", "autoregressive"),
        ("lossy", "broken"),
        ("lossless", "rounded"),
    ]
    assert "differs from itself on 1 of 1 prompts" in result.findings[0].message
    missing = check_lossless({("h", "x"): [answers("a")]}, {("h", "x"): "x"}, {"h": None})
    assert [f.kind for f in missing.findings] == ["no_baseline"]


# -- the cache flush ----------------------------------------------------------------------------------------


def test_flush_asks_each_engine_its_own_way() -> None:
    calls: list[tuple[str, str]] = []

    def fake(answers: dict[tuple[str, str], tuple[int | None, str | None]]) -> Any:
        def request(method: str, url: str, path: str, key: str | None) -> tuple[int | None, str | None]:
            calls.append((method, path))
            return answers.get((method, path), (404, "Not Found"))

        return request

    sglang = flush_prefix_cache(
        "http://x", "sim", None, request=fake({("POST", "/flush_cache"): (200, "Cache flushed.")})
    )
    assert sglang["ok"] and sglang["engine"] == "sglang"
    busy = flush_prefix_cache(
        "http://x", "sglang", None, request=fake({("POST", "/flush_cache"): (400, "Flush cache failed.")})
    )
    assert not busy["ok"] and "running" in busy["note"]
    vllm = flush_prefix_cache("http://x", "vllm", None, request=fake({}))
    assert not vllm["ok"] and "VLLM_SERVER_DEV_MODE" in vllm["note"]
    ok = flush_prefix_cache(
        "http://x", "vllm", None, request=fake({("POST", "/reset_prefix_cache"): (200, '{"success":true}')})
    )
    assert ok["ok"]
    calls.clear()
    slots = '[{"id": 0}, {"id": 1}]'
    llama = flush_prefix_cache(
        "http://x",
        "llamacpp",
        None,
        request=fake(
            {
                ("GET", "/slots"): (200, slots),
                ("POST", "/slots/0?action=erase"): (200, '{"id_slot":0,"n_erased":5}'),
                ("POST", "/slots/1?action=erase"): (200, '{"id_slot":1,"n_erased":0}'),
            }
        ),
    )
    assert llama["ok"] and calls == [
        ("GET", "/slots"),
        ("POST", "/slots/0?action=erase"),
        ("POST", "/slots/1?action=erase"),
    ]
    refused = flush_prefix_cache(
        "http://x",
        "llamacpp",
        None,
        request=fake({("GET", "/slots"): (200, slots), ("POST", "/slots/0?action=erase"): (501, "")}),
    )
    assert not refused["ok"] and "--slot-save-path" in refused["note"]
    silent = flush_prefix_cache("http://x", "sglang", None, request=lambda *a: (None, None))
    assert silent["note"] == "the server did not answer"


# -- GPU facts and telemetry --------------------------------------------------------------------------------


def test_gpu_facts_and_samples_parse_nvidia_smis_csv() -> None:
    facts = parse_facts(
        "name, count, driver_version, memory.total [MiB]\n"
        "NVIDIA H100 80GB HBM3, 8, 550.54.15, 81559 MiB\n" * 1 + "NVIDIA H100 80GB HBM3, 8, 550.54.15, 81559 MiB\n"
    )
    assert facts is not None and (facts["model"], facts["count"], facts["driver_version"]) == (
        "NVIDIA H100 80GB HBM3",
        8,
        "550.54.15",
    )
    assert facts["memory_total_mib"] == 81559
    samples = parse_samples(
        [
            "2026/12/01 09:16:57.336, 0, 87, 71234, 300.00",
            "2026/12/01 09:16:57.336, 1, 85, 70000, [N/A]",
            "garbage",
            "2026/12/01 09:16:57.836, 0, 89, 71300, 310.00",
        ]
    )
    summary = summarize_samples(samples, 2.0)
    assert summary["gpus"] == 2 and summary["samples"] == 3
    assert summary["power_w_mean"] == 305.0 and summary["energy_j"] == 610.0
    assert summary["memory_used_mib_max"] == 71300 and summary["utilization_pct_mean"] == pytest.approx(87.0)


def test_telemetry_is_one_long_running_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKE_SMI}{os.pathsep}{os.environ['PATH']}")
    host = LocalHost("box")
    facts = gpu_facts(host)
    assert facts["note"] is None and facts["gpu"]["count"] == 2
    sampler = GpuTelemetry.start(host, interval_ms=100)
    asyncio.run(asyncio.sleep(0.6))
    summary = sampler.finish()
    assert summary["gpus"] == 2 and summary["samples"] >= 6
    assert summary["power_w_mean"] == 600.0 and summary["energy_j"] == pytest.approx(
        600.0 * summary["window_s"], rel=0.01
    )
    assert "-lms 100" in summary["command"]


def test_a_window_shorter_than_the_interval_still_holds_a_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    # The window opens once nvidia-smi has written its first sample: a window closed at once still holds one
    # sample per GPU (the stub, a Python script, takes longer to start than such a window lasts).
    monkeypatch.setenv("PATH", f"{FAKE_SMI}{os.pathsep}{os.environ['PATH']}")
    sampler = GpuTelemetry.start(LocalHost("box"), interval_ms=5000)
    summary = sampler.finish()
    assert summary["gpus"] == 2 and summary["samples"] == 2 and "note" not in summary
    assert summary["power_w_mean"] == 600.0 and summary["window_s"] < 5.0


def test_a_stream_that_never_writes_opens_the_window_after_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("orchestrator.hosts.telemetry.FIRST_SAMPLE_TIMEOUT_S", 0.2)
    monkeypatch.setattr("orchestrator.hosts.telemetry.open_line_stream", lambda host, command: _SilentStream())
    summary = GpuTelemetry.start(LocalHost("box")).finish()
    assert summary["samples"] == 0 and summary["note"] == "nvidia-smi wrote no sample during the window"


class _SilentStream(LineStream):
    def __init__(self) -> None:
        super().__init__()

    def _close(self) -> None:
        pass


def test_no_nvidia_smi_is_a_note(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    facts = gpu_facts(LocalHost("box"))
    assert facts["gpu"] is None and "no nvidia-smi on box" in facts["note"]


# -- provenance ---------------------------------------------------------------------------------------------


def test_provenance_differences_name_what_changed(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text("x: 1\n")
    assert experiment_hash(path) == experiment_hash(path) and str(experiment_hash(path)).startswith("sha256:")
    a = {
        "run": {"specsweep_version": "0.1.0", "experiment_sha256": "sha256:1", "git": {"commit": "aaa"}},
        "hosts": {"gpu-box": {"gpu": {"model": "H100", "count": 8, "driver_version": "550"}}},
        "deployments": {
            "d1": {"label": "linear", "engine": "sglang", "engine_version": "0.5.23", "running": {"command": "x"}}
        },
    }
    b = json.loads(json.dumps(a))
    assert provenance_differences(a, b) == []
    b["hosts"]["gpu-box"]["gpu"]["driver_version"] = "560"
    b["deployments"]["d1"]["engine_version"] = "0.5.22"
    b["deployments"]["d1"]["running"]["command"] = "y"
    b["run"]["experiment_sha256"] = "sha256:2"
    found = provenance_differences(a, b)
    assert any("driver 550 in A, 560 in B" in line for line in found)
    assert any("engine:" in line for line in found) and any("experiment file" in line for line in found)
    assert any("linear: the command running on the host differs" in line for line in found)
    assert provenance_differences(None, None) == [] and len(provenance_differences(a, None)) == 1


def test_running_command_reads_the_process_back() -> None:
    class Service:
        host = LocalHost("box")
        unit = None

        def state(self) -> Any:
            class State:
                main_pid = os.getpid()

            return State()

    running = running_command(Service())
    assert running["pid"] == os.getpid()
    assert "pytest" in running["command"] or "python" in running["command"].lower()


# -- the simulator's text -----------------------------------------------------------------------------------


def test_the_simulators_text_does_not_depend_on_step_sizes_unless_a_wrong_draft_is_accepted() -> None:
    from orchestrator.sim.faults import parse_faults
    from orchestrator.sim.model import Drafter
    from orchestrator.sim.request import SimRequest

    async def text(steps: list[int], rate: float = 0.0) -> str:
        request = SimRequest(
            rid="r",
            prompt_key="user:hello",
            prompt_tokens=3,
            max_tokens=120,
            temperature=0.0,
            server_seed=7,
            request_seed=None,
            drafter=Drafter(0.8),
            temperature_penalty=0.25,
            eos_mean_tokens=None,
            ignore_eos=True,
            wrong_token_rate=rate,
        )
        for n in steps:
            request.generate(n)
        return request.full_text

    ar = asyncio.run(text([1] * 120))
    assert asyncio.run(text([1, 3, 5, 2, 8] * 30)) == ar == asyncio.run(text([7] * 20))
    wrong = asyncio.run(text([1, 3, 5, 2, 8] * 30, rate=0.2))
    assert wrong != ar and asyncio.run(text([1] * 120, rate=1.0)) == ar  # AR accepts no draft
    assert parse_faults(["wrong-token"]).wrong_token_rate == 0.05
    assert parse_faults(["wrong-token=0.5"]).wrong_token_rate == 0.5
    assert math.isclose(parse_faults([]).wrong_token_rate, 0.0)


def test_the_running_command_kept_in_provenance_has_its_secrets_masked() -> None:
    """Issue 28, item 2: a $NAME secret argument is expanded on the host, so `ps` shows its value; provenance
    keeps the command line only after the service's redactor (the value never reaches provenance.json)."""
    import subprocess
    import sys

    from orchestrator.services.secrets import Redactor

    secret = "hf_s3cr3t-value-0123456789"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--token", secret])
    try:
        redactor = Redactor({"HF_TOKEN": secret})

        class Service:
            host = LocalHost("box")
            unit = None

            def state(self) -> Any:
                class State:
                    main_pid = child.pid

                return State()

            def redact(self, text: str) -> str:
                return redactor(text)

        running = running_command(Service())
        assert running["pid"] == child.pid
        assert "--token [secret HF_TOKEN]" in running["command"] and secret not in json.dumps(running)
    finally:
        child.kill()
        child.wait()


# Two chunks as llama-server (llama.cpp b0 of the llama-cpp-python 0.3.36 sources, this project's build) streamed
# them for /v1/completions with "logprobs": 2 and for its own /completion with "n_probs": 2.
_LLAMA_OAI_CHUNK = (
    '{"choices":[{"text":" the","index":0,"logprobs":{"content":[{"id":506,"token":" the","bytes":[32,116,104,101],'
    '"logprob":-1.5936475992202759,"top_logprobs":[{"id":506,"token":" the","bytes":[32,116,104,101],'
    '"logprob":-1.5936475992202759},{"id":496,"token":" a","bytes":[32,97],"logprob":-2.2898948192596436}]}]},'
    '"finish_reason":null}],"created":1796589502,"model":"g","system_fingerprint":"b0-unknown",'
    '"object":"text_completion","id":"chatcmpl-PhCzsMr6tEGdjO9gAEMhsQ0S91GkhfDI"}'
)
_LLAMA_NATIVE_CHUNK = (
    '{"index":0,"content":" the","tokens":[506],"stop":false,"id_slot":-1,"tokens_predicted":1,"tokens_evaluated":6,'
    '"completion_probabilities":[{"id":506,"token":" the","bytes":[32,116,104,101],"logprob":-1.5936477184295654,'
    '"top_logprobs":[{"id":506,"token":" the","bytes":[32,116,104,101],"logprob":-1.5936477184295654},'
    '{"id":496,"token":" a","bytes":[32,97],"logprob":-2.2898948192596436}]}]}'
)


def test_read_stream_keeps_each_tokens_likeliest_alternatives() -> None:
    from orchestrator.sweep.lossless import logprob_fields

    expected = [
        [
            " the",
            pytest.approx(-1.5936476, abs=1e-6),
            [[" the", pytest.approx(-1.5936476, abs=1e-6)], [" a", pytest.approx(-2.2898948)]],
        ]
    ]
    for api, chunk in (("completions", _LLAMA_OAI_CHUNK), ("llamacpp", _LLAMA_NATIVE_CHUNK)):
        got = Answer(0, "x", 1)
        read_stream(api, iter(lines(chunk, "[DONE]")), got)
        assert got.text == " the" and got.logprobs == expected, api
        assert got.to_dict()["logprobs"] == expected
    # OpenAI's legacy completions shape (vLLM's and SGLang's /v1/completions: CompletionLogProbs / LogProbs)
    legacy = Answer(0, "x", 1)
    block = {
        "tokens": [" a", " b"],
        "token_logprobs": [-0.1, -0.2],
        "top_logprobs": [{" a": -0.1, " c": -0.3}, None],
        "text_offset": [0, 2],
    }
    read_stream("completions", iter(lines({"choices": [{"text": " a b", "logprobs": block}]})), legacy)
    assert legacy.logprobs == [[" a", -0.1, [[" a", -0.1], [" c", -0.3]]], [" b", -0.2, []]]
    # no log-probabilities asked for: none kept, and the answer's dict has no key for them
    plain = Answer(0, "x", 1)
    read_stream("chat", iter(lines({"choices": [{"delta": {"content": " a"}, "logprobs": None}]})), plain)
    assert plain.logprobs == [] and "logprobs" not in plain.to_dict()
    assert logprob_fields("chat", 5) == {"logprobs": True, "top_logprobs": 5}
    assert logprob_fields("completions", 5) == {"logprobs": 5}
    assert logprob_fields("llamacpp", 5) == {"n_probs": 5}
    assert logprob_fields("generate", 5) == {} and logprob_fields("chat", 0) == {}
