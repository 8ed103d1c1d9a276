"""Named parameter sets of the simulator: how well the drafter guesses, and what a step costs.

A profile holds two halves. The acceptance half describes the drafter: its top-1 accuracy at depth ``d`` is
``top1_accuracy * depth_decay ** (d - 1)``, and when its top-1 guess is wrong, the true token sits at rank
``r >= 2`` with a geometric share ``rank_share * (1 - rank_share) ** (r - 2)`` of the rest. The timing half
prices one scheduler step (all in milliseconds):

    verify(T)  = floor_ms + moe_ms * (1 - exp(-(T - 1) / moe_tokens)) + compute_ms_per_token * max(0, T - compute_knee)
    draft      = draft_ms_per_depth * depth + draft_ms_per_token * (drafted tokens across the batch)
                 + tree_ms_per_node * nodes                                         (ddtree only)
    prefill    = prefill_ms + prefill_ms_per_token * (new prompt tokens)

where ``T = batch * (nodes + 1)`` tokens go through the target in one verify pass. The floor is the
memory-bound cost of one forward; the MoE term grows as more tokens touch more experts (so extra verify tokens
cost something even at batch 1) and saturates once every expert is read; the compute slope starts beyond the
knee, where the pass becomes compute-bound. That is why big trees lose ground at high concurrency.

``k26`` is calibrated to the field report in DOMAIN.md (see ``bench/RESULTS-sim.md`` for the table it gives);
``tiny`` is the same shape a hundred times faster, for tests; ``firehose`` costs nothing, for measuring clients;
``metronome`` ignores acceptance and emits one token per chunk on a fixed schedule (``ttft_ms``, ``itl_ms``).

``workloads`` is ``k26`` whose acceptance depends on what is asked, as a real drafter's does: code and
translation are the two ends SpecBench's categories show. Like an engine, it sees only the request's text
(the chat messages or the prompt), never a workload name: each :class:`ContentRule` lists words (matched
case-insensitively anywhere in the text); the first rule with a match sets the truth the draft is verified
against (its top-1 accuracy and depth decay), and text no rule matches keeps the profile's own. The draft tree
is still built from the profile's drafter, so only acceptance changes with the text, deterministically.
Rules of ``workloads``: code-like text (``python``, ``def``, ``sql``, ``function``, ...) accepts more and deeper
(0.93, decay 0.985); ``translate`` accepts far less (0.30, decay 0.80), where speculation costs more than it
gains and the autoregressive baseline wins.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from orchestrator.errors import ConfigError

__all__ = ["PROFILES", "ContentRule", "Profile", "get_profile"]


@dataclass(frozen=True)
class ContentRule:
    """Acceptance for request text containing any of ``words`` (lower case; see the module docstring)."""

    name: str
    words: tuple[str, ...]
    top1_accuracy: float
    depth_decay: float

    def matches(self, text: str) -> bool:
        lowered = text.lower()
        return any(word in lowered for word in self.words)


@dataclass(frozen=True)
class Profile:
    """One named parameter set. Times are milliseconds; see the module docstring for the formulas."""

    name: str
    description: str
    # Acceptance: the drafter.
    top1_accuracy: float
    depth_decay: float
    rank_share: float
    temperature_penalty: float  # top-1 accuracy is divided by (1 + penalty * temperature)
    # Timing of one verify pass and one draft.
    floor_ms: float
    moe_ms: float
    moe_tokens: float
    compute_knee: int
    compute_ms_per_token: float
    draft_ms_per_depth: float
    draft_ms_per_token: float
    tree_ms_per_node: float
    prefill_ms: float
    prefill_ms_per_token: float
    # Capacity and behaviour.
    max_running_requests: int
    kv_capacity_tokens: int
    context_length: int
    eos_mean_tokens: float | None  # mean length before an EOS when ignore_eos is off; None: never
    load_seconds: float  # default for --load-seconds
    metronome: bool = False
    steps_per_yield: int = 1  # zero-time profiles: decode steps between two yields to the event loop
    ttft_ms: float = 0.0  # metronome: time to the first token; other profiles: extra prefill delay
    itl_ms: float = 0.0  # metronome: time between tokens
    #: Acceptance by the request's text (the first matching rule wins); empty: the same for every request.
    content_rules: tuple[ContentRule, ...] = ()

    def rule_for(self, text: str) -> ContentRule | None:
        """The content rule whose words ``text`` contains, if any."""
        return next((rule for rule in self.content_rules if rule.matches(text)), None)

    @property
    def zero_time(self) -> bool:
        """True when a step costs nothing at all (the firehose): the loop then only yields."""
        return self.floor_ms == 0 and self.moe_ms == 0 and self.prefill_ms == 0 and not self.metronome

    def with_overrides(self, *, ttft_ms: float | None = None, itl_ms: float | None = None) -> Profile:
        """The profile with ``--ttft-ms`` / ``--itl-ms`` applied (for non-metronome profiles, ``--itl-ms``
        replaces the floor of a step and ``--ttft-ms`` adds a fixed delay to every prefill)."""
        profile = self
        if ttft_ms is not None:
            profile = dataclasses.replace(profile, ttft_ms=ttft_ms)
        if itl_ms is not None:
            profile = dataclasses.replace(profile, itl_ms=itl_ms)
            if not self.metronome:
                profile = dataclasses.replace(profile, floor_ms=itl_ms)
        return profile


_K26 = Profile(
    name="k26",
    description="Kimi K2.6 on 8 GPUs, calibrated to the field report (AR ~98 tok/s at C=1)",
    top1_accuracy=0.80,
    depth_decay=0.96,
    rank_share=0.40,
    temperature_penalty=0.25,
    floor_ms=10.2,
    moe_ms=15.0,
    moe_tokens=24.0,
    compute_knee=512,
    compute_ms_per_token=0.02,
    draft_ms_per_depth=1.6,
    draft_ms_per_token=0.004,
    tree_ms_per_node=0.05,
    prefill_ms=12.0,
    prefill_ms_per_token=0.03,
    max_running_requests=256,
    kv_capacity_tokens=400_000,
    context_length=262_144,
    eos_mean_tokens=800.0,
    load_seconds=5.0,
)

_CODE_WORDS = (
    "python", "def ", "sql", "function", "class ", "rust", "java", "typescript", "bash", "c++", "dockerfile",
    "makefile", "regular expression", "pytest", "implement", "golang", " go ", "```",
)  # fmt: skip

PROFILES: dict[str, Profile] = {
    "k26": _K26,
    "tiny": dataclasses.replace(
        _K26,
        name="tiny",
        description="k26's shape, about 50x faster and never stopping early: for tests",
        floor_ms=0.2,
        moe_ms=0.3,
        draft_ms_per_depth=0.03,
        draft_ms_per_token=0.0001,
        tree_ms_per_node=0.001,
        prefill_ms=0.2,
        prefill_ms_per_token=0.0005,
        compute_ms_per_token=0.0004,
        max_running_requests=1024,
        eos_mean_tokens=None,
        load_seconds=0.0,
    ),
    "firehose": dataclasses.replace(
        _K26,
        name="firehose",
        description="no compute time at all: the server's own maximum, for measuring clients",
        floor_ms=0.0,
        moe_ms=0.0,
        compute_ms_per_token=0.0,
        draft_ms_per_depth=0.0,
        draft_ms_per_token=0.0,
        tree_ms_per_node=0.0,
        prefill_ms=0.0,
        prefill_ms_per_token=0.0,
        max_running_requests=4096,
        kv_capacity_tokens=100_000_000,
        eos_mean_tokens=None,
        load_seconds=0.0,
        # Several steps per yield let each handler send several steps' events in one write: the firehose
        # is about the server's maximum, and one send() per event would make the syscall the limit.
        steps_per_yield=16,
    ),
    "metronome": dataclasses.replace(
        _K26,
        name="metronome",
        description="one token per chunk on a fixed schedule (--ttft-ms, --itl-ms): ground truth for clients",
        max_running_requests=1_000_000,
        kv_capacity_tokens=1_000_000_000,
        eos_mean_tokens=None,
        load_seconds=0.0,
        metronome=True,
        ttft_ms=100.0,
        itl_ms=20.0,
    ),
}

PROFILES["workloads"] = dataclasses.replace(
    _K26,
    name="workloads",
    description="k26 whose acceptance follows the request's text: code accepts more, translation far less",
    content_rules=(
        ContentRule("code", _CODE_WORDS, top1_accuracy=0.93, depth_decay=0.985),
        ContentRule("translation", ("translate",), top1_accuracy=0.30, depth_decay=0.80),
    ),
    eos_mean_tokens=None,
    load_seconds=1.0,
)


def get_profile(name: str) -> Profile:
    """The profile called ``name``; a ``ConfigError`` names the valid ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}", key="profile") from None
