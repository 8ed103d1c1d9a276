"""Windows on an engine's stats ticks (orchestrator/sweep/closing.py): opened after a tick, closed by the tick
after the load, or marked open; with a log that grows as a server's would (the lines are vLLM's, from the real
capture in tests/data/vllm-cpu)."""

from __future__ import annotations

import threading
from pathlib import Path

from orchestrator.metrics import parse_window
from orchestrator.sweep.closing import Closed, close_window, idle_at_end, open_window, wait_bound

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm-cpu"
LINES = (DATA / "c2.closed.log").read_text().splitlines(keepends=True)
TICK = [i for i, line in enumerate(LINES) if "Engine 000:" in line]
COMMAND = "env VLLM_LOG_STATS_INTERVAL=2 python -m vllm.entrypoints.openai.api_server"


class GrowingLog:
    """A log whose lines appear one per read (each journal_since/journal_cursor call is one poll)."""

    def __init__(self, lines: list[str], shown: int = 0) -> None:
        self.lines, self.shown = lines, shown

    def journal_cursor(self) -> str:
        return str(self.shown)

    def journal_since(self, cursor: str) -> str:
        text = "".join(self.lines[int(cursor) : self.shown])
        self.shown = min(self.shown + 1, len(self.lines))
        return text


def test_a_window_opens_after_the_next_tick_and_its_lines() -> None:
    prior = [
        "(APIServer pid=1) INFO 12-03 16:20:40 [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 9.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs\n",
        "INFO: GET /metrics\n",
    ]
    log = GrowingLog(prior + LINES)
    opened = open_window("vllm", log, command=COMMAND, environment={}, stop=threading.Event(), poll=0.0)
    assert opened.aligned and opened.tick_seen
    assert int(opened.cursor) >= 1  # after the tick line


def test_a_quiet_log_opens_aligned_after_a_whole_interval() -> None:
    clock = iter(float(t) for t in range(1000))
    log = GrowingLog(["INFO: GET /health\n"] * 3)
    opened = open_window(
        "vllm", log, command=COMMAND, environment={}, stop=threading.Event(), clock=lambda: next(clock), poll=0.0
    )
    assert opened.aligned and not opened.tick_seen
    assert opened.waited_s >= 2.0  # a whole interval at least: an idle engine's ticks are at DEBUG


def test_an_engine_without_ticks_opens_at_once_unaligned() -> None:
    log = GrowingLog(["x\n"])
    opened = open_window(
        "sglang", log, command="python -m sglang.launch_server", environment={}, stop=threading.Event()
    )
    assert not opened.aligned and opened.waited_s == 0.0


def test_closing_waits_for_the_first_tick_after_the_load_and_its_spec_line() -> None:
    end_of_load = TICK[0] + 2  # the first tick and its spec line, then the last answers
    log = GrowingLog(LINES, shown=end_of_load + 1)
    text = "".join(LINES[:end_of_load])
    closed = close_window(
        "vllm", text, lambda: log.journal_since("0"), command=COMMAND, environment={}, stop=threading.Event(), poll=0.0
    )
    assert closed.closed is True
    assert closed.text.count("SpecDecoding metrics:") == 2  # the last interval's line is in


def test_closing_without_a_tick_in_time_leaves_the_window_open() -> None:
    clock = iter(float(t) for t in range(1000))
    text = "".join(LINES[: TICK[0] + 2])
    closed = close_window(
        "vllm",
        text,
        lambda: text,
        command=COMMAND,
        environment={},
        stop=threading.Event(),
        clock=lambda: next(clock),
        poll=0.0,
    )
    assert closed.closed is False and closed.open_detail() is not None
    assert closed.waited_s >= wait_bound(2.0)


def test_closing_waits_only_when_the_engine_is_seen_ticking() -> None:
    text = "INFO: POST /v1/chat/completions\n"
    closed = close_window("vllm", text, lambda: text, command=COMMAND, environment={}, stop=threading.Event())
    assert closed.closed is None and closed.text == text


def test_an_aligned_window_counts_its_first_lines() -> None:
    text = "".join(LINES)
    cut = parse_window("vllm", text, cut=True)
    aligned = parse_window("vllm", text, cut=True, aligned=True)
    assert aligned.details["accepted"] == 101 and aligned.details["window_aligned"]
    assert cut.details["accepted"] == 51  # the edge rule leaves the first spec line out of a cut window


def _close_quiet(text: str, stop: threading.Event | None = None) -> Closed:
    """close_window of ``text`` read when the load ended, with no tick after it (the engine went quiet at INFO)."""
    clock = iter(float(t) for t in range(1000))
    return close_window(
        "vllm",
        text,
        lambda: text,
        command=COMMAND,
        environment={},
        stop=stop or threading.Event(),
        clock=lambda: next(clock),
        poll=0.0,
    )


def test_a_late_read_holding_the_ticks_after_the_load_is_closed_by_the_idle_tick() -> None:
    # The read came late (a short interval, a loaded machine): the tick after the load (34.0 tokens/s, Running 0)
    # and the idle one after it are in it already, and vLLM logs the next idle interval at DEBUG: no tick comes.
    text = "".join(LINES)
    assert "Avg generation throughput: 0.0 tokens/s, Running: 0 reqs" in LINES[TICK[-1]]
    closed = _close_quiet(text)
    assert closed.closed is True and closed.idle and closed.text == text and closed.open_detail() is None
    assert closed.waited_s >= wait_bound(2.0)  # it waited for a tick first
    assert idle_at_end("vllm", text)


def test_a_quiet_engine_whose_last_tick_did_something_leaves_the_window_open() -> None:
    # the last tick is the one after the load, which generated tokens: the idle one never came (a stalled loop)
    text = "".join(LINES[: TICK[1] + 2])
    assert not idle_at_end("vllm", text)
    closed = _close_quiet(text)
    assert closed.closed is False and not closed.idle
    # and a stop ends the wait open, idle ticks or not
    stop = threading.Event()
    stop.set()
    assert _close_quiet("".join(LINES), stop).closed is False


def test_every_engine_s_last_tick_must_be_idle() -> None:
    idle = LINES[TICK[-1]]
    busy = LINES[TICK[1]]
    two = [idle, busy.replace("Engine 000:", "Engine 001:")]
    assert not idle_at_end("vllm", "".join(two))  # engine 1's last interval generated tokens
    assert idle_at_end("vllm", "".join([*two, idle.replace("Engine 000:", "Engine 001:")]))
    assert not idle_at_end("vllm", "".join([idle, busy]))  # one engine: its last tick counts, not an earlier one
    # an idle interval with a request still waiting is not the end (more will be logged)
    assert not idle_at_end("vllm", idle.replace("Waiting: 0 reqs", "Waiting: 1 reqs"))
    # V0 and aggregated logging print no engine index: one engine
    assert idle_at_end("vllm", idle.replace("Engine 000: ", ""))
    assert not idle_at_end("sglang", idle)  # an engine without idle ticks never closes this way
