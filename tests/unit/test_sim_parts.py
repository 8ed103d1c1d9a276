"""The simulator's pure parts: flags and faults, step timing, log formats, wire formats, /metrics text."""

from __future__ import annotations

import json
import re

import pytest

from orchestrator.errors import ConfigError
from orchestrator.sim import api, logs
from orchestrator.sim.config import parse_args
from orchestrator.sim.faults import Faults, parse_faults
from orchestrator.sim.model import Drafter, Speculator
from orchestrator.sim.profiles import PROFILES, get_profile
from orchestrator.sim.stats import ServerStats, render_prometheus
from orchestrator.sim.timing import StepTiming

K26 = PROFILES["k26"]
DRAFTER = Drafter(K26.top1_accuracy, K26.depth_decay, K26.rank_share)


@pytest.mark.parametrize(
    ("specs", "expected"),
    [
        pytest.param([], Faults(), id="none"),
        pytest.param(["fail-start"], Faults(fail_start=True, specs=("fail-start",)), id="fail-start"),
        pytest.param(["crash-after=5"], Faults(crash_after=5, specs=("crash-after=5",)), id="crash-after"),
        pytest.param(["slow-start"], Faults(slow_start_seconds=30.0, specs=("slow-start",)), id="slow-start"),
        pytest.param(["slow-start=2.5"], Faults(slow_start_seconds=2.5, specs=("slow-start=2.5",)), id="slow-2.5"),
        pytest.param(["http-500-rate=0.1"], Faults(http_500_rate=0.1, specs=("http-500-rate=0.1",)), id="500"),
        pytest.param(["stall"], Faults(stall_rate=1.0, specs=("stall",)), id="stall"),
        pytest.param(["stall=0.25"], Faults(stall_rate=0.25, specs=("stall=0.25",)), id="stall-rate"),
        pytest.param(
            ["bad-metrics", "commit-bug"],
            Faults(bad_metrics=True, commit_bug=True, specs=("bad-metrics", "commit-bug")),
            id="two",
        ),
    ],
)
def test_parse_faults(specs: list[str], expected: Faults) -> None:
    assert parse_faults(specs) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("meteor", "unknown fault 'meteor'", id="unknown"),
        pytest.param("crash-after", "needs a value", id="missing-value"),
        pytest.param("crash-after=x", "is not an integer", id="not-int"),
        pytest.param("crash-after=0", "between 1", id="zero"),
        pytest.param("http-500-rate=1.5", "between 0 and 1", id="rate-too-big"),
    ],
)
def test_parse_faults_rejects(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_faults([spec])


def test_parse_args_defaults_and_overrides() -> None:
    config = parse_args([])
    assert (config.host, config.port, config.algorithm, config.profile.name) == ("127.0.0.1", 30000, "ar", "k26")
    assert config.load_seconds == K26.load_seconds
    assert config.model == "sim" and config.decode_log_interval == 40
    config = parse_args(["--profile", "metronome", "--ttft-ms", "7", "--itl-ms", "3", "--load-seconds", "0"])
    assert (config.profile.ttft_ms, config.profile.itl_ms, config.load_seconds) == (7.0, 3.0, 0.0)
    config = parse_args(["--profile", "tiny", "--itl-ms", "4"])
    assert config.profile.floor_ms == 4.0  # for batch profiles --itl-ms sets the step floor


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--budget", "0"], id="budget-0"),
        pytest.param(["--draft-tokens", "5000"], id="too-deep"),
        pytest.param(["--load-seconds", "-1"], id="negative-load"),
        pytest.param(["--itl-ms", "-1"], id="negative-itl"),
        pytest.param(["--port", "70000"], id="bad-port"),
    ],
)
def test_parse_args_rejects(argv: list[str]) -> None:
    with pytest.raises(ConfigError):
        parse_args(argv)


def test_get_profile_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="k26, tiny, firehose, metronome"):
        get_profile("h100")


def test_k26_ar_step_matches_the_field_report() -> None:
    timing = StepTiming(K26, Speculator("ar", DRAFTER))
    assert 1 / timing.decode_seconds(1) == pytest.approx(98, abs=1)


def test_verify_cost_rises_with_tokens_even_at_batch_one() -> None:
    timing = StepTiming(K26, Speculator("ar", DRAFTER))
    costs = [timing.verify_ms(t) for t in (1, 8, 17, 33, 512, 4096)]
    assert costs == sorted(costs) and len(set(costs)) == len(costs)


def test_big_trees_cost_more_than_chains_at_high_concurrency() -> None:
    chain = StepTiming(K26, Speculator("linear", DRAFTER, draft_tokens=16))
    tree = StepTiming(K26, Speculator("ddtree", DRAFTER, budget=32, topk=8))
    assert tree.decode_seconds(128) > 1.3 * chain.decode_seconds(128)


def test_firehose_costs_nothing() -> None:
    firehose = PROFILES["firehose"]
    timing = StepTiming(firehose, Speculator("ddtree", DRAFTER))
    assert firehose.zero_time
    assert timing.decode_seconds(128) == 0 and timing.prefill_seconds(10_000) == 0


def test_decode_line_has_sglang_format() -> None:
    line = logs.decode_batch(
        running=1, tokens=1234, usage=0.01, accept_len=3.52, accept_rate=0.63, throughput=86.12, queue=0
    )
    assert re.fullmatch(
        r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] Decode batch, #running-req: 1, #token: 1234, token usage: 0\.01, "
        r"accept len: 3\.52, accept rate: 0\.63, cuda graph: True, gen throughput \(token/s\): 86\.12, #queue-req: 0,",
        line,
    )


def test_ddtree_line_reproduces_the_field_report() -> None:
    line = logs.ddtree_metrics(bs=1, budget=7, nodes=8, drafts=2, commit=2, depth=5)
    assert line == (
        "DDTREE metrics: bs=1 budget=7 avg_actual_nodes=8.00 avg_accepted_drafts=2.00 avg_commit_len=2.00 "
        "avg_accepted_depth=5.00"
    )


def test_fail_start_lines_hold_a_traceback() -> None:
    lines = logs.fail_start_lines()
    assert any(line.endswith("Traceback (most recent call last):") for line in lines)
    assert any(line.startswith("torch.OutOfMemoryError: ") for line in lines)


def test_stream_chunks_are_valid_json() -> None:
    stream = api.OpenAIStream(rid="chatcmpl-1", created=1, model='we"ird', chat=True)
    role = json.loads(stream.role()[6:])
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = json.loads(stream.content(" a b")[6:])
    assert content["model"] == 'we"ird' and content["choices"][0]["delta"] == {"content": " a b"}
    finish = json.loads(stream.finish("length", {"spec_verify_ct": 3})[6:])
    assert finish["choices"][0]["finish_reason"] == "length" and finish["meta_info"]["spec_verify_ct"] == 3
    usage = json.loads(stream.usage(5, 7, {})[6:])
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] == 12
    text = api.OpenAIStream(rid="cmpl-1", created=1, model="m", chat=False)
    assert json.loads(text.content(" x")[6:])["choices"][0]["text"] == " x"


def test_parse_chat_counts_tokens_and_reads_options() -> None:
    body = {
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"text": "hi there"}]}],
        "max_tokens": 9,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "stop": "END",
        "ignore_eos": True,
    }
    params = api.parse_chat(body, 1000)
    assert params.prompt_tokens == 2 + (4 + 2) + (4 + 2)
    assert (params.max_tokens, params.temperature, params.stream, params.include_usage) == (9, 0.0, True, True)
    assert params.stop == ("END",) and params.ignore_eos
    assert api.parse_chat({"messages": [{"role": "user", "content": "x"}]}, 1000).max_tokens == api.DEFAULT_MAX_TOKENS


def test_prometheus_text() -> None:
    stats = ServerStats(model="sim", speculative=True, verify_steps=10, accepted_tokens=25, generation_tokens=37)
    text = render_prometheus(stats)
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert all(re.fullmatch(r'sglang:\w+\{model_name="sim"\} -?\d+\.\d+(e[-+]\d+)?', s) for s in samples)
    assert 'sglang:spec_verify_steps_total{model_name="sim"} 10.0' in samples
    assert "# TYPE sglang:spec_accept_length gauge" in text
    bad = render_prometheus(stats, bad_line=True)
    assert len(bad.splitlines()) == len(text.splitlines()) + 2
