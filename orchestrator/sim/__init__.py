"""A simulated SGLang-like speculative-decoding server: the embedded default target and the test target.

Start it with ``specsweep sim ...`` or ``python -m orchestrator.sim ...`` (flags in ``config``). Modules:

    config    the flags and ``SimConfig``            profiles  named timing/acceptance parameter sets
    model     acceptance: chain, tree, commit path   timing    what a scheduler step costs
    request   one request's tokens and hand-off      engine    the continuous-batching scheduler loop
    stats     counters, intervals, /metrics text     logs      SGLang/DDTree log line formats
    faults    ``--fault`` parsing                    api       request parsing, response shapes
    server    aiohttp endpoints and life cycle       runner    ``main``/``run``: a process, signals, exit code

This package's ``__init__`` imports nothing heavy, so the pure model can be used without aiohttp.
"""

from orchestrator.sim.config import SimConfig, parse_args
from orchestrator.sim.faults import Faults, parse_faults
from orchestrator.sim.profiles import PROFILES, Profile, get_profile

__all__ = ["PROFILES", "Faults", "Profile", "SimConfig", "get_profile", "parse_args", "parse_faults"]
