"""llama.cpp ``llama-server``: per-request timing and draft-acceptance lines, assembled into requests.

The definitions of every figure read here, for all engines and sources, are in docs/engines.md. Formats are
from llama.cpp's own sources, as vendored in the llama-cpp-python 0.3.36 sdist (``vendor/llama.cpp``,
reporting ``version: 0.5.0-dev``); ``print_timings`` is the same in ggml-org/llama.cpp master (commit 001d906).

When a request finishes, ``server_slot::print_timings`` (tools/server/server-context.cpp, ``print_timings``;
tools/server/server.cpp or examples/server/server.cpp in older trees) logs these lines before the final
response is sent and the slot is released, each behind ``slot print_timing: id %2d | task %d | ``
(``SLT_INF``, tools/server/server-common.h) and, when timestamps are on, a ``0.16.519.195 I `` stamp::

    prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)
           eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)
          total time = %10.2f ms / %5d tokens
       graphs reused = %10d
    draft acceptance = %0.5f (%5d accepted / %5d generated), mean len = %5.2f     (only if it drafted)
         acc per pos = (%.3f, %.3f, ...)                                         (SLT_TRC: -lv 4 only)

``draft acceptance`` = n_draft_accepted / n_draft_tokens (drafted tokens only, no bonus token); ``mean len``
= 1 + n_draft_accepted / n_draft_verif_steps (bonus included; 1.0 when no step verified a draft); ``acc per
pos`` entry i = n_accepted_per_pos[i] / n_draft_verif_steps, the share of verify steps that accepted at least
i + 1 drafted tokens (a survival curve; the list is common_speculative_n_max long). A verify step is one
target pass that checked a draft (``n_draft_verif_steps += 1`` in update_slots); steps without a draft are
not counted. In this version ``eval time``'s tokens per second is (n - 1) / t, the first token being free
from prefill (``server_slot_stats::n_gen_tps``, tools/server/server-common.h); older builds print n / t.

Variants this parser accepts: older builds print ``draft acceptance rate = ...`` without ``mean len`` (via
``SLT_CNT``, so without a slot prefix), and put the slot prefix alone on a line with the timing figures on
the following lines; lines without a slot prefix belong to the last slot/task seen. ``--log-jsonl`` wraps
each message in ``{"type": "log", "time": ..., "level": "info", "msg": "..."}`` (common/log.cpp); the
figures are read from inside it the same way. ``common_speculative_print_stats`` (common/speculative.cpp)
adds, at trace level, one ``statistics <impl>: #calls(b,g,a) = ..., #gen drafts = ...`` line per
implementation; the speculative object is shared by all slots, so these lines are cumulative since the
server started, over every slot: kept as samples, never aggregated.

Per request, ``mean len = 1 + accepted / verify steps``; the steps are recovered from it (an integer within
the 2-decimal rounding; impossible when nothing was accepted), so a window's accept length is ``1 +
sum(accepted) / sum(steps)``, its acceptance rate ``sum(accepted) / sum(generated)`` and its per-position
acceptance ``sum(round(rate_i * steps)) / sum(steps)``: the same sums llama.cpp adds into its /metrics
counters when it releases the slot (``metrics_on_prediction``), so the log window and the counter deltas over
the same requests agree exactly.
"""

from __future__ import annotations

import re
from typing import Any

from orchestrator.engines.lines import candidate_lines
from orchestrator.engines.samples import (
    LlamaRequestSample,
    LlamaSpecStatsSample,
    ParseResult,
    recover_steps,
    to_float,
)

__all__ = ["DEFINITIONS", "MARKERS", "aggregate_llamacpp", "parse_llamacpp"]

_CONTEXT_MARKER = "| task "
MARKERS = (_CONTEXT_MARKER, "draft acceptance", "acc per pos", "eval time", "total time", "#gen drafts")

_NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf|-nan)"
_CONTEXT = re.compile(r"\bid\s+(?P<slot>-?\d+)\s*\|\s*task\s+(?P<task>-?\d+)\s*\|")
_DRAFT = re.compile(
    rf"draft acceptance(?: rate)?\s*=\s*(?P<ratio>{_NUM})\s*\(\s*(?P<acc>\d+)\s+accepted\s*/\s*"
    rf"(?P<gen>\d+)\s+generated\s*\)(?:\s*,\s*mean (?:acceptance )?len(?:gth)?\s*=\s*(?P<len>{_NUM}))?"
)
_PER_POS = re.compile(r"(?:acc per pos|acceptance rate per position)\s*=\s*\((?P<pp>[^)]*)\)")
_EVAL = re.compile(
    rf"(?P<prompt>prompt )?eval time\s*=\s*(?P<ms>{_NUM})\s*ms\s*/\s*(?P<n>\d+)\s*tokens\s*"
    rf"(?:\(\s*(?P<mspt>{_NUM})\s*ms per token\s*,\s*(?P<tps>{_NUM})\s*tokens per second\s*\))?"
)
_TOTAL = re.compile(rf"total time\s*=\s*(?P<ms>{_NUM})\s*ms\s*/\s*(?P<n>\d+)\s*tokens")
_STATS = re.compile(
    r"statistics\s+(?P<impl>[^\s:]+)\s*:.*?#gen drafts\s*=\s*(?P<gd>\d+)\s*,\s*#acc drafts\s*=\s*(?P<ad>\d+)\s*,"
    r"\s*#gen tokens\s*=\s*(?P<gt>\d+)\s*,\s*#acc tokens\s*=\s*(?P<at>\d+)"
    rf"(?:\s*,\s*#mean acc len\s*=\s*(?P<len>{_NUM}))?(?:\s*,\s*#acc rate/pos\s*=\s*\((?P<pp>[^)]*)\))?"
)

_SOURCE = "tools/server/server-context.cpp print_timings (llama.cpp as vendored in llama-cpp-python 0.3.36)"
DEFINITIONS: dict[str, str] = {
    "accept_len": (
        "llama.cpp mean acceptance length ('mean len'), bonus included: 1 + sum(accepted) / sum(verify steps) "
        "over the requests that finished in the window, each request's steps recovered from its 'mean len' "
        "(= 1 + n_draft_accepted / n_draft_verif_steps, " + _SOURCE + "). llama.cpp counts only the steps "
        "that verified a draft (a step where the n-gram or draft model proposed nothing is a plain decode "
        "step), so this is tokens per drafted step, not per decode step; it equals 1 + d(llamacpp:"
        "spec_decode_num_accepted_tokens_total) / d(llamacpp:spec_decode_num_drafts_total) over the same "
        "requests. None when a drafted request's steps cannot be recovered (0 accepted prints 'mean len = "
        "1.00'): see details.accept_len_partial."
    ),
    "acceptance_rate": (
        "llama.cpp draft acceptance, drafts only (no bonus token): sum(accepted) / sum(generated draft tokens) "
        "over the window's requests ('draft acceptance = %0.5f (%5d accepted / %5d generated)', " + _SOURCE + "; "
        "'draft acceptance rate = ...' in older builds). The same ratio as d(accepted) / d(draft tokens) on "
        "/metrics and sum(timings.draft_n_accepted) / sum(timings.draft_n) over the responses."
    ),
    "per_position_acceptance": (
        "details.per_position_acceptance: llama.cpp 'acc per pos' (printed at -lv 4 only, " + _SOURCE + "), "
        "entry i = n_accepted_per_pos[i] / n_draft_verif_steps, the share of verify steps that accepted at least "
        "i + 1 drafted tokens (drafts only, no bonus; non-increasing in i). Window: sum over requests of "
        "round(rate_i * steps) / sum(steps), a shorter list counting 0 at the missing positions (as llama.cpp "
        "sums its /metrics counter spec_decode_num_accepted_tokens_per_pos_total); the counts are in "
        "details.accepted_per_position. None when no request printed the line or a drafted request lacks the "
        "line or its steps (details.per_position_acceptance_partial then covers the requests that have both)."
    ),
    "gen_throughput": (
        "None: llama-server's per-request lines do not give the server's aggregate throughput when slots run "
        "in parallel. details.decode_tps_per_request is one sequence's decode speed (sum of eval tokens / sum "
        "of eval time); the client's tokens/s or Prometheus counters give the aggregate."
    ),
    "predicted_per_second": (
        "details.predicted_per_second: llama.cpp's own per-sequence decode rate, sum(eval tokens - 1) / sum(eval "
        "time) over the window's requests (server_slot_stats::n_gen_tps, tools/server/server-common.h: the first "
        "token comes free from prefill); what timings.predicted_per_second says per request and what the gauge "
        "llamacpp:predicted_tokens_seconds says for the requests released since the previous scrape. Builds "
        "before n_gen_steps divided by n, as details.decode_tps_per_request does."
    ),
    "window_edge": (
        "llama.cpp prints a request's lines once, when it finishes (before its final response is sent), so a "
        "window holds whole requests: those that finished inside it. Nothing is clipped or dropped."
    ),
}


Key = tuple[int | None, int | None]


def _rates(text: str | None) -> list[float]:
    if not text:
        return []
    rates = [to_float(part.strip()) for part in text.split(",")]
    return [r for r in rates if r is not None] if all(r is not None for r in rates) else []


class _Assembler:
    """Collects the lines of each request; a field seen twice for one slot/task starts a new request."""

    def __init__(self) -> None:
        self.requests: list[LlamaRequestSample] = []
        self.open: dict[Key, LlamaRequestSample] = {}
        self.current: Key = (None, None)

    def request(self, key: Key, field_name: str) -> LlamaRequestSample:
        req = self.open.get(key)
        if req is None or getattr(req, field_name) not in (None, []):
            req = LlamaRequestSample(slot=key[0], task=key[1])
            self.open[key] = req
            self.requests.append(req)
        return req


def _stats_line(line: str) -> LlamaSpecStatsSample | None:
    m = _STATS.search(line)
    if m is None:
        return None
    return LlamaSpecStatsSample(
        impl=m.group("impl"),
        gen_drafts=int(m.group("gd")),
        acc_drafts=int(m.group("ad")),
        gen_tokens=int(m.group("gt")),
        acc_tokens=int(m.group("at")),
        mean_acc_len=to_float(m.group("len")),
        acc_rate_per_pos=_rates(m.group("pp")),
    )


def _read_line(line: str, asm: _Assembler, key: Key, result: ParseResult) -> bool | None:
    """Fold one candidate line into the requests: True when read, False when it carries a marker but cannot
    be read, None when it is not a server request line at all (llama_perf's "eval time = ... runs")."""
    if "draft acceptance" in line:
        m = _DRAFT.search(line)
        if m is None:
            return False
        req = asm.request(key, "accepted")
        req.accepted, req.generated = int(m.group("acc")), int(m.group("gen"))
        req.draft_acceptance = to_float(m.group("ratio"))
        req.mean_len = to_float(m.group("len"))
        pp = _PER_POS.search(line, m.end())
        if pp is not None:
            req.acc_per_pos = _rates(pp.group("pp"))
        return True
    if "acc per pos" in line:
        pp = _PER_POS.search(line)
        if pp is None:
            return False
        asm.request(key, "acc_per_pos").acc_per_pos = _rates(pp.group("pp"))
        return True
    if "#gen drafts" in line:
        stats = _stats_line(line)
        if stats is None:
            return False
        result.samples.append(stats)
        return True
    if "eval time" in line:
        m = _EVAL.search(line)
        if m is None:
            return None if re.search(r"eval time\s*=.*\d+\s*runs", line) else False
        if m.group("prompt"):
            req = asm.request(key, "prompt_tokens")
            req.prompt_ms, req.prompt_tokens = to_float(m.group("ms")), int(m.group("n"))
        else:
            req = asm.request(key, "eval_tokens")
            req.eval_ms, req.eval_tokens = to_float(m.group("ms")), int(m.group("n"))
            req.eval_tps = to_float(m.group("tps"))
        return True
    if "total time" in line:
        m = _TOTAL.search(line)
        if m is None:
            return False
        req = asm.request(key, "total_tokens")
        req.total_ms, req.total_tokens = to_float(m.group("ms")), int(m.group("n"))
        return True
    return True  # a context-only line ("| task N |" with something else): nothing to read, nothing skipped


def parse_llamacpp(text: str) -> ParseResult:
    """Every finished request's timing and draft figures in ``text``, one sample per request."""
    result = ParseResult()
    asm = _Assembler()
    for offset, line in candidate_lines(text, MARKERS):
        ctx = _CONTEXT.search(line) if _CONTEXT_MARKER in line else None
        if ctx is not None:
            asm.current = (int(ctx.group("slot")), int(ctx.group("task")))
        metric = any(marker in line for marker in MARKERS[1:])
        if not metric:
            continue
        outcome = _read_line(line, asm, asm.current, result)
        if outcome:
            result.read(offset)
        elif outcome is False:
            result.skip(offset, line)
    for req in asm.requests:
        if req.accepted is not None and req.mean_len is not None:
            req.verify_steps, _exact = recover_steps(req.accepted, req.mean_len)
    result.samples[:0] = asm.requests
    return result


def _per_position(drafted: list[LlamaRequestSample]) -> tuple[list[int] | None, int, int]:
    """Accepted counts per draft position summed over the requests that printed ``acc per pos`` and have
    recovered steps, with the steps behind them and how many requests that is."""
    rows = [r for r in drafted if r.acc_per_pos and r.verify_steps]
    if not rows:
        return None, 0, 0
    width = max(len(r.acc_per_pos) for r in rows)
    counts = [0] * width
    for r in rows:
        steps = r.verify_steps or 0
        for i, rate in enumerate(r.acc_per_pos):
            counts[i] += round(rate * steps)  # an integer count printed as a 3-decimal ratio: exact below 1000 steps
    return counts, sum(r.verify_steps or 0 for r in rows), len(rows)


def aggregate_llamacpp(requests: list[LlamaRequestSample]) -> dict[str, Any]:
    """Window figures (see DEFINITIONS and docs/engines.md) from the window's requests."""
    drafted = [r for r in requests if r.accepted is not None and r.generated]
    accepted = sum(r.accepted or 0 for r in drafted)
    generated = sum(r.generated or 0 for r in drafted)
    stepped = [r for r in drafted if r.verify_steps]
    steps = sum(r.verify_steps or 0 for r in stepped)
    exact = all(
        r.accepted is not None and r.mean_len is not None and recover_steps(r.accepted, r.mean_len)[1] for r in stepped
    )
    timed = [r for r in requests if r.eval_ms and r.eval_tokens]
    eval_tokens = sum(r.eval_tokens or 0 for r in timed)
    eval_ms = sum(r.eval_ms or 0.0 for r in timed)
    prompt_tokens = sum(r.prompt_tokens or 0 for r in requests if r.prompt_ms)
    prompt_ms = sum(r.prompt_ms or 0.0 for r in requests if r.prompt_ms)
    partial = 1.0 + sum(r.accepted or 0 for r in stepped) / steps if steps > 0 else None
    pos_counts, pos_steps, pos_requests = _per_position(drafted)
    pos_partial = [c / pos_steps for c in pos_counts] if pos_counts is not None and pos_steps > 0 else None
    return {
        # A request whose steps cannot be recovered (0 accepted prints "mean len = 1.00") would bias the
        # window upward if left out: then the window has no log-side accept length, only a partial one.
        "accept_len": partial if len(stepped) == len(drafted) else None,
        "acceptance_rate": accepted / generated if generated > 0 else None,
        "gen_throughput": None,
        "details": {
            "requests": len(requests),
            "requests_with_drafts": len(drafted),
            "requests_without_steps": len(drafted) - len(stepped),
            "accept_len_partial": partial,
            "accepted": accepted,
            "generated": generated,
            "verify_steps": steps if stepped else None,
            "verify_steps_exact": exact if stepped else None,
            "per_position_acceptance": pos_partial if drafted and pos_requests == len(drafted) else None,
            "per_position_acceptance_partial": pos_partial,
            "accepted_per_position": pos_counts,
            "requests_with_per_position": pos_requests,
            "decode_tps_per_request": 1000.0 * eval_tokens / eval_ms if eval_ms > 0 else None,
            "predicted_per_second": 1000.0 * (eval_tokens - len(timed)) / eval_ms if eval_ms > 0 else None,
            "prompt_tps_per_request": 1000.0 * prompt_tokens / prompt_ms if prompt_ms > 0 else None,
            "eval_tokens": eval_tokens,
        },
    }
