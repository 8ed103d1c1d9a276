"""The plan's first guess at what a deployment costs: its start, and the seconds of one request at a load.

The guess stands on one of two bases, and says which (:attr:`Pace.basis`, printed beside the ETA):

- **the simulator's own figures**, when the deployment's command runs ``orchestrator.sim`` (``python -m
  orchestrator.sim ...`` or ``specsweep sim ...``): its flags parsed by the simulator's own parser, a start of
  its ``--load-seconds`` plus :data:`SIM_START_SECONDS` (the process starting, the sweep switching from the
  previous deployment), and one request as the simulator's step
  model times it: a prefill, then ``max_tokens / E`` decode steps of ``C`` running requests (``E`` the
  configuration's expected accept length, :meth:`SimConfig.expected_accept_length`; a step's cost from
  :class:`orchestrator.sim.timing.StepTiming`); the lossless probe's prompts, one at a time, come on top of
  the start (orchestrator/plan/deployments.py). This is what the simulator will really do, whatever the file's
  ``server.expected_load_time`` says (a search file keeps 480 s there for the GPU-hours of the host it stands
  for: an ETA of 2h40m for a run of 3 minutes, issue 50). The GPU-hours (orchestrator/search/cost.py) keep the
  file's figure: :attr:`Deployment.expected_load_seconds` is still it; :attr:`Deployment.start_seconds` is this.
- **the file's guesses** otherwise: ``server.expected_load_time`` per start and
  ``server.expected_tokens_per_second`` per user at every load.

Either is a first guess: a sweep replaces it with what it measures as it runs (orchestrator/plan/eta.py).
No I/O, no clock.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.sim.config import SimConfig

__all__ = ["SIM_START_SECONDS", "Pace", "pace_of", "plan_basis", "sim_config"]

#: What a simulator deployment takes beyond its ``--load-seconds`` before its first point, the lossless probe
#: and the points aside: the process importing and binding (about 1 s: the demo's ``ready in 2.0-2.2 s`` at
#: ``--load-seconds 1``) and the sweep's switch from the previous deployment (stopping it, restoring, the
#: health polls, the warm-up's set-up; 1.1-2.3 s more in the runs of bench/RESULTS-eta.md), on a 2-core machine.
SIM_START_SECONDS = 2.5
#: The prompt tokens one request's prefill is timed for (the builtin chat prompts are a few dozen tokens).
_PROMPT_TOKENS = 64


@dataclass(frozen=True)
class Pace:
    """What one deployment's start and one request at a load are expected to take, and on what basis."""

    start_seconds: float
    basis: str
    #: True when the figures are the server's own (the simulator's), not the file's guesses.
    own: bool = False
    tokens_per_second: float = 50.0
    sim: SimConfig | None = None
    temperature: float = 0.0
    ignore_eos: bool = False

    def request_seconds(self, max_tokens: int, concurrency: int = 1) -> float:
        """The seconds of one request of ``max_tokens`` output tokens among ``concurrency`` running ones."""
        if self.sim is None:
            return max_tokens / max(self.tokens_per_second, 1e-6)
        return _sim_request_seconds(self.sim, max_tokens, concurrency, self.temperature, self.ignore_eos)


def _file_pace(experiment: Experiment) -> Pace:
    server = experiment.server
    return Pace(
        start_seconds=server.expected_load_time,
        basis=(
            f"the file's guesses: server.expected_load_time {server.expected_load_time:g} s per start, "
            f"expected_tokens_per_second {server.expected_tokens_per_second:g} per user"
        ),
        tokens_per_second=server.expected_tokens_per_second,
    )


class _Refused(Exception):
    pass


def _refuse(message: str) -> None:
    raise _Refused(message)


def sim_config(command: str | None) -> SimConfig | None:
    """The simulator configuration ``command`` starts (None: not the simulator, or flags it would refuse)."""
    if not command:
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    flags: list[str] | None = None
    for i, word in enumerate(words):
        if word == "orchestrator.sim" and i > 0 and words[i - 1] == "-m":
            flags = words[i + 1 :]
            break
        if word == "sim" and i > 0 and words[i - 1].rsplit("/", 1)[-1] == "specsweep":
            flags = words[i + 1 :]
            break
    if flags is None:
        return None
    from orchestrator.errors import ConfigError
    from orchestrator.sim.config import build_parser, parse_args

    parser = build_parser()
    parser.exit_on_error = False
    setattr(parser, "error", _refuse)  # noqa: B010  (argparse would print its usage and exit)
    try:
        parser.parse_args(flags)  # refuses quietly what parse_args would print and exit on
        return parse_args(flags)
    except (_Refused, argparse.ArgumentError, ConfigError, SystemExit, ValueError):
        return None


def _sim_request_seconds(
    config: SimConfig, max_tokens: int, concurrency: int, temperature: float, ignore_eos: bool
) -> float:
    from orchestrator.errors import ConfigError
    from orchestrator.sim.model import Drafter, Speculator
    from orchestrator.sim.timing import StepTiming

    profile = config.profile
    if profile.metronome:
        return (profile.ttft_ms + profile.itl_ms * max(0, max_tokens - 1)) / 1000.0
    drafter = Drafter(profile.top1_accuracy, profile.depth_decay, profile.rank_share)
    spec = Speculator(
        config.algorithm, drafter, draft_tokens=config.draft_tokens, budget=config.budget, topk=config.topk
    )
    accept = 1.0
    with contextlib.suppress(ConfigError):  # the commit-bug fault has no closed form: no speed-up assumed
        accept = config.expected_accept_length(temperature, max_tokens=max_tokens, ignore_eos=ignore_eos)
    tokens = float(max_tokens)
    if profile.eos_mean_tokens and not ignore_eos:  # an EOS draw ends a request early (sim/request.py)
        mean = profile.eos_mean_tokens
        tokens = min(tokens, 1.0 + mean * (1.0 - math.exp(-(max_tokens - 1) / mean)))
    batch = max(1, min(concurrency, profile.max_running_requests))
    timing = StepTiming(profile, spec)
    steps = max(0.0, tokens - 1.0) / max(accept, 1.0)
    return timing.prefill_seconds(_PROMPT_TOKENS) + steps * timing.decode_seconds(batch)


def pace_of(experiment: Experiment, command: str | None = None) -> Pace:
    """The pace of one deployment of ``experiment`` whose server command is ``command`` (module docstring)."""
    config = sim_config(command)
    if config is None:
        return _file_pace(experiment)
    load = experiment.load
    return Pace(
        start_seconds=config.load_seconds + SIM_START_SECONDS,
        basis=(
            f"the simulator's own figures: its {config.profile.name} profile's step times, "
            f"--load-seconds {config.load_seconds:g} + {SIM_START_SECONDS:g} s per start"
        ),
        own=True,
        sim=config,
        temperature=load.temperature,
        ignore_eos=bool(getattr(load, "ignore_eos", False)),
    )


def plan_basis(experiment: Experiment, commands: list[str | None]) -> str:
    """What the plan's ETA stands on, for the deployments whose commands are ``commands``."""
    paces = [pace_of(experiment, c) for c in commands] or [_file_pace(experiment)]
    own = [p for p in paces if p.own]
    if not own:
        return paces[0].basis
    said = own[0].basis
    if experiment.lossless.enabled and experiment.baselines:
        said += f", the lossless probe's {experiment.lossless.prompts} prompts at C=1"
    if len(own) < len(paces):
        said += f" ({len(own)} of {len(paces)} deployments; the others on {_file_pace(experiment).basis})"
    return said
