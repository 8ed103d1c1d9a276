"""Figures from the measured requests of one load run (warm-up requests never reach this module).

Definitions (times from the client's clock; tokens of successful requests only, as vLLM and SGLang count):

- ``output_tok_s``: output tokens / duration. ``requests_per_s``: successful requests / duration.
- ``steady_output_tok_s``: tokens that arrived inside the steady window / its length. Closed loop: from the
  moment every worker of the first wave has its first token to the first completion after the last request
  was sent (from then on fewer than C requests are in flight). Open loop: from the first completion (the
  system has filled) to the last arrival. When that window is empty (too few requests), the plain figure is
  repeated and ``steady_window_s`` is None.
- ``ttft_ms``: send to the first token. ``e2e_ms``: send to the end of the response. "Send" is when the
  request's bytes were written to the connection; ``send_delay_ms`` is the time from dispatch to then
  (connection set-up, and the client's own backlog: a large p99 there says the client was overloaded).
- ``duration_s``: from the first dispatch to the last end.
- ``max_tokens_sent``: the distinct output-length limits the measured requests carried (what was sent, beside
  the configured ``max_tokens``: they differ only under ``load.prompt_max_tokens`` or a synthetic ``out``).
- ``itl_ms``: gaps between token-bearing chunks, each gap spread over the tokens of the chunk that ends it
  (a chunk of 3 tokens 30 ms after the previous one gives three samples of 10 ms), pooled over requests.
- ``tpot_ms``: per request, (end - first token) / (output tokens - 1), streamed requests with 2+ tokens.
- ``per_user_tok_s``: per request, the decode rate a user sees, (output tokens - 1) / (end - first token),
  averaged over requests.
- Percentiles interpolate linearly (``numpy.percentile``'s default, as the vLLM and SGLang scripts do).
- ``spec``: from the speculative figures the engine wrote into each response, read where it writes them
  (``orchestrator/engines/<name>/responses.py`` names the field and the engine file for each source).
  ``accept_len`` (also ``accept_len_token_weighted``) = sum of numerators / sum of verify steps over the
  responses, the same weighting as a window of the engine's counters; ``accept_len_request_weighted`` = the
  mean of each response's own accept length. The numerator is the engine's: SGLang (``sglext.spec_tokens_details`` on
  chat/completions, ``meta_info`` on ``/generate``) completion tokens / ``spec_verify_ct``; vLLM
  (``metrics.speculative_decoding``) 1 + ``num_accepted_draft_tokens`` / ``num_spec_steps``.
  ``acceptance_rate`` = sum of accepted drafts / sum of proposed drafts, drafts only on every engine.
  llama.cpp's ``timings`` carry drafted and accepted tokens but no step count, so they give
  ``acceptance_rate`` = sum(accepted) / sum(drafted) (the log line's and the counters' definition)
  and ``tokens_per_pass`` = tokens / (tokens - accepted): every target forward pass yields its accepted
  drafts plus one token (the prompt's pass and steps without a draft included; a partial draft on a model
  that restores a checkpoint takes two passes for one extra token). That is at most llama.cpp's mean
  length, which counts only steps that verified a draft, so no ``accept_len`` comes from llama.cpp timings.
  ``definitions`` in the figures says all this per source, with the engine file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import chain
from typing import Any

import numpy as np

from orchestrator.load.records import RequestRecord
from orchestrator.load.spec import summarize_spec

__all__ = ["distribution", "spec_summary", "steady_window", "summarize"]

EMPTY = {"mean": None, "p50": None, "p90": None, "p99": None}


def distribution(values_s: Iterable[float] | np.ndarray, scale: float = 1000.0) -> dict[str, float | None]:
    """mean, p50, p90 and p99 of ``values_s`` times ``scale`` (seconds to milliseconds by default)."""
    data = values_s.astype(float) if isinstance(values_s, np.ndarray) else np.fromiter(values_s, dtype=float)
    if data.size == 0:
        return dict(EMPTY)
    data *= scale
    p50, p90, p99 = np.percentile(data, [50, 90, 99])
    return {"mean": _r(data.mean()), "p50": _r(p50), "p90": _r(p90), "p99": _r(p99)}


def steady_window(records: list[RequestRecord], open_loop: bool, concurrency: int | None) -> tuple[float, float] | None:
    """The (start, end) of the steady-state window, or None if there is none (see the module docstring)."""
    if not records:
        return None
    by_index = sorted(records, key=lambda r: r.index)
    last_dispatch = max(r.dispatched for r in records)
    ends = [r.end for r in records if r.end is not None]
    if not ends:
        return None
    if open_loop:
        start = min(ends)
        end = last_dispatch
    else:
        wave = by_index[: max(1, concurrency or 1)]
        firsts = [r.first_token if r.first_token is not None else r.end for r in wave]
        start = max(t for t in firsts if t is not None)
        after = [t for t in ends if t >= last_dispatch]
        end = min(after) if after else max(ends)
    return (start, end) if end > start else None


def spec_summary(records: list[RequestRecord]) -> dict[str, Any]:
    """Speculative-decoding figures from response metadata (None where no response carried any)."""
    return summarize_spec((r.spec, r.output_tokens) for r in records)


def summarize(
    records: list[RequestRecord],
    *,
    open_loop: bool,
    concurrency: int | None,
    started: float | None,
    ended: float | None,
) -> dict[str, Any]:
    """Every figure of one run (the JSON body of ``LoadResult.to_dict`` without the settings)."""
    ok = [r for r in records if r.ok]
    errors = Counter(r.error_kind or "unknown" for r in records if not r.ok)
    first_send = min((r.dispatched for r in records), default=started)
    last_end = max((r.end for r in records if r.end is not None), default=ended)
    duration = (last_end - first_send) if first_send is not None and last_end is not None else 0.0
    output_tokens = sum(r.output_tokens for r in ok)
    known_inputs = [r.input_tokens for r in ok if r.input_tokens is not None]
    streamed = [r for r in ok if r.streamed]

    # Every token-bearing chunk of the streamed requests, flat and in order (numpy: this is per token).
    times, counts, starts = _flat(streamed)
    gaps = np.diff(times) / counts[1:]
    keep = np.ones(gaps.size, dtype=bool)
    keep[starts[(starts > 0) & (starts < times.size)] - 1] = False  # no gap from one request to the next
    itl = np.repeat(gaps[keep], counts[1:][keep])  # a gap ending in a chunk of k tokens counts k times

    tpot: list[float] = []
    user_rates: list[float] = []
    for r in streamed:
        if r.first_token is not None and r.end is not None and r.output_tokens > 1:
            decode = r.end - r.first_token
            tpot.append(decode / (r.output_tokens - 1))
            if decode > 0:
                user_rates.append((r.output_tokens - 1) / decode)

    window = steady_window(ok, open_loop, concurrency)
    output_tok_s = output_tokens / duration if duration > 0 else 0.0
    if window is not None:
        start, end = window
        all_times, all_counts, _ = _flat(ok)
        inside = int(all_counts[(all_times >= start) & (all_times <= end)].sum())
        steady = inside / (end - start)
        steady_window_s: float | None = _r(end - start, 4)
    else:
        steady = output_tok_s
        steady_window_s = None

    return {
        "requests": len(records),
        "completed": len(ok),
        "errors": len(records) - len(ok),
        "errors_by_kind": dict(sorted(errors.items())),
        "output_tokens": output_tokens,
        "max_tokens_sent": sorted({r.max_tokens for r in records if r.max_tokens is not None}) or None,
        "input_tokens": sum(known_inputs) if known_inputs else None,
        "duration_s": _r(duration, 4),
        "output_tok_s": _r(output_tok_s),
        "steady_output_tok_s": _r(steady),
        "steady_window_s": steady_window_s,
        "per_user_tok_s": _r(float(np.mean(user_rates))) if user_rates else None,
        "requests_per_s": _r(len(ok) / duration, 4) if duration > 0 else 0.0,
        "ttft_ms": distribution(r.ttft for r in ok if r.ttft is not None),
        "itl_ms": distribution(itl),
        "tpot_ms": distribution(tpot),
        "e2e_ms": distribution(r.e2e for r in ok if r.e2e is not None),
        "send_delay_ms": distribution(r.send_delay for r in records),
        "finish_reasons": dict(sorted(Counter(r.finish_reason or "none" for r in ok).items())),
        "token_sources": dict(sorted(Counter(r.token_source for r in ok).items())),
        "spec": spec_summary(ok),
        # Requests whose stream never sent its end marker, taken as complete at their finish reason (the
        # client's note on each, in requests/*.jsonl): only when there are any.
        **({"without_done": without_done} if (without_done := sum(1 for r in ok if r.note)) else {}),
    }


def _flat(records: list[RequestRecord]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The chunk times and token counts of ``records``, one after the other, and where each record starts."""
    lengths = np.fromiter((len(r.chunk_times) for r in records), dtype=np.int64, count=len(records))
    total = int(lengths.sum())
    times = np.fromiter(chain.from_iterable(r.chunk_times for r in records), dtype=float, count=total)
    counts = np.fromiter(chain.from_iterable(r.chunk_tokens for r in records), dtype=np.int64, count=total)
    starts = np.cumsum(lengths) - lengths
    return times, counts, starts


def _r(value: float, digits: int = 3) -> float:
    return round(float(value), digits)
