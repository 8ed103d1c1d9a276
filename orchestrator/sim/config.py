"""The simulator's command line and the ``SimConfig`` it produces.

One argparse parser serves both ``python -m orchestrator.sim`` and ``specsweep sim`` (which passes its
arguments through), so the two can never disagree about a flag. argparse rather than typer keeps the
start-up of a simulator under systemd light.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

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
    engine: str = "sglang"
    engine_version: str = ""  # empty: the dialect's current version
    log_stats_interval: float = 10.0  # vLLM's VLLM_LOG_STATS_INTERVAL
    tp_size: int = 1  # SGLang: the log prefix and the tp_rank labels
    dp_size: int = 1  # SGLang: DP attention groups, one scheduler (log prefix, gauge labels) each
    ep_size: int = 1
    slots: int = 4  # llama.cpp: -np, the parallel slots
    per_request_spec_decode_metrics: str = "none"  # vLLM: none | summary
    slot_save_path: str = ""  # llama.cpp: --slot-save-path (the slot actions, erase included, need it)
    step_jitter: float = 0.0  # sigma of each decode step's lognormal cost factor (mean 1): timing noise
    truth_log: str = ""  # a file the dialect appends what the engine counted but did not print to (tests)
    gpu_memory_mib: float = 60000.0  # what the model takes on each visible fake GPU (orchestrator/sim/gpus.py)
    #: vLLM: num_speculative_tokens_per_batch_size of --speculative-config (orchestrator/sim/dynamic_sd.py)
    spec_schedule: tuple[tuple[int, int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"unknown algorithm {self.algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
        # ``engine`` is checked where its dialect is made (sim/dialects ``dialect_class``: the engines with a
        # dialect of their own, asked of the registry), which imports this module: not here.
        if self.log_stats_interval <= 0:
            raise ConfigError("--log-stats-interval must be positive")
        if self.tp_size % self.dp_size:
            raise ConfigError("--tp-size must be a multiple of --dp-size (DP attention splits the TP ranks)")
        for name in ("draft_tokens", "budget", "topk", "decode_log_interval", "tp_size", "dp_size", "ep_size", "slots"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
        if max(self.draft_tokens, self.budget) > MAX_DEPTH:
            raise ConfigError(f"--draft-tokens and --budget must be at most {MAX_DEPTH}")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port {self.port} is not a TCP port")
        if self.load_seconds < 0:
            raise ConfigError("--load-seconds must not be negative")
        if not 0 <= self.step_jitter <= 2:
            raise ConfigError("--step-jitter must be between 0 and 2")

    @property
    def schedulers(self) -> int:
        """Schedulers the server runs: SGLang's DP-attention groups (--dp-size), or vLLM's data-parallel
        engines (the idle-debug-intervals fault)."""
        return self.faults.idle_debug_engines or self.dp_size

    def expected_accept_length(
        self, temperature: float = 0.0, *, max_tokens: int | None = None, ignore_eos: bool = False
    ) -> float:
        """The configured truth: the expected tokens committed per verify step (bonus included, the prefill's
        first token excluded) of this configuration at ``temperature``; 1.0 under ``ar``. Every source of an
        accept length (log lines, /metrics, responses) estimates this figure; ``orchestrator.sim.model``
        computes it from the draft tree and the drafter's accuracy (``expected_accept_length``).

        With ``max_tokens``, the figure a load of requests of that many output tokens measures: each
        request's last step is cut at what is left (at ``max_tokens``, or at the profile's EOS unless
        ``ignore_eos``), as every engine cuts it, so the measured tokens per step are E[decode tokens] /
        E[verify steps] over the requests' lengths (``model.expected_steps``)."""
        from orchestrator.sim.model import Drafter, Speculator, depth_survival, expected_accept_length, expected_steps

        prof = self.profile
        drafter = Drafter(prof.top1_accuracy, prof.depth_decay, prof.rank_share)
        spec = Speculator(self.algorithm, drafter, draft_tokens=self.draft_tokens, budget=self.budget, topk=self.topk)
        if spec.tree is None:
            return 1.0
        truth = drafter.at_temperature(temperature, prof.temperature_penalty)
        if self.faults.commit_bug and self.algorithm == "ddtree":
            raise ConfigError("no closed form for the commit-bug fault's accept length")
        if max_tokens is None:
            return expected_accept_length(spec.tree, truth)
        if self.faults.drain_tail and not ignore_eos:  # faults.py drain-tail: lengths uniform in 1 .. max_tokens
            lengths = dict.fromkeys(range(1, max_tokens + 1), 1.0 / max_tokens)
        else:
            lengths = _output_lengths(max_tokens, None if ignore_eos else prof.eos_mean_tokens)
        steps = expected_steps(depth_survival(spec.tree, truth), max_tokens - 1)
        tokens = sum(p * (n - 1) for n, p in lengths.items())
        verify = sum(p * steps[n - 1] for n, p in lengths.items())
        return tokens / verify if verify > 0 else 1.0


def _output_lengths(max_tokens: int, eos_mean: float | None) -> dict[int, float]:
    """P(a request's output has n tokens): ``max_tokens``, or earlier at the simulator's EOS draw
    (``eos_at = 1 + floor(Exp(eos_mean))``, sim/request.py)."""
    if not eos_mean:
        return {max_tokens: 1.0}
    out: dict[int, float] = {}
    for k in range(max_tokens - 1):  # eos_at = k + 1 < max_tokens
        out[k + 1] = math.exp(-k / eos_mean) - math.exp(-(k + 1) / eos_mean)
    out[max_tokens] = math.exp(-(max_tokens - 1) / eos_mean)
    return out


def build_parser(prog: str = "python -m orchestrator.sim") -> argparse.ArgumentParser:
    """The simulator's flags (the contract scripts and the systemd units rely on)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="A simulated speculative-decoding server speaking SGLang's, vLLM's or llama.cpp's dialect "
        "(log lines, /metrics, responses, health endpoints as the engine writes them).",
    )
    add = parser.add_argument
    # The engines whose dialect the simulator speaks: each dialect is its engine's own (``Engine.sim_dialect``,
    # found through the registry: orchestrator/sim/dialects/__init__.py ``spoken_engines``), and an engine without
    # one, like what only some dialects simulate (``--dp-size``, the dialect faults), is refused there, when the
    # dialect is made (the dialects import this module, so it does not import them).
    add(
        "--engine",
        default="sglang",
        help="sglang, vllm, llamacpp or an installed engine with a dialect: whose dialect to speak (default sglang)",
    )
    add(
        "--engine-version",
        default="",
        help="imitate this engine version's formats where they differ (sglang 0.5.23/0.5.10/0.4.10; vllm "
        "0.33.0/0.10.2/0.9.2/0.8.5.post1/0.8.4; llamacpp b0-unknown); default: the newest",
    )
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
    add("--decode-log-interval", type=int, default=40, help="decode steps per SGLang decode-log line (40)")
    add("--ttft-ms", type=float, default=None, help="metronome: time to first token; others: extra prefill")
    add("--itl-ms", type=float, default=None, help="metronome: time between tokens; others: step floor")
    add(
        "--draft-ms-per-token",
        type=float,
        default=None,
        help="drafting cost per drafted token of each request in a step (the profile's; a draft model's cost "
        "grows with batch x k, so a long k pays at small batches only)",
    )
    add("--model", default="sim", help="served model id (default 'sim')")
    add("--log-stats-interval", type=float, default=10.0, help="vLLM dialect: seconds between stats lines (10)")
    add("--tp-size", type=int, default=1, help="SGLang dialect: tensor-parallel size shown in prefixes and labels (1)")
    add("--dp-size", type=int, default=1, help="SGLang dialect: DP-attention groups, each its own scheduler (1)")
    add("--ep-size", type=int, default=1, help="SGLang dialect: expert-parallel size (moe_ep_rank labels) (1)")
    add("--slots", type=int, default=4, help="llama.cpp dialect: parallel slots, -np (4)")
    add(
        "--per-request-spec-decode-metrics",
        choices=("none", "summary"),
        default="none",
        help="vLLM dialect: per-response speculative metrics (none)",
    )
    add(
        "--step-jitter",
        type=float,
        default=0.0,
        metavar="SIGMA",
        help="timing noise: each decode step lasts its cost times exp(N(0, SIGMA) - SIGMA^2/2), seeded (0)",
    )
    add(
        "--truth-log",
        default="",
        metavar="PATH",
        help="append what the engine counted but did not print (each logged interval's sums, as JSON lines) "
        "to PATH, for tests that check a figure against the engine's own count; no engine prints this",
    )
    add(
        "--gpu-memory-mib",
        type=float,
        default=60000.0,
        help="with fake GPUs (FAKE_GPU_STATE: orchestrator/sim/gpus.py), the memory the model takes on each GPU "
        "CUDA_VISIBLE_DEVICES names; one that has not that much free fails the start with CUDA's out-of-memory "
        "error (60000)",
    )
    add(
        "--speculative-config",
        default="",
        metavar="JSON",
        help="vLLM dialect: vLLM's JSON; num_speculative_tokens sets --draft-tokens, and "
        "num_speculative_tokens_per_batch_size picks the drafts of each step by the requests in it, as vLLM's "
        "scheduler does (with --algorithm linear; other keys ignored)",
    )
    add(
        "--slot-save-path",
        default="",
        help="llamacpp: as llama-server's flag; the slot actions (POST /slots/{id}?action=erase) need it",
    )
    return parser


def parse_args(argv: Sequence[str] | None = None, *, prog: str | None = None) -> SimConfig:
    """Parse the flags into a ``SimConfig``. argparse exits (code 2) on malformed flags; values that parse
    but make no sense raise ``ConfigError``."""
    parser = build_parser(prog) if prog else build_parser()
    ns = parser.parse_args(list(argv) if argv is not None else None)
    profile = get_profile(ns.profile)
    for flag, value in (
        ("--ttft-ms", ns.ttft_ms),
        ("--itl-ms", ns.itl_ms),
        ("--draft-ms-per-token", ns.draft_ms_per_token),
    ):
        if value is not None and value < 0:
            raise ConfigError(f"{flag} must not be negative")
    profile = profile.with_overrides(ttft_ms=ns.ttft_ms, itl_ms=ns.itl_ms)
    if ns.draft_ms_per_token is not None:
        profile = replace(profile, draft_ms_per_token=ns.draft_ms_per_token)
    draft_tokens = ns.draft_tokens
    spec_schedule: tuple[tuple[int, int, int], ...] = ()
    if ns.speculative_config:
        from orchestrator.sim.dynamic_sd import parse_speculative_config

        k, spec_schedule = parse_speculative_config(ns.speculative_config)
        draft_tokens = k if k is not None else draft_tokens
    return SimConfig(
        host=ns.host,
        port=ns.port,
        algorithm=ns.algorithm,
        draft_tokens=draft_tokens,
        budget=ns.budget,
        topk=ns.topk,
        profile=profile,
        faults=parse_faults(ns.fault),
        seed=ns.seed,
        load_seconds=profile.load_seconds if ns.load_seconds is None else ns.load_seconds,
        decode_log_interval=ns.decode_log_interval,
        model=ns.model,
        engine=ns.engine,
        engine_version=ns.engine_version,
        log_stats_interval=ns.log_stats_interval,
        tp_size=ns.tp_size,
        dp_size=ns.dp_size,
        ep_size=ns.ep_size,
        slots=ns.slots,
        per_request_spec_decode_metrics=ns.per_request_spec_decode_metrics,
        slot_save_path=ns.slot_save_path,
        step_jitter=ns.step_jitter,
        truth_log=ns.truth_log,
        gpu_memory_mib=ns.gpu_memory_mib,
        spec_schedule=spec_schedule,
    )
