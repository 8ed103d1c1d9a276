"""The simulator's vLLM dialect under ``num_speculative_tokens_per_batch_size``: the schedule is read and
checked as vLLM reads it (vllm/v1/spec_decode/dynamic/utils.py), and each decode step drafts the k of the
number of requests in it (vllm/v1/core/sched/scheduler.py lines 1709-1714), which the dialect's counters (those
/metrics and the SpecDecoding log line print) show as drafted tokens per draft."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import pytest

from orchestrator.engines.vllm.simdialect import VLLMDialect
from orchestrator.errors import ConfigError
from orchestrator.sim.config import parse_args
from orchestrator.sim.dialects import make_dialect
from orchestrator.sim.dynamic_sd import build_lookup, validate_schedule
from orchestrator.sim.engine import Engine
from orchestrator.sim.request import SimRequest
from orchestrator.sim.stats import Counts, ServerStats

SCHEDULE = [[1, 1, 4], [2, 8, 1]]


def _argv(schedule: object, k: int = 4, *extra: str) -> list[str]:
    spec = {"method": "ngram", "prompt_lookup_max": 4, "num_speculative_tokens": k}
    spec["num_speculative_tokens_per_batch_size"] = schedule
    head = ["--engine", "vllm", "--algorithm", "linear", "--profile", "firehose"]
    return [*head, "--speculative-config", json.dumps(spec), *extra]


def test_the_lookup_is_vllms_inclusive_ranges_with_gaps_and_tail_carried_and_k_capped() -> None:
    sched = validate_schedule([[32, 128, 2], [1, 16, 3]])  # sorted by start, as vLLM does
    lookup = build_lookup(sched, 200, 3)
    assert lookup[1] == lookup[16] == 3
    assert lookup[17] == lookup[31] == 3  # the gap carries the previous k (utils.py lines 105-116)
    assert lookup[32] == lookup[128] == 2
    assert lookup[129] == lookup[200] == 2  # past the last range (utils.py lines 140-146)
    assert build_lookup(validate_schedule([[1, 4, 6], [5, 8, 0]]), 8, 2)[1:] == [2, 2, 2, 2, 0, 0, 0, 0]  # capped


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ([[2, 8, 1]], "must start at 1"),
        ([[1, 4, 2], [4, 8, 1]], "non-overlapping"),
        ([[1, 4, -1]], ">= 0"),
        ([[1, 0, 2]], "must be positive"),
        ([[1, 2]], "each entry"),
        ([], "non-empty"),
    ],
)
def test_a_bad_schedule_is_refused_naming_the_key(schedule: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        parse_args(_argv(schedule))
    assert "num_speculative_tokens_per_batch_size" in str(err.value)


def test_a_schedule_is_the_vllm_dialects_on_a_chain() -> None:
    with pytest.raises(ConfigError, match="vllm dialect"):  # refused where the dialect is made
        make_dialect(parse_args([*_argv(SCHEDULE), "--engine", "sglang"]), lambda line: None)
    config = parse_args(_argv(SCHEDULE, 4))
    assert config.draft_tokens == 4 and config.spec_schedule == ((1, 1, 4), (2, 8, 1))


@dataclass
class _Steps:
    """Every decode step the real vLLM dialect is told of: (requests in the step, drafts, drafted tokens)."""

    seen: list[tuple[int, int, int]] = field(default_factory=list)


async def _run(concurrency: int, rounds: int, schedule: object = SCHEDULE) -> tuple[_Steps, Counts]:
    config = parse_args(_argv(schedule, 4))
    logged: list[str] = []
    dialect = make_dialect(config, logged.append)
    assert isinstance(dialect, VLLMDialect)
    stats = ServerStats(model="sim", speculative=True)
    dialect.groups = [stats]
    engine = Engine(config, stats, logged.append, dialect)
    dialect.drafted = engine.speculator.drafted
    dialect.setup_groups()
    steps = _Steps()
    told = dialect.decode_step

    def decode_step(group: int, step: Counts, now: float) -> None:
        steps.seen.append((step.request_steps, step.drafts, step.draft_tokens))
        told(group, step, now)

    dialect.decode_step = decode_step  # type: ignore[method-assign]
    engine.start()
    try:
        for r in range(rounds):
            reqs = [
                SimRequest(
                    rid=f"{r}-{i}",
                    prompt_key=f"p{r}-{i}",
                    prompt_tokens=8,
                    max_tokens=64,
                    temperature=0.0,
                    server_seed=0,
                    request_seed=None,
                    drafter=engine.drafter,
                    temperature_penalty=0.0,
                    eos_mean_tokens=None,
                    ignore_eos=True,
                )
                for i in range(concurrency)
            ]
            for req in reqs:
                engine.submit(req)
            while any(req.finished_at is None for req in reqs):
                await asyncio.sleep(0)
    finally:
        await engine.close()
    total = dialect._engines[0].spec_total  # what /metrics' spec_decode counters print
    return steps, total


def test_drafts_per_step_follow_the_schedule_at_c1_and_c4() -> None:
    steps, total = asyncio.run(_run(1, 3))
    assert steps.seen and all(n == 1 and drafted == 4 * drafts for n, drafts, drafted in steps.seen)
    assert total.drafts > 0 and total.draft_tokens == 4 * total.drafts  # 4.00 drafted tokens per draft at C=1

    steps, total = asyncio.run(_run(4, 3))
    full = [(drafts, drafted) for n, drafts, drafted in steps.seen if n == 4]
    assert full and all(drafted == drafts == 4 for drafts, drafted in full)  # k = 1 with 4 requests in the step
    for n, drafts, drafted in steps.seen:
        assert drafts == n and drafted == n * (4 if n == 1 else 1)  # every step: the k of its batch size
    assert total.draft_tokens < 2 * total.drafts  # mostly k = 1 at C=4


def test_k_0_at_a_batch_size_drafts_nothing_in_those_steps() -> None:
    steps, total = asyncio.run(_run(4, 2, [[1, 2, 3], [3, 8, 0]]))
    assert any(n == 4 for n, _, _ in steps.seen)
    for n, drafts, drafted in steps.seen:
        assert (drafts, drafted) == ((0, 0) if n >= 3 else (n, 3 * n))
    assert total.draft_tokens == 3 * total.drafts
