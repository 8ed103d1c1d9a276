"""Issue 58, S8/S14: the lossless probe's answers are bounded in bytes, events and time like the load's, keep only
the alternatives asked, and obey a stop wherever they wait, against hostile servers on real loopback HTTP
(tests/integration/hostile_probe_server.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from orchestrator.load.settings import LoadSettings
from orchestrator.sweep.lossless import TOP_LOGPROBS, limits, probe
from tests.integration.hostile_probe_server import HostileServer
from tests.timing import scaled

pytestmark = pytest.mark.timeout(300)

MAX_TOKENS = 64


@pytest.fixture
def hostile() -> Iterator[Any]:
    servers: list[HostileServer] = []

    def start(mode: str, **options: Any) -> tuple[HostileServer, str]:
        server = HostileServer(mode, **options)
        servers.append(server)
        return server, server.start()

    yield start
    for server in servers:
        server.close()


def _settings(url: str, **timeouts: float) -> LoadSettings:
    return LoadSettings(url=url, model="sim", api="chat", concurrency=1, requests=1, max_tokens=MAX_TOKENS,
                        temperature=0.0, prompts="builtin:chat", stream=True, **timeouts)  # fmt: skip


def _stored(answer: Any) -> int:
    """The bytes the answer takes in lossless/<deployment>.jsonl."""
    return len(json.dumps(answer.to_dict(), ensure_ascii=False).encode())


def test_alternatives_beyond_those_asked_are_counted_not_kept(hostile: Any) -> None:
    _server, url = hostile("alternatives", alternatives=50)
    (answer,) = probe(_settings(url), 1, logprobs=TOP_LOGPROBS)
    assert answer.error is None and answer.text == "x" * 16
    assert [len(row[2]) for row in answer.logprobs] == [TOP_LOGPROBS] * 16
    assert answer.alternatives_dropped == 16 * (50 - TOP_LOGPROBS)
    assert answer.to_dict()["alternatives_dropped"] == answer.alternatives_dropped


def test_a_hundred_thousand_alternatives_a_token_are_cut_at_the_event_bound(hostile: Any) -> None:
    _server, url = hostile("alternatives", alternatives=100_000)
    (answer,) = probe(_settings(url), 1, logprobs=TOP_LOGPROBS)
    bound = limits(MAX_TOKENS).event
    assert answer.error == f"an event larger than {bound} bytes (not read further)"
    assert _stored(answer) < 4096  # the file holds what was read before the bound, not 10 MB of alternatives


def test_a_million_one_character_events_are_cut_at_the_events_bound(hostile: Any) -> None:
    server, url = hostile("dribble", events=1_000_000)
    (answer,) = probe(_settings(url), 1, logprobs=TOP_LOGPROBS)
    events = limits(MAX_TOKENS).events
    assert answer.error == f"more than {events} events, twice the max_tokens asked and more (not read further)"
    assert len(answer.text) == len(answer.chunk_ends) <= events
    assert server.sent < 1_000_000 * 50  # not read to its end


def test_an_endless_answer_ends_at_the_total_timeout(hostile: Any) -> None:
    _server, url = hostile("endless", every=0.05)
    (answer,) = probe(_settings(url, total_timeout=1.0), 1, logprobs=TOP_LOGPROBS)
    assert answer.error == "not finished within 1 s (total_timeout)"


def test_a_silent_answer_ends_at_the_first_token_timeout(hostile: Any) -> None:
    _server, url = hostile("silent")
    (answer,) = probe(_settings(url, first_token_timeout=1.0), 1, logprobs=TOP_LOGPROBS)
    assert answer.error == "no answer within 1 s (first_token_timeout)"


@pytest.mark.parametrize("mode", ["endless", "silent"])
def test_a_stop_ends_the_probe_wherever_its_answer_waits(hostile: Any, mode: str) -> None:
    """Mid-stream (the server sends a token every 20 ms, for ever) or in a read that nothing ends (the server
    sent its headers and nothing more): the stop cancels the answer; without it each waits an hour."""
    stop = threading.Event()
    told: list[tuple[int, int]] = []

    def on_event(count: int) -> None:
        if count == 5:  # a few tokens in: Ctrl-C
            stop.set()

    _server, url = hostile(mode, on_event=on_event, every=0.02)
    if mode == "silent":
        threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    answers = probe(_settings(url, first_token_timeout=3600, total_timeout=3600), 3, runs=2, stop=stop,
                    logprobs=TOP_LOGPROBS, progress=lambda d, t: told.append((d, t)))  # fmt: skip
    took = time.monotonic() - started
    (answer,) = answers  # the first answer, cut short; nothing more was asked
    assert answer.error == "stopped: the sweep was asked to stop mid-answer", answer.error
    if mode == "endless":
        assert 5 <= len(answer.chunk_ends) < 5 + 50  # the stop came after the fifth token: cut at once
    assert told == [(0, 6), (1, 6)]
    assert took < scaled(30)  # a guard against a hang (an hour), not a measurement
