"""The request is the one configured (issue 48): the builtin prompt sets carry their own output limits (90 and
130 for summarization), and the load's ``max_tokens`` is what every request carries unless the load opts in
to the per-prompt limits. Through the real load client against the simulator over loopback: with
``ignore_eos`` the simulator generates exactly the ``max_tokens`` each request carried, so its usage counts
say what the server was asked for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.load import LoadSettings, run_load
from tests.integration.test_load_sim import start_sim, stop_sim


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    process, url = start_sim("--profile", "tiny")
    try:
        yield url
    finally:
        stop_sim(process)


def _settings(url: str, **overrides: object) -> LoadSettings:
    base: dict[str, object] = {
        "url": url,
        "model": "sim",
        "concurrency": 2,
        "requests": 6,
        "warmup": 1,
        "prompts": "builtin:summarization",  # every line says 90 or 130
        "ignore_eos": True,
    }
    return LoadSettings(**{**base, **overrides})  # type: ignore[arg-type]


async def test_every_request_carries_the_configured_max_tokens(sim: str) -> None:
    result = await run_load(_settings(sim, max_tokens=12))
    data = result.to_dict()
    assert data["errors"] == 0
    # the server generated what it was asked for: 12 tokens each, not the prompts file's 90 or 130
    assert [r.output_tokens for r in result.records] == [12] * 6
    assert [r.max_tokens for r in result.records] == [12] * 6
    assert data["max_tokens"] == 12
    assert data["max_tokens_sent"] == [12]
    assert data["output_tokens"] == 72


async def test_per_prompt_limits_are_an_opt_in_capped_by_max_tokens(sim: str) -> None:
    result = await run_load(_settings(sim, max_tokens=100, prompt_max_tokens=True, requests=8))
    data = result.to_dict()
    assert data["errors"] == 0
    sent = [r.max_tokens for r in result.records]
    assert set(sent) == {90, 100}  # the file's 90 kept, its 130 capped at the configured 100
    assert [r.output_tokens for r in result.records] == sent
    assert data["max_tokens_sent"] == [90, 100]


async def test_a_synthetic_out_is_sent_as_configured(sim: str) -> None:
    result = await run_load(_settings(sim, prompts="synthetic:in=8,out=7", max_tokens=50, requests=2))
    assert [r.output_tokens for r in result.records] == [7, 7]
    assert result.to_dict()["max_tokens_sent"] == [7]


def test_the_sweep_passes_the_opt_in_to_the_load(tmp_path: Path) -> None:
    from orchestrator.plan import build_plan
    from orchestrator.sweep.measure import point_settings
    from tests.unit.launch_fakes import make_experiment

    exp = make_experiment(tmp_path)
    point = build_plan(exp).deployments[0].load_points[0]
    assert point_settings(exp, "http://x:1", point).prompt_max_tokens is False
    opted = exp.model_copy(update={"load": exp.load.model_copy(update={"prompt_max_tokens": True})})
    assert point_settings(opted, "http://x:1", point).prompt_max_tokens is True
