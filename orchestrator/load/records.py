"""What the client saw of one request, and how chunk arrivals become token arrivals.

Times are ``time.perf_counter()`` seconds. ``sent`` is the moment the request's bytes were written to the
connection (stamped as aiohttp begins writing the body: client._Request), not the moment it was handed to the HTTP
client: with 512 requests dispatched at once the difference is the client's own backlog, which must not be
charged to the server; it is kept as ``send_delay``. A chunk may carry several tokens (a speculative engine commits all
tokens accepted in one verify step at once), so each chunk keeps a token count. The counts come, best first,
from a cumulative count the server sends in every chunk (SGLang's ``meta_info.completion_tokens``, OpenAI
``continuous_usage_stats``), else from counting the chunks that carry text, reconciled with the final usage:
when the server says 300 tokens and 100 chunks carried text, the 300 are spread over the chunks in proportion
to their text length (each keeping at least one), so a chunk with three times the text counts three tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.engines.responses import SpecFigures

__all__ = ["RequestRecord", "request_row", "spread_tokens"]


@dataclass(slots=True)
class RequestRecord:
    """One request as measured. ``error_kind`` is None for a success."""

    index: int
    warmup: bool = False
    streamed: bool = True
    dispatched: float = 0.0  # handed to the HTTP client
    sent: float = 0.0  # the request's bytes went to the connection (TTFT and e2e count from here)
    first_token: float | None = None
    end: float | None = None
    # Token-bearing chunks: arrival time and token count (after :meth:`finish`).
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    output_tokens: int = 0
    input_tokens: int | None = None
    finish_reason: str | None = None
    error_kind: str | None = None
    error: str | None = None
    status: int | None = None
    token_source: str = "chunks"  # continuous_usage | usage | chunks | none
    # Speculative figures the engine wrote into this response (see :mod:`orchestrator.engines.responses`), or None.
    spec: SpecFigures | None = None
    #: What was odd about a request that still succeeded (a stream without its end marker), or None.
    note: str | None = None
    #: The ``max_tokens`` (``max_new_tokens``, ``n_predict``) the request carried (load/workloads.py sent_max_tokens).
    max_tokens: int | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.sent

    @property
    def send_delay(self) -> float:
        """Dispatch to the wire: connection set-up plus any backlog of the client itself."""
        return max(0.0, self.sent - self.dispatched)

    @property
    def spec_accept_len(self) -> float | None:
        """This response's accept length under its engine's own definition (None without verify steps)."""
        return self.spec.accept_len(self.output_tokens) if self.spec is not None else None

    @property
    def e2e(self) -> float | None:
        return None if self.end is None else self.end - self.sent

    def fail(self, kind: str, message: str) -> None:
        self.error_kind = kind
        self.error = " ".join(message.split())[:300]  # one line, whatever the library's message looked like

    def to_dict(self) -> dict[str, object]:
        """A compact JSON-able form (times relative to the send time, in seconds)."""
        return {
            "index": self.index,
            "warmup": self.warmup,
            "ok": self.ok,
            "error_kind": self.error_kind,
            "error": self.error,
            "status": self.status,
            "send_delay_s": self.send_delay,
            "ttft_s": self.ttft,
            "e2e_s": self.e2e,
            "max_tokens": self.max_tokens,
            "output_tokens": self.output_tokens,
            "input_tokens": self.input_tokens,
            "finish_reason": self.finish_reason,
            "token_source": self.token_source,
            "chunks": len(self.chunk_times),
            "spec": self.spec.to_dict() if self.spec is not None else None,
            **({"note": self.note} if self.note is not None else {}),
        }


def request_row(record: RequestRecord, origin: float) -> dict[str, object]:
    """One line of a point's ``requests/<point>.jsonl``: when the request was sent (seconds after ``origin``,
    the window's first dispatch), what it took (TTFT, end to end, in ms), a summary of its inter-token gaps
    (each chunk's gap spread over its tokens, as the window's ITL figures spread it), its tokens, the engine's
    per-response speculative figures, and its error.

    Besides the rounded milliseconds a reader wants, each row keeps the exact values every window figure is
    computed from, so a point's requests file reproduces its record's figures exactly
    (``orchestrator/analysis/requests.py``): ``ttft_s`` and ``e2e_s`` (seconds), ``chunk_gaps_s`` (the time
    from each token-bearing chunk to the next, seconds: every inter-token gap is one of these spread over the
    next chunk's tokens), ``chunk_tokens`` (the tokens of each chunk) and ``streamed``."""
    gaps: list[float] = []
    times, counts = record.chunk_times, record.chunk_tokens
    for j in range(1, len(times)):
        k = max(1, counts[j])
        gaps.extend([(times[j] - times[j - 1]) / k * 1000.0] * k)
    itl: dict[str, object] | None = None
    if gaps:
        ordered = sorted(gaps)

        def pct(q: float) -> float:
            # numpy's linear percentile, written out (this module imports nothing heavy).
            pos = q / 100 * (len(ordered) - 1)
            low = int(pos)
            high = min(low + 1, len(ordered) - 1)
            return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)

        itl = {
            "n": len(gaps),
            "mean": round(sum(gaps) / len(gaps), 4),
            "p50": round(pct(50), 4),
            "p90": round(pct(90), 4),
            "p99": round(pct(99), 4),
            "max": round(ordered[-1], 4),
        }
    spec: dict[str, object] | None = None
    if record.spec is not None:
        spec = record.spec.to_dict()
        spec["accept_len"] = record.spec_accept_len
    ttft, e2e = record.ttft, record.e2e
    return {
        "index": record.index,
        "sent_s": round(record.sent - origin, 6),
        "send_delay_ms": round(record.send_delay * 1000.0, 4),
        "ttft_ms": round(ttft * 1000.0, 4) if ttft is not None else None,
        "e2e_ms": round(e2e * 1000.0, 4) if e2e is not None else None,
        "max_tokens": record.max_tokens,
        "output_tokens": record.output_tokens,
        "input_tokens": record.input_tokens,
        "chunks": len(times),
        "itl_ms": itl,
        "ttft_s": ttft,
        "e2e_s": e2e,
        "streamed": record.streamed,
        "chunk_tokens": list(counts),
        "chunk_gaps_s": [times[j] - times[j - 1] for j in range(1, len(times))],
        "finish_reason": record.finish_reason,
        "token_source": record.token_source,
        "spec": spec,
        "ok": record.ok,
        "error_kind": record.error_kind,
        "error": record.error,
        "status": record.status,
        **({"note": record.note} if record.note is not None else {}),
    }


def spread_tokens(total: int, weights: list[int]) -> list[int]:
    """Split ``total`` tokens over chunks in proportion to ``weights`` (rounded, keeping the sum).

    With at least as many tokens as chunks every chunk keeps one token; with fewer, some chunks get none.
    """
    count = len(weights)
    if count == 0 or total <= 0:
        return [0] * count
    weight_sum = sum(weights)
    if weight_sum <= 0:
        weights, weight_sum = [1] * count, count
    ideal = [total * w / weight_sum for w in weights]
    floor = 1 if total >= count else 0
    shares = [max(floor, int(x)) for x in ideal]
    # Settle the rounding: add where the share falls furthest below its ideal, take where it lies furthest
    # above (never below the floor; on a tie, from the largest share). Earlier chunks win remaining ties.
    while (diff := total - sum(shares)) != 0:
        if diff > 0:
            i = max(range(count), key=lambda j: (ideal[j] - shares[j], -j))
            shares[i] += 1
        else:
            i = max((j for j in range(count) if shares[j] > floor), key=lambda j: (shares[j] - ideal[j], shares[j], -j))
            shares[i] -= 1
    return shares
