"""What one scheduler step costs, in seconds, from a profile and the drafting configuration.

See ``profiles`` for the formulas: a verify pass over ``batch * (nodes + 1)`` tokens on a roofline with an
MoE term, plus the draft, or a prefill batch.
"""

from __future__ import annotations

import math

from orchestrator.sim.model import Speculator
from orchestrator.sim.profiles import Profile

__all__ = ["StepTiming"]


class StepTiming:
    """Step costs for one server configuration (profile + speculator)."""

    def __init__(self, profile: Profile, speculator: Speculator) -> None:
        self.profile = profile
        self.nodes = speculator.drafted
        self.depth = speculator.draft_depth
        self.tree = speculator.algorithm == "ddtree"

    def verify_ms(self, tokens: int) -> float:
        """One target forward over ``tokens`` tokens (all requests' verify tokens together)."""
        p = self.profile
        ms = p.floor_ms
        if p.moe_ms and p.moe_tokens > 0:
            ms += p.moe_ms * (1.0 - math.exp(-(tokens - 1) / p.moe_tokens))
        if tokens > p.compute_knee:
            ms += p.compute_ms_per_token * (tokens - p.compute_knee)
        return ms

    def draft_ms(self, batch: int) -> float:
        """Drafting for ``batch`` requests: per-depth latency, per-token compute, tree building."""
        if not self.nodes:
            return 0.0
        p = self.profile
        ms = p.draft_ms_per_depth * self.depth + p.draft_ms_per_token * batch * self.nodes
        if self.tree:
            ms += p.tree_ms_per_node * self.nodes
        return ms

    def decode_seconds(self, batch: int) -> float:
        """One decode step (draft + verify) for ``batch`` running requests."""
        if batch <= 0:
            return 0.0
        return (self.draft_ms(batch) + self.verify_ms(batch * (self.nodes + 1))) / 1000.0

    def prefill_seconds(self, new_tokens: int) -> float:
        """One prefill batch over ``new_tokens`` prompt tokens (``ttft_ms`` adds a fixed delay)."""
        p = self.profile
        return (p.prefill_ms + p.prefill_ms_per_token * new_tokens + p.ttft_ms) / 1000.0
