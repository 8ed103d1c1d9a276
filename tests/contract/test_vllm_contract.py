"""vLLM's own metrics code makes the inputs; specsweep must recover exactly the figures vLLM's formula gives.

vLLM's released wheels are fetched once (``wheels.py``: ``pip download --no-deps``, Python files only, cached)
and their speculative-decoding metrics code is run in a subprocess on known counts (``vllm_oracle.py`` for V1,
``vllm_v0_oracle.py`` for V0; each says what it runs and what it stubs). What it logged and exported is read
by ``orchestrator.metrics.parse_window("vllm", ...)`` and ``scrape_delta(..., "vllm")``, and the figures are
compared with vLLM's definitions computed from the same counts:

- mean acceptance length = 1 + accepted / drafts (bonus included; ``vllm/v1/spec_decode/metrics.py``);
- acceptance rate = accepted / drafted tokens (drafts only);
- per-position acceptance, position i = drafts whose first i+1 tokens were accepted / drafts;
- accepted / drafted throughput = tokens / interval seconds;
- V0: tokens per verify step = emitted / (draft tokens / k), counts cumulative since the engine started.

Versions: 0.33.0 (the newest release when written), 0.9.2 (the 0.8.5-0.10.1 line form, mean with bonus),
0.8.5.post1 (the same form, mean without the bonus token), 0.8.3 (the first form), and 0.9.2's V0 code.
These tests need the network (or a filled cache, ``$SPECSWEEP_CACHE``) once, prometheus_client and numpy, and
torch (CPU) for V0; they fail, never skip, when any of it is missing.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from orchestrator.engines.vllm.samples import VllmEngineSample, VllmSpecSample
from orchestrator.metrics import parse_window, scrape_delta
from tests.contract.wheels import engine_sources
from tests.timing import scaled

HERE = Path(__file__).resolve().parent
CURRENT = "0.33.0"
MEAN_FORM_WITH_BONUS = "0.9.2"
MEAN_FORM_NO_BONUS = "0.8.5.post1"
FIRST_FORM = "0.8.3"
V0 = "0.9.2"


def vllm_sources(version: str) -> Path:
    return engine_sources("vllm", version, members=("vllm/",))


def run(script: str, root: Path, scenario: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(HERE / script), str(root)],
        input=json.dumps(scenario),
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@dataclass
class Interval:
    """One logging interval of one engine: its steps (per request: drafted tokens, accepted tokens)."""

    steps: list[list[tuple[int, int]]]
    seconds: float = 10.0

    @property
    def drafts(self) -> int:
        return sum(len(step) for step in self.steps)

    @property
    def drafted(self) -> int:
        return sum(d for step in self.steps for d, _ in step)

    @property
    def accepted(self) -> int:
        return sum(a for step in self.steps for _, a in step)

    def per_position(self, k: int) -> list[int]:
        return [sum(1 for step in self.steps for _, a in step if a > i) for i in range(k)]


@dataclass
class Truth:
    """vLLM's definitions over a set of intervals."""

    intervals: list[Interval] = field(default_factory=list)

    def figures(self, k: int) -> dict[str, Any]:
        drafts = sum(i.drafts for i in self.intervals)
        accepted = sum(i.accepted for i in self.intervals)
        drafted = sum(i.drafted for i in self.intervals)
        seconds = sum(i.seconds for i in self.intervals)
        positions = [sum(i.per_position(k)[p] for i in self.intervals) for p in range(k)]
        return {
            "accept_len": 1 + accepted / drafts,
            "acceptance_rate": accepted / drafted,
            "per_position": [c / drafts for c in positions],
            "accepted_throughput": accepted / seconds,
            "drafted_throughput": drafted / seconds,
            "drafts": drafts,
            "generated": accepted + drafts,
        }


def make_interval(rng: random.Random, k: int, alpha: float, *, full: bool, steps: int, batch: int) -> Interval:
    """Chain drafts: each token accepted with probability alpha until the first rejection; some drafts are
    shorter than k when ``full`` is off (grammar-invalidated tokens, a request near its end)."""
    out = []
    for _ in range(steps):
        step = []
        for _ in range(batch):
            drafted = k if full or rng.random() < 0.7 else rng.randint(1, k)
            accepted = 0
            while accepted < drafted and rng.random() < alpha:
                accepted += 1
            step.append((drafted, accepted))
        out.append(step)
    return Interval(out)


def scenario(k: int, per_engine: dict[int, list[Interval]], *, idle_before: float = 0.0, scrape_after: int = 1) -> dict:
    """Events: for each interval index, every engine's steps, then the clock, then one log() of all engines.
    A scrape named ``before`` after ``scrape_after`` intervals and ``after`` at the end."""
    events: list[dict[str, Any]] = []
    rounds = max(len(v) for v in per_engine.values())
    for r in range(rounds):
        if r == scrape_after:
            events.append({"op": "scrape", "name": "before"})
        if r == 1 and idle_before:
            # An idle gap: vLLM's log loop keeps running, nothing is drafted, nothing printed at INFO.
            events += [{"op": "advance", "s": 10.0}, {"op": "log"}] * int(idle_before // 10)
        seconds = 10.0
        for engine, intervals in per_engine.items():
            if r < len(intervals):
                seconds = intervals[r].seconds
                for step in intervals[r].steps:
                    events.append({"op": "step", "engine": engine, "drafts": step})
        events += [{"op": "advance", "s": seconds}, {"op": "log"}]
    events.append({"op": "scrape", "name": "after"})
    return {"k": k, "engines": sorted(per_engine), "model": "m", "events": events}


def log_text(result: dict[str, Any]) -> str:
    text = result["log_text"]
    assert isinstance(text, str)
    return text


# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def current() -> Path:
    return vllm_sources(CURRENT)


def test_the_oracle_runs_the_pinned_release(current: Path) -> None:
    result = run("vllm_oracle.py", current, scenario(3, {0: [Interval([[(3, 2), (3, 0)]])]}))
    assert result["version"] == CURRENT
    # vLLM's own line for 2 drafts, 2 of 6 tokens accepted: 1 + 2/2, positions 1/2, 1/2, 0/2, over 10 s.
    assert (
        "SpecDecoding metrics: Mean acceptance length: 2.00, Accepted throughput: 0.20 tokens/s, Drafted "
        "throughput: 0.60 tokens/s, Accepted: 2 tokens, Drafted: 6 tokens, Per-position acceptance rate: 0.500, "
        "0.500, 0.000, Avg Draft acceptance rate: 33.3%"
    ) in log_text(result)


@pytest.mark.parametrize("full", [True, False], ids=["k-token-drafts", "shorter-drafts"])
def test_log_window_recovers_vllms_figures(current: Path, full: bool) -> None:
    rng = random.Random(14 + full)
    k = 4
    intervals = [
        make_interval(rng, k, alpha, full=full, steps=steps, batch=batch)
        for alpha, steps, batch in [(0.8, 40, 2), (0.6, 90, 4), (0.75, 60, 8), (0.5, 120, 1), (0.9, 30, 16)]
    ]
    result = run("vllm_oracle.py", current, scenario(k, {0: intervals}))
    text = log_text(result)
    whole = parse_window("vllm", text)
    truth = Truth(intervals).figures(k)
    assert (whole.lines_matched, whole.lines_skipped) == (10, 0)
    spec = [s for s in whole.samples if isinstance(s, VllmSpecSample)]
    assert [s.drafts for s in spec] == [i.drafts for i in intervals]  # each line's drafts, recovered exactly
    assert all(s.drafts_exact for s in spec)
    assert whole.accept_len == pytest.approx(truth["accept_len"], rel=1e-12)
    assert whole.acceptance_rate == pytest.approx(truth["acceptance_rate"], rel=1e-12)
    assert whole.details["acceptance_rate_definition"] == "drafts_only"
    # Per-position rates are printed with 3 decimals: weighted by exact drafts, within that rounding.
    assert whole.details["per_position_acceptance"] == pytest.approx(truth["per_position"], abs=5e-4)
    assert whole.details["accepted_throughput"] == pytest.approx(truth["accepted_throughput"], rel=1e-3)
    assert whole.details["drafted_throughput"] == pytest.approx(truth["drafted_throughput"], rel=1e-3)

    # vLLM's own line for the same steps logged as one interval says the same, to its printed precision.
    merged = Interval([step for i in intervals for step in i.steps], seconds=sum(i.seconds for i in intervals))
    one = run("vllm_oracle.py", current, {**scenario(k, {0: [merged]}), "engine_lines": False})
    printed = log_text(one)
    assert f"Mean acceptance length: {whole.accept_len:.2f}," in printed
    assert f"Avg Draft acceptance rate: {100 * (whole.acceptance_rate or 0):.1f}%" in printed
    assert f"Accepted throughput: {whole.details['accepted_throughput']:.2f} tokens/s" in printed

    # The runner's windows are cut at the window's start: the first interval began before it and is left out.
    cut = parse_window("vllm", text, cut=True)
    inner = Truth(intervals[1:]).figures(k)
    assert cut.accept_len == pytest.approx(inner["accept_len"], rel=1e-12)
    assert cut.acceptance_rate == pytest.approx(inner["acceptance_rate"], rel=1e-12)
    assert cut.details["edge_lines_dropped"] == 2  # the spec line and the engine line of engine 0


def test_data_parallel_log_lines_belong_to_their_engines(current: Path) -> None:
    rng = random.Random(7)
    k = 3
    per_engine = {
        e: [make_interval(rng, k, alpha, full=True, steps=50, batch=4) for alpha in alphas]
        for e, alphas in {0: (0.9, 0.8, 0.7), 1: (0.3, 0.4, 0.5)}.items()
    }
    text = log_text(run("vllm_oracle.py", current, scenario(k, per_engine)))
    spec = [s for s in parse_window("vllm", text).samples if isinstance(s, VllmSpecSample)]
    assert [s.engine_index for s in spec] == [0, 1, 0, 1, 0, 1]
    cut = parse_window("vllm", text, cut=True)
    inner = Truth(per_engine[0][1:] + per_engine[1][1:]).figures(k)
    assert cut.accept_len == pytest.approx(inner["accept_len"], rel=1e-12)  # each engine's first line left out
    assert cut.acceptance_rate == pytest.approx(inner["acceptance_rate"], rel=1e-12)
    assert cut.details["edge_lines_dropped"] == 4


@pytest.mark.parametrize("log_format", ["color", "json"])
def test_coloured_and_json_logs_read_as_the_plain_one(current: Path, log_format: str) -> None:
    # vLLM's own formatters: ColoredFormatter (logging_utils/formatter.py, chosen by logger.py _use_color under a
    # terminal or VLLM_LOGGING_COLOR=1) wraps the level and the time in escape codes; --logging-config formatter
    # json writes pythonjsonlogger records (JSON_FORMAT, asctime "%Y-%m-%d %H:%M:%S,mmm"). Either read gives the
    # plain log's figures, the rounds' throughput included (it needs each engine line's time stamp).
    rng = random.Random(11)
    k = 3
    per_engine = {
        e: [make_interval(rng, k, alpha, full=True, steps=40, batch=4) for alpha in alphas]
        for e, alphas in {0: (0.9, 0.8, 0.7), 1: (0.3, 0.4, 0.5)}.items()
    }
    plain = parse_window("vllm", log_text(run("vllm_oracle.py", current, scenario(k, per_engine))), cut=True)
    text = log_text(run("vllm_oracle.py", current, {**scenario(k, per_engine), "log_format": log_format}))
    if log_format == "color":
        assert "\x1b[32mINFO\x1b[0m \x1b[90m" in text  # the level green, the time grey: between them, codes
    else:
        first = json.loads(text.splitlines()[0])
        # JSON_FORMAT's fields, and the extra vllm_process_name (logger.py _VllmLogRecordFactory) it adds.
        assert set(first) >= {"asctime", "levelname", "name", "processName", "process", "message"}
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", first["asctime"])
    read = parse_window("vllm", text, cut=True)
    assert plain.gen_throughput is not None and plain.accept_len is not None
    assert (read.lines_matched, read.lines_skipped) == (plain.lines_matched, plain.lines_skipped)
    assert read.accept_len == pytest.approx(plain.accept_len, rel=1e-12)
    assert read.acceptance_rate == pytest.approx(plain.acceptance_rate, rel=1e-12)
    assert read.gen_throughput == pytest.approx(plain.gen_throughput, rel=1e-12)
    assert read.integrity.whole
    engines = [s for s in read.samples if isinstance(s, VllmEngineSample)]
    assert engines and all(s.timestamp for s in engines)


def test_first_line_after_an_idle_gap_includes_the_gap(current: Path) -> None:
    # SpecDecodingLogging.last_log_time is reset only when a line is printed: the first line after 60 s of
    # idleness divides its tokens by 70 s, while the engine line beside it covers its own 10 s. A window that
    # starts when the load starts, after the gap, is cut there: that first line is left out.
    rng = random.Random(3)
    k = 4
    intervals = [make_interval(rng, k, 0.7, full=True, steps=50, batch=2) for _ in range(4)]
    text = log_text(run("vllm_oracle.py", current, scenario(k, {0: intervals}, idle_before=60)))
    spec = [s for s in parse_window("vllm", text).samples if isinstance(s, VllmSpecSample)]
    assert spec[1].elapsed_s == pytest.approx(70.0, rel=1e-3)
    assert [s.elapsed_s for s in spec[2:]] == pytest.approx([10.0, 10.0], rel=1e-3)
    lines = text.splitlines()
    second = [i for i, line in enumerate(lines) if "SpecDecoding metrics:" in line][1]
    window = "\n".join(lines[second - 1 :]) + "\n"  # from the engine line printed with it
    assert f"Avg generation throughput: {(intervals[1].accepted + intervals[1].drafts) / 10:.1f} tokens/s" in window
    cut = parse_window("vllm", window, cut=True)
    inner = Truth(intervals[2:]).figures(k)
    assert cut.details["accepted_throughput"] == pytest.approx(inner["accepted_throughput"], rel=1e-3)
    assert cut.accept_len == pytest.approx(inner["accept_len"], rel=1e-12)


@pytest.mark.parametrize("engines", [[0], [0, 1]], ids=["one-engine", "two-engines"])
def test_prometheus_window_recovers_vllms_figures(current: Path, engines: list[int]) -> None:
    rng = random.Random(11)
    k = 5
    per_engine = {
        e: [make_interval(rng, k, alpha, full=e == 0, steps=40, batch=3) for alpha in (0.6, 0.8, 0.7, 0.5)]
        for e in engines
    }
    result = run("vllm_oracle.py", current, scenario(k, per_engine, scrape_after=1))
    before, after = result["scrapes"]["before"], result["scrapes"]["after"]
    assert "# TYPE vllm:spec_decode_num_drafts_total counter" in after
    assert 'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="4"}' in after
    seconds = 30.0
    window = scrape_delta(before, after, "vllm", elapsed_s=seconds)
    truth = Truth([i for e in engines for i in per_engine[e][1:]]).figures(k)
    assert window.accept_len == pytest.approx(truth["accept_len"], rel=1e-12)
    assert window.acceptance_rate == pytest.approx(truth["acceptance_rate"], rel=1e-12)
    assert window.per_position == pytest.approx(truth["per_position"], rel=1e-12)
    assert window.gen_throughput == pytest.approx(truth["generated"] / seconds, rel=1e-12)
    assert window.resets == []


@pytest.mark.parametrize(
    ("version", "bonus"),
    [(MEAN_FORM_WITH_BONUS, True), (MEAN_FORM_NO_BONUS, False)],
    ids=["0.9.2-mean-with-bonus", "0.8.5-mean-without-bonus"],
)
def test_older_line_form_and_its_two_meanings(version: str, bonus: bool) -> None:
    # 0.8.5 .. 0.10.1 print the same text, but 0.8.5's mean is accepted / drafts, 0.9.0+'s 1 + accepted / drafts.
    root = vllm_sources(version)
    rng = random.Random(5)
    k = 3
    intervals = [make_interval(rng, k, alpha, full=True, steps=60, batch=2) for alpha in (0.7, 0.4, 0.85)]
    result = run("vllm_oracle.py", root, scenario(k, {0: intervals}))
    assert result["version"] == version
    text = log_text(result)
    assert "SpecDecoding metrics: Draft acceptance rate: " in text and "Accepted throughput" not in text
    wm = parse_window("vllm", text)
    spec = [s for s in wm.samples if isinstance(s, VllmSpecSample)]
    assert [s.form for s in spec] == ["mean"] * 3
    assert [s.bonus_in_mean for s in spec] == [bonus] * 3
    assert [s.drafts for s in spec] == [i.drafts for i in intervals]
    truth = Truth(intervals).figures(k)
    assert wm.accept_len == pytest.approx(truth["accept_len"], rel=1e-12)
    assert wm.acceptance_rate == pytest.approx(truth["acceptance_rate"], rel=1e-12)
    assert wm.details["mean_without_bonus_lines"] == (0 if bonus else 3)


def test_first_line_form_gives_the_rate_and_withholds_accept_len() -> None:
    # 0.8.3 / 0.8.4 print neither the mean nor the per-position rates: the drafts cannot be recovered, so the
    # window has no accept length (said in details), only the drafts-only rate; every line is read.
    root = vllm_sources(FIRST_FORM)
    rng = random.Random(8)
    k = 3
    intervals = [make_interval(rng, k, alpha, full=True, steps=30, batch=2) for alpha in (0.7, 0.4)]
    result = run("vllm_oracle.py", root, scenario(k, {0: intervals}))
    assert result["version"] == FIRST_FORM
    wm = parse_window("vllm", log_text(result))
    assert (wm.lines_matched, wm.lines_skipped) == (4, 0)
    spec = [s for s in wm.samples if isinstance(s, VllmSpecSample)]
    assert [s.form for s in spec] == ["old", "old"]
    assert wm.accept_len is None and wm.details["lines_without_drafts"] == 2
    assert wm.acceptance_rate == pytest.approx(Truth(intervals).figures(k)["acceptance_rate"], rel=1e-12)


def test_v0_cumulative_lines() -> None:
    """V0's counts are cumulative since the engine started; accepted tokens include those after a rejection."""
    root = vllm_sources(V0)
    rng = random.Random(9)
    k = 4
    events: list[dict[str, Any]] = []
    truth: list[dict[str, int]] = []
    for alpha, steps in [(0.8, 30), (0.5, 50), (0.7, 40), (0.9, 20)]:
        emitted = accepted_any = verify = 0
        for _ in range(steps):
            batch = [[int(rng.random() < alpha) for _ in range(k)] for _ in range(3)]
            events.append({"op": "verify", "accepted": batch})
            for row in batch:
                prefix = next((i for i, a in enumerate(row) if not a), k)
                emitted += prefix + 1
                accepted_any += sum(row)
                verify += 1
        # The worker polls every step: one poll starts the copy (5 s since the last), the next collects it.
        events += [{"op": "advance", "s": 5.0}, {"op": "step"}, {"op": "step"}, {"op": "log"}]
        truth.append({"emitted": emitted, "accepted": accepted_any, "steps": verify})
    result = run("vllm_v0_oracle.py", root, {"k": k, "events": events})
    lines = result["lines"]
    assert len(lines) == 4 and all(line.startswith("Speculative metrics: Draft acceptance rate: ") for line in lines)
    text = "".join(f"INFO 05-30 00:39:{10 + 5 * i} [metrics.py:470] {line}\n" for i, line in enumerate(lines))
    whole = parse_window("vllm", text)
    assert (whole.lines_matched, whole.lines_skipped) == (4, 0)
    steps = sum(t["steps"] for t in truth)
    assert whole.accept_len == pytest.approx(sum(t["emitted"] for t in truth) / steps, rel=1e-12)
    v0_rate = whole.details["acceptance_rate_v0_any_position"]  # any position: not acceptance_rate's definition
    assert whole.acceptance_rate is None
    assert v0_rate == pytest.approx(sum(t["accepted"] for t in truth) / (steps * k), rel=1e-12)
    assert whole.details["acceptance_rate_definition"] == "v0_any_position"
    assert result["cumulative"]["emitted"] == sum(t["emitted"] for t in truth)
    cut = parse_window("vllm", text, cut=True)  # the first line's counts are everything before the window
    inner = truth[1:]
    inner_steps = sum(t["steps"] for t in inner)
    assert cut.accept_len == pytest.approx(sum(t["emitted"] for t in inner) / inner_steps, rel=1e-12)
    cut_rate = cut.details["acceptance_rate_v0_any_position"]
    assert cut_rate == pytest.approx(sum(t["accepted"] for t in inner) / (inner_steps * k), rel=1e-12)
