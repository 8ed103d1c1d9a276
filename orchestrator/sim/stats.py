"""What the simulated server counts, engine-neutrally; each dialect (``orchestrator.sim.dialects``) turns these
counts into its engine's log lines, ``/metrics`` series and response fields.

``Counts`` is the decode work over some span (one step, one log interval, a request, the server's life):

- ``steps``: scheduler decode steps (batches); ``request_steps``: (request, step) pairs;
- ``tokens``: tokens those steps committed, the bonus token included (the prefill's first token is not a
  decode step's and is not counted here, as in every engine);
- ``drafts``: (request, step) pairs that verified a draft (all of them while speculating, none under ``ar``);
  ``draft_tokens``: tokens drafted for them; ``accepted``: drafts committed (the bonus token excluded), so
  per step ``tokens = accepted + drafts``;
- ``hist[a]``: (request, step) pairs that committed ``a`` drafts (per-position acceptance is its survival
  curve: position ``i`` was accepted by the pairs that committed more than ``i`` drafts);
- ``reported`` / ``depth``: accepted drafts as the commit path reports them and the accepted depth (they differ
  from ``accepted`` only under the ``commit-bug`` fault; the DDTree line prints them).

``ServerStats`` holds the server-wide cumulative figures and the current gauges of one scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Counts", "ServerStats"]


@dataclass(slots=True)
class Counts:
    """Decode work over a span (see the module docstring)."""

    steps: int = 0
    request_steps: int = 0
    tokens: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    reported: int = 0
    depth: int = 0
    hist: list[int] = field(default_factory=list)

    def add(self, other: Counts) -> None:
        self.steps += other.steps
        self.request_steps += other.request_steps
        self.tokens += other.tokens
        self.drafts += other.drafts
        self.draft_tokens += other.draft_tokens
        self.accepted += other.accepted
        self.reported += other.reported
        self.depth += other.depth
        hist = self.hist
        if len(hist) < len(other.hist):
            hist.extend([0] * (len(other.hist) - len(hist)))
        for i, n in enumerate(other.hist):
            hist[i] += n

    def count(self, accepted: int) -> None:
        """One (request, step) pair that committed ``accepted`` drafts."""
        hist = self.hist
        if len(hist) <= accepted:
            hist.extend([0] * (accepted + 1 - len(hist)))
        hist[accepted] += 1

    def accepted_per_position(self, positions: int) -> list[int]:
        """Pairs whose first ``i + 1`` drafts were all accepted, for i = 0 .. positions - 1."""
        out = [0] * positions
        running = 0
        hist = self.hist
        for i in range(len(hist) - 1, 0, -1):
            running += hist[i]
            if i - 1 < positions:
                out[i - 1] = running
        return out

    @property
    def accept_length(self) -> float:
        """Tokens per verify step, bonus included (0 without any)."""
        return self.tokens / self.request_steps if self.request_steps else 0.0

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafts / drafted tokens, bonus excluded (0 without drafts)."""
        return self.accepted / self.draft_tokens if self.draft_tokens else 0.0

    def per_request(self, value: int) -> float:
        return value / self.request_steps if self.request_steps else 0.0


@dataclass
class ServerStats:
    """One scheduler's cumulative counters and current gauges (the engine writes, the HTTP side reads)."""

    model: str
    speculative: bool
    decode: Counts = field(default_factory=Counts)  # every decode step since start
    generation_tokens: int = 0  # every completion token, the prefill's first ones included
    prompt_tokens: int = 0
    requests_finished: int = 0
    # Gauges.
    running: int = 0
    queued: int = 0
    kv_tokens: int = 0
    token_usage: float = 0.0
