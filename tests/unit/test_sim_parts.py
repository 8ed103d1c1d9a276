"""The simulator's pure parts: flags and faults, step timing, log formats, wire formats, /metrics text."""

from __future__ import annotations

import re

import pytest

from orchestrator.engines.sglang.simdialect import decode_batch
from orchestrator.errors import ConfigError
from orchestrator.sim import api
from orchestrator.sim.config import parse_args
from orchestrator.sim.faults import Faults, parse_faults
from orchestrator.sim.model import Drafter, Speculator
from orchestrator.sim.profiles import PROFILES, get_profile
from orchestrator.sim.stats import ServerStats
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
    # sglang 0.5.23 metrics_reporter.py report_decode_stats: no trailing comma, prefix only with tp_size > 1.
    line = decode_batch(
        running=1, tokens=1234, usage=0.01, accept_len=3.52, accept_rate=0.63, throughput=86.12, queue=0, prefix=" TP0"
    )
    assert re.fullmatch(
        r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] Decode batch, #running-req: 1, #token: 1234, token usage: 0\.01, "
        r"accept len: 3\.52, accept rate: 0\.63, cuda graph: True, gen throughput \(token/s\): 86\.12, #queue-req: 0",
        line,
    )


def test_fail_start_lines_hold_a_traceback() -> None:
    from orchestrator.sim.dialects import make_dialect

    dialect = make_dialect(parse_args([]), lambda line: None)
    dialect.groups = [ServerStats(model="sim", speculative=False)]
    dialect.setup_groups()
    lines = dialect.fail_start_lines()
    assert any(line.endswith("Traceback (most recent call last):") for line in lines)
    assert any(line.startswith("torch.OutOfMemoryError: ") for line in lines)


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
