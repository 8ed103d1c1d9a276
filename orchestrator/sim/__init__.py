"""A simulated speculative-decoding server speaking SGLang's, vLLM's or llama.cpp's dialect: the embedded
default target and the test target. It invents no format: every log line, ``/metrics`` series and response
field is the engine's own, read from its source (``dialects``).

Start it with ``specsweep sim ...`` or ``python -m orchestrator.sim ...`` (flags in ``config``). Modules:

    config    the flags and ``SimConfig`` (and the configured truth, ``SimConfig.expected_accept_length``)
    profiles  named timing/acceptance parameter sets  model     acceptance: chain, tree, commit path
    timing    what a scheduler step costs             request   one request's tokens and hand-off
    engine    the continuous-batching scheduler loop  stats     engine-neutral counts
    dialects  each engine's lines, /metrics, responses, endpoints   expo  Prometheus text as the engines write it
    faults    ``--fault`` parsing                     api       request parsing
    server    aiohttp endpoints and life cycle        runner    ``main``/``run``: a process, signals, exit code

This package's ``__init__`` imports nothing heavy, so the pure model can be used without aiohttp.
"""

from orchestrator.sim.config import SimConfig, parse_args
from orchestrator.sim.faults import Faults, parse_faults
from orchestrator.sim.profiles import PROFILES, Profile, get_profile

__all__ = ["PROFILES", "Faults", "Profile", "SimConfig", "get_profile", "parse_args", "parse_faults"]
