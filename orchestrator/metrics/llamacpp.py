"""llama.cpp ``llama-server``: per-request timing and draft-acceptance lines, assembled into requests.

When a slot releases a request, ``print_timings`` (tools/server/server-context.cpp; server.cpp before) logs,
each line behind ``slot print_timing: id %2d | task %d | `` (and a ``0.16.519.195 I `` stamp at higher
verbosity)::

    prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)
           eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)
          total time = %10.2f ms / %5d tokens
    draft acceptance = %0.5f (%5d accepted / %5d generated), mean len = %5.2f
         acc per pos = (%.3f, %.3f, ...)                                        (trace level only)

Variants this parser accepts: older builds print ``draft acceptance rate = ...`` without ``mean len``, and
put the slot prefix alone on a line with the figures on the following lines; some builds print ``mean
acceptance length = L, acceptance rate per position = (...)`` on the acceptance line. Lines without a slot
prefix belong to the last slot/task seen. The speculative module's ``statistics <impl>: #gen drafts = ...``
lines are cumulative per slot, so they are kept as samples but not aggregated.

Per request, ``mean len = 1 + accepted / verify steps`` (bonus included); the verify steps are recovered
from it (an integer within the 2-decimal rounding), so a window's accept length is ``1 + sum(accepted) /
sum(steps)`` and its acceptance rate ``sum(accepted) / sum(generated)``.
"""

from __future__ import annotations

import re
from typing import Any

from orchestrator.metrics.lines import candidate_lines
from orchestrator.metrics.samples import (
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

DEFINITIONS: dict[str, str] = {
    "accept_len": (
        "llama.cpp mean acceptance length, bonus included: 1 + sum(accepted) / sum(verify steps) over the "
        "window's requests, each request's steps recovered from its 'mean len' (= 1 + accepted / steps). "
        "llama.cpp counts only the steps that verified a draft (a step where the n-gram or draft model "
        "proposed nothing is a plain decode step), so this is tokens per drafted step, not per decode step. "
        "None when a drafted request's steps cannot be recovered (0 accepted): see details.accept_len_partial."
    ),
    "acceptance_rate": (
        "llama.cpp draft acceptance: sum(accepted) / sum(generated draft tokens) over the window's requests."
    ),
    "gen_throughput": (
        "None: llama-server's per-request lines do not give the server's aggregate throughput when slots run "
        "in parallel. details.decode_tps_per_request is one sequence's decode speed (sum of eval tokens / sum "
        "of eval time); the client's tokens/s or Prometheus counters give the aggregate."
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


def aggregate_llamacpp(requests: list[LlamaRequestSample]) -> dict[str, Any]:
    """Window figures (see DEFINITIONS) from the window's requests."""
    drafted = [r for r in requests if r.accepted is not None and r.generated]
    accepted = sum(r.accepted or 0 for r in drafted)
    generated = sum(r.generated or 0 for r in drafted)
    stepped = [r for r in drafted if r.verify_steps]
    steps = sum(r.verify_steps or 0 for r in stepped)
    eval_tokens = sum(r.eval_tokens or 0 for r in requests if r.eval_ms)
    eval_ms = sum(r.eval_ms or 0.0 for r in requests if r.eval_ms)
    prompt_tokens = sum(r.prompt_tokens or 0 for r in requests if r.prompt_ms)
    prompt_ms = sum(r.prompt_ms or 0.0 for r in requests if r.prompt_ms)
    partial = 1.0 + sum(r.accepted or 0 for r in stepped) / steps if steps > 0 else None
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
            "decode_tps_per_request": 1000.0 * eval_tokens / eval_ms if eval_ms > 0 else None,
            "prompt_tps_per_request": 1000.0 * prompt_tokens / prompt_ms if prompt_ms > 0 else None,
            "eval_tokens": eval_tokens,
        },
    }
