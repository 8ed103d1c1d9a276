"""Prompt sets, their seeded order, file formats, and the settings' own checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import orchestrator.load as load_package
from orchestrator.errors import LoadError
from orchestrator.load import LoadSettings, load_workload


def test_public_api() -> None:
    assert set(load_package.__all__) == {
        "API_PATHS",
        "LoadProgress",
        "LoadResult",
        "LoadSettings",
        "Prompt",
        "RequestRecord",
        "Workload",
        "load_workload",
        "run_load",
    }


def test_builtin_chat_is_varied_and_seeded() -> None:
    workload = load_workload("builtin:chat", seed=0)
    assert workload.size >= 40
    texts = [workload.prompt(i).as_text() for i in range(workload.size)]
    assert len(set(texts)) == workload.size
    assert "Write a Python quicksort with comments." in texts
    again = load_workload("builtin:chat", seed=0)
    other = load_workload("builtin:chat", seed=1)
    assert [again.prompt(i) for i in range(10)] == [workload.prompt(i) for i in range(10)]
    assert [other.prompt(i) for i in range(10)] != [workload.prompt(i) for i in range(10)]
    assert workload.prompt(workload.size) == workload.prompt(0)  # cycles
    assert workload.warmup_prompt(0) == workload.prompt(workload.size - 1)


def test_unknown_builtin() -> None:
    with pytest.raises(LoadError, match="chat"):
        load_workload("builtin:nope")


def test_jsonl_formats(tmp_path: Path) -> None:
    lines = [
        json.dumps("plain string"),
        json.dumps({"prompt": "a prompt", "max_tokens": 17}),
        json.dumps({"text": "a text"}),
        json.dumps({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]}),
        json.dumps({"conversations": [{"from": "human", "value": "sharegpt q"}, {"from": "gpt", "value": "a"}]}),
        "",
    ]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines))
    workload = load_workload(str(path))
    prompts = {workload.prompt(i).as_text(): workload.prompt(i) for i in range(workload.size)}
    assert set(prompts) == {"plain string", "a prompt", "a text", "be brief\n\nhi", "sharegpt q"}
    assert prompts["a prompt"].max_tokens == 17
    chat = prompts["be brief\n\nhi"]
    assert chat.as_messages() == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert prompts["plain string"].as_messages() == [{"role": "user", "content": "plain string"}]


def test_sharegpt_json_list(tmp_path: Path) -> None:
    data = [
        {"id": "x", "conversations": [{"from": "gpt", "value": "no human turn"}]},
        {"id": "y", "conversations": [{"from": "human", "value": "first"}, {"from": "gpt", "value": "answer"}]},
    ]
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(data))
    workload = load_workload(str(path))
    assert workload.size == 1
    assert workload.prompt(0).as_text() == "first"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param('{"prompt": "ok"}\n{broken\n', r"p\.jsonl:2: not valid JSON", id="bad-json-line"),
        pytest.param('{"nothing": 1}\n', r"p\.jsonl:1: no prompt found", id="no-prompt"),
        pytest.param('{"prompt": "x", "max_tokens": 0}\n', r"max_tokens must be", id="bad-max-tokens"),
        pytest.param("\n\n", "holds no prompts", id="empty"),
        pytest.param("[1, 2]", "item 1: expected a string or an object", id="bad-list-item"),
    ],
)
def test_bad_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(content)
    with pytest.raises(LoadError, match=message):
        load_workload(str(path))


def test_missing_file() -> None:
    with pytest.raises(LoadError, match="does not exist"):
        load_workload("no/such/file.jsonl")


def test_synthetic() -> None:
    workload = load_workload("synthetic:in=64,out=32", seed=3)
    first = workload.prompt(0)
    assert first.max_tokens == 32
    assert first.ignore_eos is True
    assert len(first.as_text().split()) == 63
    assert workload.prompt(1) != first  # fresh words per request: no prefix cache hits
    assert load_workload("synthetic:in=64,out=32", seed=3).prompt(0) == first
    assert workload.warmup_prompt(0) != first


def test_synthetic_words_are_random_choice() -> None:
    """The synthetic prompt draws its words as ``Random.choice`` would (written out, it costs less per request),
    so that the prompts of a seed stay what they were."""
    import random

    from orchestrator.load.workloads import _WORDS

    workload = load_workload("synthetic:in=40,out=8", seed=11)
    for index in (0, 1, 17, 999, -1, -5):
        rng = random.Random(f"11:{index}")
        expected = " ".join(rng.choice(_WORDS) for _ in range(39))
        prompt = workload.prompt(index) if index >= 0 else workload.warmup_prompt(-1 - index)
        assert prompt.as_text() == expected


@pytest.mark.parametrize("spec", ["synthetic:in=64", "synthetic:in=0,out=3", "synthetic:foo=1,out=2", "synthetic:"])
def test_bad_synthetic(spec: str) -> None:
    with pytest.raises(LoadError, match="synthetic"):
        load_workload(spec)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"url": "127.0.0.1:3000", "concurrency": 1}, "URL", id="no-scheme"),
        pytest.param({"url": "http://h:1"}, "concurrency", id="no-loop"),
        pytest.param({"url": "http://h:1", "concurrency": 0}, "concurrency", id="zero-concurrency"),
        pytest.param({"url": "http://h:1", "rate": -1.0}, "rate", id="negative-rate"),
        pytest.param({"url": "http://h:1", "rate": float("inf")}, "rate", id="infinite-rate"),
        pytest.param({"url": "http://h:1", "concurrency": 1, "api": "grpc"}, "api", id="bad-api"),
        pytest.param({"url": "http://h:1", "concurrency": 1, "total_timeout": 0}, "total_timeout", id="timeout"),
        pytest.param({"url": "http://h:1", "concurrency": 1, "requests": 0}, "requests", id="requests"),
        pytest.param({"url": "http://h:1", "concurrency": 1, "warmup": -1}, "warmup", id="warmup"),
    ],
)
def test_settings_refuse_bad_values(kwargs: dict, message: str) -> None:
    with pytest.raises(LoadError, match=message):
        LoadSettings(**kwargs)


@pytest.mark.parametrize(
    ("url", "api", "endpoint"),
    [
        ("http://h:1", "chat", "http://h:1/v1/chat/completions"),
        ("http://h:1/", "completions", "http://h:1/v1/completions"),
        ("http://h:1/v1", "chat", "http://h:1/v1/chat/completions"),
        ("http://h:1", "generate", "http://h:1/generate"),
        ("https://h/api/", "llamacpp", "https://h/api/completion"),
    ],
)
def test_endpoints(url: str, api: str, endpoint: str) -> None:
    assert LoadSettings(url=url, api=api, concurrency=1).endpoint == endpoint  # type: ignore[arg-type]


def test_loop_properties() -> None:
    closed = LoadSettings(url="http://h:1", concurrency=8)
    assert not closed.open_loop
    assert closed.request_budget == 32
    assert closed.in_flight_cap == 8
    timed = LoadSettings(url="http://h:1", concurrency=8, duration_s=5.0)
    assert timed.request_budget is None
    open_loop = LoadSettings(url="http://h:1", rate=2.5, concurrency=4, requests=10)
    assert open_loop.open_loop
    assert open_loop.in_flight_cap == 4
    assert LoadSettings(url="http://h:1", rate=2.5, max_in_flight=2, concurrency=4).in_flight_cap == 2
    assert "secret" not in repr(LoadSettings(url="http://h:1", concurrency=1, api_key="secret"))
