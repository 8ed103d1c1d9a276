"""The simulator's injectable faults (``--fault NAME``, repeatable), parsed into one ``Faults`` value.

fail-start          print a Python traceback while loading and exit non-zero (1)
crash-after=N       exit abruptly (code 1, after an error line) once N requests have completed
slow-start[=S]      loading takes S more seconds than --load-seconds (default 30)
http-500-rate=P     each generation request fails with HTTP 500 with probability P
stall[=P]           a generation request stops mid-response (after half its tokens) and never ends,
                    with probability P (default 1: every one); the connection stays open
bad-metrics         malformed metric lines among the good ones (log lines and one /metrics sample)
commit-bug          DDTree's commit path commits at most 2 tokens while reporting the true depth
wrong-token[=P]     a verification that accepts a wrong draft: each verify step that commits at least one
                    draft puts a wrong word in place of its last accepted draft with probability P (default
                    0.05), and the answer goes on from there as the target would after that token (its own
                    seeded continuation), so the output is no longer the autoregressive one; AR is untouched
                    (it drafts nothing), which is what the lossless check is tested against
batch-rounding[=P]  what a kernel that is not batch-invariant does at temperature 0: about P of the positions
                    of each answer (default 0.05; seeded by the request and the position, so the same for every
                    configuration) are near-ties between two tokens, and a step that computes such a position in
                    another shape than one request and one position (a decode step of two or more requests, or
                    a verify step of a chain, k + 1 positions at once) takes the other token; the text goes on
                    from there as the target would (its own seeded continuation). Alone, autoregressive answers
                    are the same each time; batched, or speculative, they differ at the near-ties: bf16
                    reductions split differently by batch size round differently (docs/trust.md, "Lossless")
drain-tail          answers of unequal length: each request stops at an EOS drawn uniformly from 1 .. its
                    max_tokens by its own seeded token stream (unless the client sets ignore_eos), so a
                    closed-loop point's batch no longer runs in lockstep and each point's last decode-log
                    intervals cover a batch that drains one request at a time, as a real workload's does; the
                    SGLang dialect then prints, as SGLang's reporter does, the last batch's size as
                    #running-req while the interval's verify steps sum every batch's size
                    (metrics_reporter.py report_decode_stats, update_spec_metrics)
idle-debug-intervals[=N]
                    the vLLM dialect runs N data-parallel engines (default 2), each request sent to the engine
                    with the fewest in flight, scanning from a start that turns (vllm/v1/engine/core_client.py
                    DPLBAsyncMPClient.get_core_engine_for_request), so at a concurrency below N some engines
                    idle; each engine logs every interval, an interval where it and the previous one were
                    idle at DEBUG, so not in the INFO log (vllm/v1/metrics/loggers.py LoggingStatLogger.log)
restart-mid-point=N[:K]
                    once N requests have completed, the server goes down and comes back as a process systemd
                    restarted would: every request in flight ends with its connection, the start-up lines are
                    printed again (each dialect's, as its engine prints them once per process start), the state
                    starts afresh (counters from zero, a new start time, a new pid in vLLM's log prefix), the
                    model loads again (--load-seconds) and the warm-up runs before it serves; with K the new
                    process drafts K tokens (--draft-tokens K: another configuration than the first). Once per
                    simulator process: the restarted one runs without the fault
counter-reset=N     once N requests have completed, every counter the dialect exports on /metrics goes back
                    to zero, as a restarted process's would, while the process goes on (the same log, pid and
                    start time, the gauges as they were, no start-up lines): a difference of two scrapes across
                    it mixes counts from before and after; the series a new process makes only when it first
                    counts (SGLang's multiprocess families) are gone until then. Once per simulator process
idle-window=N       once N requests have completed, every later generation request is answered from its prefill
                    alone (one token, finish reason "length", as a request for max_tokens 1 is): no decode step,
                    no verify call, no decode-log line, so the counters of finished requests grow while the
                    verify counter does not, and SGLang's spec gauges (set only with a decode-log line:
                    metrics_reporter.py report_decode_stats) keep the last interval before it; a window after
                    it has no verify steps, whatever a gauge says
journal-suppress=N[:K]
                    once N requests have completed, the next K log lines (default 5) are dropped and the
                    line after them comes with journald's notice before it, "Suppressed K messages from UNIT"
                    (the unit from the process's cgroup), as journald's rate limit writes it (systemd 252
                    journald-server.c dispatch_message) under the unit's match: a window holding it lost lines
coloured-log        the log as the engine's own formatter writes it under a terminal: the vllm dialect's lines
                    as vllm/logging_utils/formatter.py ColoredFormatter colours them (escape codes between the
                    level and the time), the llamacpp dialect's as common/log.cpp does with --log-colors on;
                    SGLang's logger has no colours (utils/common.py configure_logger), so not for its dialect
dribble-metrics[=N] after N /metrics answers (default 1: the first, a point's "before" scrape, is whole),
                    every later one sends its headers and then its body one byte a second, for ever: the
                    slow-loris control plane a scraper must give up on at its deadline
ignore-spec-schedule
                    the vLLM dialect takes --speculative-config's num_speculative_tokens_per_batch_size and then
                    drafts num_speculative_tokens at every batch size, as an engine that does not know the key
                    (or drops it) would: a deployed schedule the engine ignored, which drafts per draft show
duplicate-series    every counter sample of /metrics (a name ending _total) is followed by the same series
                    again with the value 0, as two registries exporting one name would: one scrape holds two
                    values for one series
nan-counters        every counter sample of /metrics (a name ending _total) has the value NaN
login-page          every generation request is answered 200 with a web page (Content-Type text/html), as a
                    login form or a proxy in front of the server answers
no-done             a streamed answer sends every token and its finish reason but no ``data: [DONE]``, and
                    keeps the connection open (no end of the body) until the client closes it
orphan-worker[=MIB] with fake GPUs (orchestrator/sim/gpus.py), start a worker process in its own session that
                    holds MIB (default 2048) on the server's GPUs and outlives the server, as a tensor-parallel
                    worker left behind by a killed server does
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from orchestrator.errors import ConfigError

__all__ = ["FAULT_NAMES", "Faults", "parse_faults"]

FAULT_NAMES = (
    "fail-start",
    "crash-after",
    "slow-start",
    "http-500-rate",
    "stall",
    "bad-metrics",
    "commit-bug",
    "wrong-token",
    "batch-rounding",
    "drain-tail",
    "idle-debug-intervals",
    "restart-mid-point",
    "counter-reset",
    "orphan-worker",
    "dribble-metrics",
    "idle-window",
    "journal-suppress",
    "coloured-log",
    "ignore-spec-schedule",
    "duplicate-series",
    "nan-counters",
    "login-page",
    "no-done",
)

DEFAULT_SLOW_START_SECONDS = 30.0
DEFAULT_WRONG_TOKEN_RATE = 0.05
DEFAULT_BATCH_ROUNDING_RATE = 0.05
DEFAULT_IDLE_DEBUG_ENGINES = 2


@dataclass(frozen=True)
class Faults:
    """Which faults are switched on, with their parameters."""

    fail_start: bool = False
    crash_after: int | None = None
    slow_start_seconds: float = 0.0
    http_500_rate: float = 0.0
    stall_rate: float = 0.0
    bad_metrics: bool = False
    commit_bug: bool = False
    wrong_token_rate: float = 0.0
    batch_rounding_rate: float = 0.0  # batch-rounding: the share of positions that are near-ties
    drain_tail: bool = False
    idle_debug_engines: int = 0  # idle-debug-intervals: the vLLM dialect's data-parallel engines (0: off)
    restart_after: int | None = None  # restart-mid-point: completed requests before the simulated restart
    restart_draft_tokens: int | None = None  # restart-mid-point's K: --draft-tokens of the restarted process
    counter_reset_after: int | None = None  # counter-reset: completed requests before /metrics counters go to 0
    orphan_worker_mib: float = 0.0  # orphan-worker: what the worker left behind holds on each GPU (0: off)
    dribble_metrics_after: int | None = None  # dribble-metrics: whole /metrics answers before the dribbling
    journal_suppress_after: int | None = None  # journal-suppress: completed requests before lines are dropped
    journal_suppress_lines: int = 0  # journal-suppress's K: lines dropped
    coloured_log: bool = False  # coloured-log: the engine's terminal colours in its lines
    ignore_spec_schedule: bool = False  # ignore-spec-schedule: draft num_speculative_tokens at every batch size
    idle_window_after: int | None = None  # idle-window: completed requests before answers come from prefill alone
    duplicate_series: bool = False  # duplicate-series: each /metrics counter twice, the second time 0
    nan_counters: bool = False  # nan-counters: each /metrics counter NaN
    login_page: bool = False  # login-page: generation answered 200 text/html
    no_done: bool = False  # no-done: a stream without [DONE] whose body never ends
    specs: tuple[str, ...] = field(default=())

    def __bool__(self) -> bool:
        return bool(self.specs)


def _number(spec: str, value: str | None, kind: type[int] | type[float], low: float, high: float) -> float:
    if value is None or value == "":
        raise ConfigError(f"fault {spec!r} needs a value (e.g. {spec.split('=')[0]}=…)", key="fault")
    try:
        number = kind(value)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise ConfigError(f"fault {spec!r}: {value!r} is not {noun}", key="fault") from None
    if not low <= number <= high:
        raise ConfigError(f"fault {spec!r}: value must be between {low:g} and {high:g}", key="fault")
    return number


def parse_faults(specs: Iterable[str]) -> Faults:
    """Parse ``--fault`` values like ``crash-after=5`` into ``Faults``; unknown names are a ``ConfigError``."""
    faults = Faults()
    seen: list[str] = []
    for raw in specs:
        spec = raw.strip()
        name, _, value = spec.partition("=")
        arg = value if "=" in spec else None
        if name == "fail-start":
            faults = replace(faults, fail_start=True)
        elif name == "crash-after":
            faults = replace(faults, crash_after=int(_number(spec, arg, int, 1, 10**9)))
        elif name == "slow-start":
            seconds = DEFAULT_SLOW_START_SECONDS if arg is None else _number(spec, arg, float, 0, 86400)
            faults = replace(faults, slow_start_seconds=seconds)
        elif name == "http-500-rate":
            faults = replace(faults, http_500_rate=_number(spec, arg, float, 0, 1))
        elif name == "stall":
            faults = replace(faults, stall_rate=1.0 if arg is None else _number(spec, arg, float, 0, 1))
        elif name == "bad-metrics":
            faults = replace(faults, bad_metrics=True)
        elif name == "commit-bug":
            faults = replace(faults, commit_bug=True)
        elif name == "wrong-token":
            rate = DEFAULT_WRONG_TOKEN_RATE if arg is None else _number(spec, arg, float, 0, 1)
            faults = replace(faults, wrong_token_rate=rate)
        elif name == "batch-rounding":
            rate = DEFAULT_BATCH_ROUNDING_RATE if arg is None else _number(spec, arg, float, 0, 1)
            faults = replace(faults, batch_rounding_rate=rate)
        elif name == "drain-tail":
            faults = replace(faults, drain_tail=True)
        elif name == "idle-debug-intervals":
            engines = DEFAULT_IDLE_DEBUG_ENGINES if arg is None else int(_number(spec, arg, int, 2, 64))
            faults = replace(faults, idle_debug_engines=engines)
        elif name == "restart-mid-point":
            after, colon, draft = (arg or "").partition(":")
            faults = replace(
                faults,
                restart_after=int(_number(spec, after, int, 1, 10**9)),
                restart_draft_tokens=int(_number(spec, draft, int, 1, 64)) if colon else None,
            )
        elif name == "counter-reset":
            faults = replace(faults, counter_reset_after=int(_number(spec, arg, int, 1, 10**9)))
        elif name == "dribble-metrics":
            faults = replace(faults, dribble_metrics_after=1 if arg is None else int(_number(spec, arg, int, 0, 10**9)))
        elif name == "idle-window":
            faults = replace(faults, idle_window_after=int(_number(spec, arg, int, 0, 10**9)))
        elif name == "coloured-log":
            faults = replace(faults, coloured_log=True)
        elif name == "ignore-spec-schedule":
            faults = replace(faults, ignore_spec_schedule=True)
        elif name == "duplicate-series":
            faults = replace(faults, duplicate_series=True)
        elif name == "nan-counters":
            faults = replace(faults, nan_counters=True)
        elif name == "login-page":
            faults = replace(faults, login_page=True)
        elif name == "no-done":
            faults = replace(faults, no_done=True)
        elif name == "journal-suppress":
            after, colon, lines = (arg or "").partition(":")
            faults = replace(
                faults,
                journal_suppress_after=int(_number(spec, after, int, 0, 10**9)),
                journal_suppress_lines=int(_number(spec, lines, int, 1, 10**6)) if colon else 5,
            )
        elif name == "orphan-worker":
            faults = replace(faults, orphan_worker_mib=2048.0 if arg is None else _number(spec, arg, float, 1, 10**7))
        else:
            raise ConfigError(f"unknown fault {name!r}; known faults: {', '.join(FAULT_NAMES)}", key="fault")
        seen.append(spec)
    return replace(faults, specs=tuple(seen))
