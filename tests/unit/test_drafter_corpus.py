"""Drafters that keep a corpus across requests (SGLang's NGRAM): each point says whether its corpus may already
have held its prompts' answers (orchestrator/sweep/corpus.py), and the analysis warns of every point where it may
(orchestrator/analysis/corpus.py). Issue 47: on a real SGLang 0.5.23 the same prompts sent again went from accept
length 1.63 to 3.23."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

import orchestrator.load.run as load_run
from orchestrator.engines.registry import get_engine
from orchestrator.load.records import RequestRecord
from orchestrator.load.settings import LoadSettings
from orchestrator.load.workloads import Prompt, load_workload
from orchestrator.plan.deployments import build_plan
from orchestrator.sweep.corpus import corpus_note, point_corpus
from orchestrator.sweep.measure import PointMeasurer, Tools
from tests.unit.launch_fakes import FakeSlot, fake_tools, make_experiment
from tests.unit.test_analysis_checks import findings, point, record

NGRAM = "python -m sglang.launch_server --speculative-algorithm NGRAM --speculative-num-draft-tokens 4"
FLUSHED = {"engine": "sglang", "ok": True, "requests": 1, "note": None}


def test_only_sglangs_ngram_keeps_a_corpus() -> None:
    sglang = get_engine("sglang")
    assert "ngram_worker.py" in (sglang.drafter_corpus({"speculative_algorithm": "NGRAM"}, "") or "")
    assert sglang.drafter_corpus({}, NGRAM) is not None  # no settings reported: the command says it
    assert sglang.drafter_corpus({}, "launch_server --speculative_algorithm=ngram") is not None
    assert sglang.drafter_corpus({"speculative_algorithm": "EAGLE"}, NGRAM) is None  # the server's word wins
    assert sglang.drafter_corpus({}, "python -m sglang.launch_server --model-path m") is None
    assert get_engine("sim").drafter_corpus({"speculative_algorithm": "NGRAM"}, NGRAM) is None
    assert get_engine("vllm").drafter_corpus({}, '--speculative-config \'{"method":"ngram"}\'') is None


def test_a_flushed_point_with_distinct_prompts_is_clean() -> None:
    note = corpus_note("keeps", flush=FLUSHED, warmup=1, requests=4, distinct=5)
    assert note is not None and note["clean"] is True and note["note"] is None
    assert corpus_note(None, flush=None, warmup=1, requests=4, distinct=5) is None
    # A synthetic workload never repeats a prompt.
    assert corpus_note("keeps", flush=FLUSHED, warmup=8, requests=64, distinct=0)["clean"] is True  # type: ignore[index]


@pytest.mark.parametrize(
    ("flush", "warmup", "requests", "says"),
    [
        (None, 1, 4, "load.flush_cache is off"),
        ({"ok": False, "note": "HTTP 400"}, 1, 4, "emptying it was refused (HTTP 400)"),
        (FLUSHED, 2, 4, "2 warm-up and 4 measured requests over 5 distinct prompts"),
    ],
)
def test_a_point_whose_corpus_may_know_its_prompts_says_why(
    flush: dict[str, object] | None, warmup: int, requests: int, says: str
) -> None:
    note = corpus_note("keeps", flush=flush, warmup=warmup, requests=requests, distinct=5)
    assert note is not None and note["clean"] is False and says in note["note"]


def test_point_corpus_reads_the_workloads_distinct_prompts() -> None:
    settings = LoadSettings(url="http://x:1", prompts="builtin:summarization", concurrency=1, requests=4, warmup=1)
    client = {"warmup_requests": 1, "requests": 4}
    note = point_corpus("sglang", {"settings": {"speculative_algorithm": "NGRAM"}}, "", FLUSHED, client, settings)
    assert note is not None and note["clean"] is True and note["distinct_prompts"] > 5
    assert point_corpus("sglang", {"settings": {}}, "launch_server", FLUSHED, client, settings) is None
    many = {"warmup_requests": 1, "requests": 1000}
    assert point_corpus("sglang", None, NGRAM, FLUSHED, many, settings)["clean"] is False  # type: ignore[index]


def test_the_analysis_warns_of_each_point_whose_corpus_may_have_known_its_prompts() -> None:
    dirty = {"keeps_corpus": "NGRAM corpus", "clean": False, "note": "the corpus was not emptied before the point"}
    clean = {**dirty, "clean": True, "note": None}
    records = [
        record("autoregressive", 1, **point(100.0)),
        record("ngram", 1, **point(150.0, 2.0, drafter_corpus=clean)),
        record("ngram", 2, **point(250.0, 2.5, drafter_corpus=dirty)),
    ]
    found = [f for f in findings(records) if f.check == "drafter_corpus"]
    assert [(f.severity, f.load) for f in found] == [("warning", "C=2")]
    assert "not emptied" in found[0].message and found[0].evidence == ["NGRAM corpus"]


def test_the_sweeps_warm_up_sends_the_warm_up_prompts_not_the_points(tmp_path: Path) -> None:
    # The deployment's warm-up ran the points' first prompts: SGLang's NGRAM corpus then held their answers
    # (issue 47). It now sends the warm-up prompts, from the other end of the seeded order.
    exp = make_experiment(tmp_path, warmup=2)
    seen: list[Any] = []
    PointMeasurer(exp, fake_tools(on_load=seen.append)).warm_up("http://box:9000", threading.Event())
    assert seen[0].warmup_prompts is True and seen[0].requests == 2


def test_a_load_of_warm_up_prompts_sends_them(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []

    class Client:
        def __init__(self, settings: LoadSettings, model: str | None) -> None:
            self.tokens_seen = 0

        async def __aenter__(self) -> Client:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        async def send(self, index: int, prompt: Prompt, *, warmup: bool = False) -> RequestRecord:
            sent.append(prompt.as_text())
            return RequestRecord(index=index, warmup=warmup)

    monkeypatch.setattr(load_run, "LoadClient", Client)
    workload = load_workload("builtin:summarization", 7)
    for flag, expected in ((True, workload.warmup_prompt), (False, workload.prompt)):
        sent.clear()
        settings = LoadSettings(
            url="http://x:1",
            model="m",
            prompts="builtin:summarization",
            seed=7,
            concurrency=1,
            requests=3,
            warmup=0,
            warmup_prompts=flag,
        )
        asyncio.run(load_run.run_load(settings))
        assert sent == [expected(i).as_text() for i in range(3)]
    assert {workload.warmup_prompt(i).as_text() for i in range(3)}.isdisjoint(
        workload.prompt(i).as_text() for i in range(3)
    )


def test_a_point_asks_the_version_again_when_the_server_did_not_answer_at_its_start(tmp_path: Path) -> None:
    # Asked right after /health, a real SGLang 0.5.23 on two busy cores had not answered /server_info (its
    # scheduler busy with its own warm-up): the version stayed unknown and so did the log's acceptance rate.
    exp = make_experiment(tmp_path)
    deployment = build_plan(exp).deployments[0]
    slot = FakeSlot("box", url="http://box:9000")
    server = slot.launch(deployment, progress=None, stop=threading.Event())
    asked: list[str] = []

    def get(url: str, path: str, key: str | None) -> tuple[int | None, str | None]:
        asked.append(path)
        return 200, json.dumps({"version": "0.5.23", "speculative_algorithm": "NGRAM"})

    base = fake_tools([slot])
    tools = Tools(load=base.load, scrape=base.scrape, get=get, sampler=base.sampler, flush=base.flush)
    measured = PointMeasurer(exp, tools).measure(
        server,
        deployment,
        deployment.load_points[0],
        run_id="run-1",
        host="box",
        attempt=1,
        stop=threading.Event(),
        write_window=lambda text: "windows/1.log",
        engine_info={"engine": exp.engine, "version": None, "error": "no answer"},
    )
    assert asked and measured.record.engine_info["version"] == "0.5.23"
