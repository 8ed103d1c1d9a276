"""The simulator's command line and the ``SimConfig`` it produces.

One argparse parser serves both ``python -m orchestrator.sim`` and ``specsweep sim`` (which passes its
arguments through), so the two can never disagree about a flag. argparse rather than typer keeps the
start-up of a simulator under systemd light.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field

from orchestrator.errors import ConfigError
from orchestrator.sim.faults import FAULT_NAMES, Faults, parse_faults
from orchestrator.sim.model import MAX_DEPTH
from orchestrator.sim.profiles import PROFILES, Profile, get_profile

__all__ = ["ALGORITHMS", "SimConfig", "build_parser", "parse_args"]

ALGORITHMS = ("ar", "linear", "ddtree")


@dataclass(frozen=True)
class SimConfig:
    """Everything one simulator process needs. ``profile`` already carries the ``--ttft-ms``/``--itl-ms``
    overrides; ``load_seconds`` is the profile's default unless given."""

    host: str = "127.0.0.1"
    port: int = 30000
    algorithm: str = "ar"
    draft_tokens: int = 16
    budget: int = 32
    topk: int = 8
    profile: Profile = field(default_factory=lambda: PROFILES["tiny"])
    faults: Faults = field(default_factory=Faults)
    seed: int = 0
    load_seconds: float = 0.0
    decode_log_interval: int = 40
    model: str = "sim"

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"unknown algorithm {self.algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
        for name in ("draft_tokens", "budget", "topk", "decode_log_interval"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
        if max(self.draft_tokens, self.budget) > MAX_DEPTH:
            raise ConfigError(f"--draft-tokens and --budget must be at most {MAX_DEPTH}")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port {self.port} is not a TCP port")
        if self.load_seconds < 0:
            raise ConfigError("--load-seconds must not be negative")

    @property
    def spec_args(self) -> str:
        """The configuration in words, for log lines."""
        if self.algorithm == "linear":
            return f"linear draft_tokens={self.draft_tokens}"
        if self.algorithm == "ddtree":
            return f"ddtree budget={self.budget} topk={self.topk} max_depth={self.draft_tokens}"
        return "ar"


def build_parser(prog: str = "python -m orchestrator.sim") -> argparse.ArgumentParser:
    """The simulator's flags (the contract scripts and the systemd units rely on)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="A simulated SGLang-like speculative-decoding server (OpenAI API, SGLang logs and metrics).",
    )
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    add("--port", type=int, default=30000, help="TCP port; 0 picks a free one (default 30000)")
    add("--algorithm", choices=ALGORITHMS, default="ar", help="ar, linear (a chain) or ddtree (a tree)")
    add("--draft-tokens", type=int, default=16, help="linear: drafts per step; ddtree: max depth (16)")
    add("--budget", type=int, default=32, help="ddtree: node budget (32)")
    add("--topk", type=int, default=8, help="ddtree: children per node (8)")
    add("--profile", choices=tuple(PROFILES), default="k26", help="timing/acceptance profile (k26)")
    add(
        "--fault",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help=f"inject a fault, repeatable: {', '.join(FAULT_NAMES)}",
    )
    add("--seed", type=int, default=0, help="seed: the same requests give the same tokens and acceptance")
    add("--load-seconds", type=float, default=None, help="simulated model loading time (profile default)")
    add("--decode-log-interval", type=int, default=40, help="decode steps per 'Decode batch' line (40)")
    add("--ttft-ms", type=float, default=None, help="metronome: time to first token; others: extra prefill")
    add("--itl-ms", type=float, default=None, help="metronome: time between tokens; others: step floor")
    add("--model", default="sim", help="served model id (default 'sim')")
    return parser


def parse_args(argv: Sequence[str] | None = None, *, prog: str | None = None) -> SimConfig:
    """Parse the flags into a ``SimConfig``. argparse exits (code 2) on malformed flags; values that parse
    but make no sense raise ``ConfigError``."""
    parser = build_parser(prog) if prog else build_parser()
    ns = parser.parse_args(list(argv) if argv is not None else None)
    profile = get_profile(ns.profile)
    for flag, value in (("--ttft-ms", ns.ttft_ms), ("--itl-ms", ns.itl_ms)):
        if value is not None and value < 0:
            raise ConfigError(f"{flag} must not be negative")
    profile = profile.with_overrides(ttft_ms=ns.ttft_ms, itl_ms=ns.itl_ms)
    return SimConfig(
        host=ns.host,
        port=ns.port,
        algorithm=ns.algorithm,
        draft_tokens=ns.draft_tokens,
        budget=ns.budget,
        topk=ns.topk,
        profile=profile,
        faults=parse_faults(ns.fault),
        seed=ns.seed,
        load_seconds=profile.load_seconds if ns.load_seconds is None else ns.load_seconds,
        decode_log_interval=ns.decode_log_interval,
        model=ns.model,
    )
