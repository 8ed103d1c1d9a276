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

Per request, ``mean len = 1 + accepted / verify steps`` is printed with 2 decimals (``%5.2f``), so it only
bounds the steps: every integer n with ``1 + accepted / n`` within 0.005 of it fits (for 1400 accepted and a
printed 3.00, n = 699, 700 or 701). The other printed figures narrow that (:func:`recover_request_steps`):
n is at most ``generated`` (every verify step checked at least one drafted token: ``GGML_ASSERT(n_draft > 0)``
in ``update_slots``) and, where ``acc per pos`` is printed (``%.3f`` each, ``-lv 4``), it must give integer
counts c_i with ``|c_i / n - rate_i| <= 0.0005``, non-increasing (a step that accepted i + 1 drafts accepted
i), adding up to ``accepted`` (``n_accepted_per_pos[i]++`` for each ``i < n_accepted``, and no step accepts
more than ``common_speculative_n_max`` drafts). One n left: exact; several: the one nearest ``accepted /
(mean - 1)``, with the range kept (``verify_steps_low`` / ``verify_steps_high``) and the window's figures
from them ``bounded`` (``exactness``). With nothing accepted the mean prints 1.00 and only ``1 <= n <=
generated`` is known. A window's accept length is ``1 + sum(accepted) / sum(steps)``, its acceptance rate
``sum(accepted) / sum(generated)`` (integers: exact) and its per-position acceptance ``sum(c_i) /
sum(steps)``: the same sums llama.cpp adds into its /metrics counters when it releases the slot
(``metrics_on_prediction``), so the log window and the counter deltas over the same requests agree exactly
where the steps are exact, and within the bounds where they are not.
"""

from __future__ import annotations

import math
import re
from typing import Any

from orchestrator.engines.integrity import exactness
from orchestrator.engines.lines import candidate_lines
from orchestrator.engines.llamacpp.samples import LlamaRequestSample, LlamaSpecStatsSample
from orchestrator.engines.samples import ParseResult, to_float

__all__ = ["DEFINITIONS", "MARKERS", "aggregate_llamacpp", "parse_llamacpp", "recover_request_steps"]

# Half the printed resolution of each figure print_timings writes (tools/server/server-context.cpp):
# "mean len = %5.2f", "acc per pos = (%s)" with each entry string_format("%.3f", ...), and the times "%10.2f ms".
_MEAN_HALF = 0.005
_RATE_HALF = 0.0005
_MS_HALF = 0.005
# The widest range of step counts tried against the per-position rates (a mean of 1.00 with a few accepted
# tokens allows thousands); wider, the mean and the drafted tokens alone bound the steps.
_SEARCH_LIMIT = 20_000

_CONTEXT_MARKER = "| task "
# server_context::launch_slot_with_task (tools/server/server-context.cpp, the tree _SOURCE names) logs
# SLT_INF(slot, "processing task, ...") when a request takes a slot: __func__ cut to 12 characters
_LAUNCH = "launch_slot_"
# server_slot::release logs SLT_INF(*this, "stop processing: n_tokens = %d, truncated = %d\n") whenever a slot is
# freed: after print_timings when a request finishes, alone when it is cancelled (SERVER_TASK_TYPE_CANCEL)
_RELEASE = "stop processing:"
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
        "over the requests that finished in the window, each request's steps recovered from its 'mean len = "
        "%5.2f' (= 1 + n_draft_accepted / n_draft_verif_steps, " + _SOURCE + "), narrowed by its generated "
        "draft tokens (at least one per step) and, at -lv 4, its 'acc per pos' rates (%.3f each: integer "
        "counts adding up to the accepted tokens). A 2-decimal mean allows several step counts for a long "
        "request (1400 accepted at 3.00: 699 to 701): exactness.accept_len is 'exact' when every request's "
        "count is the only one its figures allow, else 'bounded' with the window's bounds over every count "
        "they allow (details.verify_steps_bounds); the exact figure is then on /metrics "
        "(spec_decode_num_drafts_total). llama.cpp counts only the steps that verified a draft (a step where "
        "the n-gram or draft model proposed nothing is a plain decode step), so this is tokens per drafted "
        "step, not per decode step; it equals 1 + d(llamacpp:spec_decode_num_accepted_tokens_total) / "
        "d(llamacpp:spec_decode_num_drafts_total) over the same requests. None when a drafted request accepted "
        "nothing ('mean len = 1.00': its steps are only known to lie between 1 and its generated tokens): "
        "details.accept_len_partial leaves it out, details.accept_len_bounds holds it."
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
        "i + 1 drafted tokens (drafts only, no bonus; non-increasing in i). Window: sum over requests of each "
        "one's count c_i (round(rate_i * steps) within what the 3-decimal rate allows) / sum(steps), a shorter "
        "list counting 0 at the missing positions (as llama.cpp sums its /metrics counter "
        "spec_decode_num_accepted_tokens_per_pos_total); the counts are in details.accepted_per_position. "
        "exactness.per_position_acceptance: 'exact' when every request's steps and counts are the only ones "
        "its figures allow (below 1000 steps a 3-decimal rate settles its count), else 'rounded'. None when no "
        "request printed the line or a drafted request lacks the line or its steps "
        "(details.per_position_acceptance_partial then covers the requests that have both)."
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
        "before n_gen_steps divided by n, as details.decode_tps_per_request does. The eval times are printed "
        "to 0.01 ms ('eval time = %10.2f ms'): exactness 'rounded', with the bounds of +-0.005 ms a request."
    ),
    "window_edge": (
        "llama.cpp prints a request's lines once, when it finishes (before its final response is sent), so a "
        "window holds whole requests: those that finished inside it. In a window cut from a longer log (a "
        "sweep's), a request whose 'launch_slot_: ... processing task' line is not in the window began before it "
        "(the warm-up's or the previous point's last request, whose lines reached the journal after the window "
        "opened and which the scrape before the window had already counted): it is left out "
        "(details.requests_started_before), when the window holds any such line at all (a build that prints "
        "none keeps every request). A saved log read whole keeps every request that finished in it, as the "
        "engine's counters over its span do (metrics_on_prediction when the slot is released)."
    ),
    "unlogged_requests": (
        "A request whose slot was released ('release: ... stop processing', server_slot::release) without its "
        "print_timings lines was cancelled in flight (server-context.cpp SERVER_TASK_TYPE_CANCEL calls "
        "slot.release() alone): /metrics counts its drafts (callback_on_reset -> metrics_on_prediction), the log "
        "has no figure of it. The log's accept length, acceptance rate and per-position acceptance then cover "
        "the other requests only: they are withheld as partial (details.accept_len_partial, "
        "details.acceptance_rate_partial, details.per_position_acceptance_partial), integrity "
        "'unlogged_requests', details.requests_unlogged counts them; the counters' figures are whole."
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
    """Every finished request's timing and draft figures in ``text``, one sample per request, each saying
    whether its launch is in ``text`` (``launched_in_window``, DEFINITIONS' window_edge)."""
    result = ParseResult()
    asm = _Assembler()
    launched: set[Key] = set()
    released: list[Key] = []
    for offset, line in candidate_lines(text, MARKERS):
        ctx = _CONTEXT.search(line) if _CONTEXT_MARKER in line else None
        if ctx is not None:
            asm.current = (int(ctx.group("slot")), int(ctx.group("task")))
            if _LAUNCH in line:
                launched.add(asm.current)
            elif _RELEASE in line and asm.current not in released:
                released.append(asm.current)
        metric = any(marker in line for marker in MARKERS[1:])
        if not metric:
            continue
        outcome = _read_line(line, asm, asm.current, result)
        if outcome:
            result.read(offset)
        elif outcome is False:
            result.skip(offset, line)
    for req in asm.requests:
        if launched:
            req.launched_in_window = (req.slot, req.task) in launched
        if req.accepted is not None and req.mean_len is not None:
            req.verify_steps, req.verify_steps_low, req.verify_steps_high = recover_request_steps(
                req.accepted, req.mean_len, req.generated, req.acc_per_pos
            )
    timed = {(req.slot, req.task) for req in asm.requests}
    for slot, task in released:
        # Released without print_timings: cancelled in flight (DEFINITIONS' unlogged_requests). Only a request
        # launched in the text counts, when it holds launch lines: a release at a cut window's start may follow
        # timing lines before it.
        if (slot, task) not in timed and (not launched or (slot, task) in launched):
            asm.requests.append(
                LlamaRequestSample(
                    slot=slot, task=task, launched_in_window=True if launched else None, timings_logged=False
                )
            )
    result.samples[:0] = asm.requests
    return result


def _counts_fit(steps: int, rates: list[float], accepted: int) -> tuple[list[int], list[int]] | None:
    """The lowest and highest count per position that ``steps`` verify steps allow under the printed rates
    (each count c_i with |c_i / steps - rate_i| <= 0.0005, non-increasing in i), or None when no such counts
    add up to ``accepted``. Non-increasing bounds: a count is at least every later one's lowest and at most
    every earlier one's highest; then every total between the two sums is reachable."""
    lows = [max(math.ceil(steps * (r - _RATE_HALF) - 1e-9), 0) for r in rates]
    highs = [min(math.floor(steps * (r + _RATE_HALF) + 1e-9), steps) for r in rates]
    for i in range(len(rates) - 2, -1, -1):
        lows[i] = max(lows[i], lows[i + 1])
    for i in range(1, len(rates)):
        highs[i] = min(highs[i], highs[i - 1])
    if any(lo > hi for lo, hi in zip(lows, highs, strict=True)) or not sum(lows) <= accepted <= sum(highs):
        return None
    return lows, highs


def recover_request_steps(
    accepted: int, mean_len: float, generated: int | None = None, rates: list[float] | None = None
) -> tuple[int | None, int | None, int | None]:
    """One request's verify steps from its ``draft acceptance`` line: ``(steps, low, high)``.

    ``low``..``high`` hold every count the printed figures allow (module docstring): ``mean len`` (2 decimals),
    ``generated`` (at least one drafted token per step) and ``rates`` (``acc per pos``, 3 decimals, integer
    counts adding up to ``accepted``); ``steps`` is the only one when ``low == high``, else the one nearest
    ``accepted / (mean_len - 1)``. Nothing accepted: ``(None, 1, generated)``, the mean says nothing. Figures
    that contradict each other (not a line llama.cpp printed): ``(None, None, None)``.
    """
    top = generated if generated is not None and generated > 0 else None
    if accepted <= 0:
        if top is None:
            return None, None, None
        return (1 if top == 1 else None), 1, top  # one drafted token: one step
    excess = mean_len - 1.0
    if not math.isfinite(excess) or excess + _MEAN_HALF <= 0:
        return None, None, None
    first = max(math.ceil(accepted / (excess + _MEAN_HALF) - 1e-9), 1)
    last: float = math.floor(accepted / (excess - _MEAN_HALF) + 1e-9) if excess > _MEAN_HALF else math.inf
    if top is not None:
        last = min(last, top)
    if last < first:
        return None, None, None
    target = accepted / excess if excess > 0 else float(first)
    if rates:
        low = max(first, math.ceil(accepted / len(rates) - 1e-9))  # no step accepts more than the list is long
        high = last
        if rates[0] > _RATE_HALF:  # the first position's count is at most the accepted tokens
            high = min(high, math.floor(accepted / (rates[0] - _RATE_HALF) + 1e-9))
        if low <= high and math.isfinite(high) and high - low <= _SEARCH_LIMIT:
            fits = [n for n in range(low, int(high) + 1) if _counts_fit(n, rates, accepted) is not None]
            if fits:
                return min(fits, key=lambda n: (abs(n - target), n)), fits[0], fits[-1]
        # Rates that fit no count of the mean (not a line llama.cpp printed), or too wide a range: the mean
        # and the generated tokens alone.
    if not math.isfinite(last):
        return None, first, None
    return min(max(round(target), first), int(last)), first, int(last)


def _per_position(drafted: list[LlamaRequestSample]) -> tuple[list[int] | None, int, int, bool]:
    """Accepted counts per draft position summed over the requests that printed ``acc per pos`` and have
    recovered steps, with the steps behind them, how many requests that is, and whether every count was the
    only one the request's figures allow."""
    rows = [r for r in drafted if r.acc_per_pos and r.verify_steps]
    if not rows:
        return None, 0, 0, False
    width = max(len(r.acc_per_pos) for r in rows)
    counts = [0] * width
    exact = True
    for r in rows:
        steps = r.verify_steps or 0
        fit = _counts_fit(steps, r.acc_per_pos, r.accepted or 0)
        exact = exact and fit is not None and fit[0] == fit[1] and r.verify_steps_low == r.verify_steps_high
        for i, rate in enumerate(r.acc_per_pos):
            count = round(rate * steps)  # an integer count printed as a 3-decimal ratio: exact below 1000 steps
            if fit is not None:
                count = min(max(count, fit[0][i]), fit[1][i])
            counts[i] += count
    return counts, sum(r.verify_steps or 0 for r in rows), len(rows), exact


def _steps_bounds(drafted: list[LlamaRequestSample]) -> tuple[int, int] | None:
    """The lowest and highest total of verify steps the window's drafted requests allow (None when one of them
    has no upper bound)."""
    low = high = 0
    for r in drafted:
        if r.verify_steps_low is None or r.verify_steps_high is None:
            return None
        low += r.verify_steps_low
        high += r.verify_steps_high
    return low, high


def _rate_bounds(tokens: int, ms: float, requests: int) -> tuple[float, float] | None:
    """tokens per second for times printed to 0.01 ms: each of ``requests`` times within 0.005 ms."""
    slack = _MS_HALF * requests
    if ms - slack <= 0:
        return None
    return 1000.0 * tokens / (ms + slack), 1000.0 * tokens / (ms - slack)


def aggregate_llamacpp(window: list[LlamaRequestSample], *, cut: bool = True) -> dict[str, Any]:
    """Window figures (see DEFINITIONS and docs/engines.md) from the window's requests, with the ``exactness``
    of each (orchestrator/engines/integrity.py); in a window ``cut`` from a longer log a request that began
    before it is left out, a saved log read whole keeps it (DEFINITIONS' window_edge). A request cancelled in
    flight makes the log's figures partial (DEFINITIONS' unlogged_requests)."""
    unlogged = [r for r in window if not r.timings_logged]
    requests = [r for r in window if r.timings_logged and (not cut or r.launched_in_window is not False)]
    figures = _aggregate_requests(window, requests)
    if unlogged:
        _partial(figures, unlogged)
    return figures


def _partial(figures: dict[str, Any], unlogged: list[LlamaRequestSample]) -> None:
    """The log's draft figures cover the requests it shows only: withheld as partial (unlogged_requests)."""
    details = figures["details"]
    details["requests_unlogged"] = len(unlogged)
    details["acceptance_rate_partial"] = figures["acceptance_rate"]
    if details["per_position_acceptance"] is not None:
        details["per_position_acceptance_partial"] = details["per_position_acceptance"]
    figures["accept_len"] = figures["acceptance_rate"] = details["per_position_acceptance"] = None
    for name in ("accept_len", "acceptance_rate", "per_position_acceptance"):
        figures["exactness"].pop(name, None)
    tasks = ", ".join(f"task {r.task} (slot {r.slot})" for r in unlogged[:4])
    more = f" and {len(unlogged) - 4} more" if len(unlogged) > 4 else ""
    figures["integrity"] = [
        (
            "unlogged_requests",
            f"{len(unlogged)} request(s) released without their print_timings lines, cancelled in flight ({tasks}"
            f"{more}): /metrics counts their drafts, the log does not; the log's draft figures are partial "
            "(details.accept_len_partial, details.acceptance_rate_partial)",
        )
    ]


def _aggregate_requests(window: list[LlamaRequestSample], requests: list[LlamaRequestSample]) -> dict[str, Any]:
    drafted = [r for r in requests if r.accepted is not None and r.generated]
    accepted = sum(r.accepted or 0 for r in drafted)
    generated = sum(r.generated or 0 for r in drafted)
    stepped = [r for r in drafted if r.verify_steps]
    steps = sum(r.verify_steps or 0 for r in stepped)
    exact = all(r.verify_steps_low is not None and r.verify_steps_low == r.verify_steps_high for r in stepped)
    timed = [r for r in requests if r.eval_ms and r.eval_tokens]
    eval_tokens = sum(r.eval_tokens or 0 for r in timed)
    eval_ms = sum(r.eval_ms or 0.0 for r in timed)
    prompt_tokens = sum(r.prompt_tokens or 0 for r in requests if r.prompt_ms)
    prompt_ms = sum(r.prompt_ms or 0.0 for r in requests if r.prompt_ms)
    partial = 1.0 + sum(r.accepted or 0 for r in stepped) / steps if steps > 0 else None
    pos_counts, pos_steps, pos_requests, pos_exact = _per_position(drafted)
    pos_partial = [c / pos_steps for c in pos_counts] if pos_counts is not None and pos_steps > 0 else None
    # A request whose steps cannot be recovered (0 accepted prints "mean len = 1.00") would bias the window
    # upward if left out: then the window has no log-side accept length, only a partial one and its bounds.
    accept_len = partial if len(stepped) == len(drafted) else None
    per_position = pos_partial if drafted and pos_requests == len(drafted) else None
    total = _steps_bounds(drafted) if drafted else None
    accept_bounds = (
        (1.0 + accepted / total[1], 1.0 + accepted / total[0]) if total is not None and total[0] > 0 else None
    )
    decode_tps = 1000.0 * eval_tokens / eval_ms if eval_ms > 0 else None
    predicted = 1000.0 * (eval_tokens - len(timed)) / eval_ms if eval_ms > 0 else None
    figures_exactness: dict[str, dict[str, Any]] = {}
    if accept_len is not None:
        figures_exactness["accept_len"] = (
            exactness(
                "exact",
                "1 + sum(accepted) / sum(steps): accepted tokens are printed as integers and every request's "
                "steps are the only count its 'mean len' (2 decimals), generated drafts and per-position rates allow",
            )
            if exact
            else exactness(
                "bounded",
                "some requests' 'mean len' (2 decimals) and per-position rates allow more than one step count: "
                "the bounds hold every count they allow (details.verify_steps_bounds); the exact figure is on "
                "/metrics (llamacpp:spec_decode_num_drafts_total)",
                bounds=accept_bounds,
            )
        )
    if generated > 0:
        figures_exactness["acceptance_rate"] = exactness(
            "exact", "sum(accepted) / sum(generated): integers the 'draft acceptance' line prints (%5d, %5d)"
        )
    if per_position is not None:
        figures_exactness["per_position_acceptance"] = (
            exactness("exact", "every request's steps and per-position counts are the only ones its figures allow")
            if pos_exact
            else exactness(
                "rounded",
                "each request's rates are printed with 3 decimals ('acc per pos', %.3f) and more than one count "
                "fits some of them",
                resolution=2 * _RATE_HALF,
            )
        )
    for name, value, tokens in (
        ("predicted_per_second", predicted, eval_tokens - len(timed)),
        ("decode_tps_per_request", decode_tps, eval_tokens),
    ):
        if value is not None:
            figures_exactness[name] = exactness(
                "rounded",
                "eval times printed to 0.01 ms ('eval time = %10.2f ms', print_timings); the bounds allow "
                "+-0.005 ms for each request",
                resolution=0.01,
                bounds=_rate_bounds(tokens, eval_ms, len(timed)),
            )
    return {
        "accept_len": accept_len,
        "acceptance_rate": accepted / generated if generated > 0 else None,
        "gen_throughput": None,
        "details": {
            "requests": len(requests),
            "requests_started_before": sum(1 for r in window if r.timings_logged) - len(requests),
            "requests_with_drafts": len(drafted),
            "requests_without_steps": len(drafted) - len(stepped),
            "accept_len_partial": partial,
            "accept_len_bounds": list(accept_bounds) if accept_bounds is not None else None,
            "accepted": accepted,
            "generated": generated,
            "verify_steps": steps if stepped else None,
            "verify_steps_exact": exact if stepped else None,
            "verify_steps_bounds": list(total) if total is not None else None,
            "per_position_acceptance": per_position,
            "per_position_acceptance_partial": pos_partial,
            "accepted_per_position": pos_counts,
            "requests_with_per_position": pos_requests,
            "decode_tps_per_request": decode_tps,
            "predicted_per_second": predicted,
            "prompt_tps_per_request": 1000.0 * prompt_tokens / prompt_ms if prompt_ms > 0 else None,
            "eval_tokens": eval_tokens,
        },
        "exactness": figures_exactness,
    }
