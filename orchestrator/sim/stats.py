"""What the simulated server counts: cumulative counters, the current log interval, and ``/metrics`` text.

Counting rules (the ones a client cross-checks against):
- ``verify_steps`` counts one per request per verify pass (SGLang's forward count, summed over the batch), and
  only while speculating; a request's ``spec_verify_ct`` counts the same for that request.
- ``accepted_tokens`` counts committed drafts, the bonus token excluded; ``draft_tokens`` counts drafted nodes.
  So over any window, accept length = 1 + d(accepted) / d(verify steps) = committed / verify steps.
- ``generation_tokens`` counts every completion token, including the one each prefill produces.
- Under ``ar`` nothing is speculative: the ``spec_*`` counters and gauges stay 0, ``Decode batch`` lines carry
  no accept fields, and ``/get_server_info`` has no ``avg_spec_accept_length`` (as with SGLang).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Interval", "ServerStats", "render_prometheus"]


@dataclass
class Interval:
    """Decode steps since the last ``Decode batch`` line."""

    started: float
    steps: int = 0
    request_steps: int = 0
    tokens: int = 0  # decode tokens committed
    drafted: int = 0
    reported_drafts: int = 0  # accepted drafts as the commit path reports them (commit-bug makes them differ)
    accepted_depth: int = 0

    @property
    def accept_length(self) -> float:
        return self.tokens / self.request_steps if self.request_steps else 0.0

    @property
    def accept_rate(self) -> float:
        """Committed drafts (tokens minus one bonus token per request step) over drafted tokens."""
        return (self.tokens - self.request_steps) / self.drafted if self.drafted else 0.0

    def per_request(self, value: int) -> float:
        return value / self.request_steps if self.request_steps else 0.0


@dataclass
class ServerStats:
    """Cumulative counters and the last interval's gauges, shared by the engine (writer) and the HTTP side."""

    model: str
    speculative: bool
    verify_steps: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    generation_tokens: int = 0
    prompt_tokens: int = 0
    requests_finished: int = 0
    decode_steps: int = 0
    spec_committed: int = 0  # tokens committed by verify passes (for the cumulative accept length)
    # Gauges.
    running: int = 0
    queued: int = 0
    kv_tokens: int = 0
    token_usage: float = 0.0
    last_accept_length: float = 0.0
    last_accept_rate: float = 0.0
    last_throughput: float = 0.0
    interval: Interval = field(default_factory=lambda: Interval(started=0.0))

    @property
    def avg_spec_accept_length(self) -> float | None:
        """Cumulative since start, as ``/get_server_info`` reports it; None before the first verify step."""
        if not self.speculative or not self.verify_steps:
            return None
        return self.spec_committed / self.verify_steps

    def close_interval(self, now: float) -> Interval:
        """End the current interval at ``now``, update the gauges from it, and start a new one."""
        done = self.interval
        elapsed = now - done.started
        self.last_throughput = done.tokens / elapsed if elapsed > 0 else 0.0
        if self.speculative:
            self.last_accept_length = done.accept_length
            self.last_accept_rate = done.accept_rate
        self.interval = Interval(started=now)
        return done


def render_prometheus(stats: ServerStats, *, bad_line: bool = False) -> str:
    """``/metrics`` in the Prometheus text format with SGLang's ``sglang:`` names and a ``model_name``
    label. ``bad_line`` adds one malformed sample (the ``bad-metrics`` fault)."""
    label = '{model_name="' + stats.model.replace("\\", "\\\\").replace('"', '\\"') + '"}'
    gauges = (
        ("sglang:spec_accept_length", "Accept length of the last decode log interval", stats.last_accept_length),
        ("sglang:spec_accept_rate", "Accept rate of the last decode log interval", stats.last_accept_rate),
        ("sglang:gen_throughput", "Generation throughput of the last interval (token/s)", stats.last_throughput),
        ("sglang:num_running_reqs", "Running requests", stats.running),
        ("sglang:num_queue_reqs", "Waiting requests", stats.queued),
        ("sglang:num_used_tokens", "Tokens held in the KV cache", stats.kv_tokens),
        ("sglang:token_usage", "KV cache usage (0-1)", stats.token_usage),
    )
    counters = (
        ("sglang:spec_verify_steps_total", "Verify passes, one per request per step", stats.verify_steps),
        ("sglang:spec_draft_tokens_total", "Drafted tokens (tree nodes) verified", stats.draft_tokens),
        ("sglang:spec_accepted_tokens_total", "Accepted drafts committed (bonus excluded)", stats.accepted_tokens),
        ("sglang:generation_tokens_total", "Completion tokens generated", stats.generation_tokens),
        ("sglang:prompt_tokens_total", "Prompt tokens prefilled", stats.prompt_tokens),
        ("sglang:num_requests_total", "Requests finished", stats.requests_finished),
    )
    out: list[str] = []
    for name, doc, value in gauges:
        out += [f"# HELP {name} {doc}.", f"# TYPE {name} gauge", f"{name}{label} {float(value)!r}"]
    for name, doc, value in counters:
        out += [f"# HELP {name} {doc}.", f"# TYPE {name} counter", f"{name}{label} {float(value)!r}"]
    if bad_line:
        out.insert(3, 'sglang:spec_accept_length{model_name="' + stats.model + '" 3.5')
        out.append("sglang:gen_throughput{model_name=} not-a-number")
    return "\n".join(out) + "\n"
