"""``specsweep init``: a commented experiment file to start from, for an engine and a kind of host.

:func:`starter_experiment` returns the text, assembled from what only the engine knows (its flags, port and
variants: the engine's ``starter(host)``, orchestrator/engines/starter.py, in the engine's own package) and what
every engine shares (the header, the host, the service block, the load). Every combination of
:func:`starter_engines` and ``HOST_KINDS`` validates (``tests/integration/test_init_cli.py`` checks each with
``specsweep validate``).
"""

from __future__ import annotations

import json

from orchestrator.engines.registry import engine_names, get_engine
from orchestrator.engines.starter import Starter
from orchestrator.errors import ConfigError

__all__ = ["HOST_KINDS", "default_name", "starter_engines", "starter_experiment"]

HOST_KINDS = ("ssh", "local")


def _starter(engine: str, host: str = "ssh") -> Starter | None:
    try:
        return get_engine(engine).starter(host)
    except ConfigError:  # not an engine the registry knows
        return None


def starter_engines() -> tuple[str, ...]:
    """The engines with a starter file, in the registry's order (each engine's package is loaded to ask it)."""
    return tuple(name for name in engine_names() if _starter(name) is not None)


def default_name(engine: str) -> str:
    """The experiment's default name for ``engine``'s starter file."""
    starter = _starter(engine)
    if starter is None:
        raise ValueError(f"engine {engine!r} has no starter file")
    return starter.name


def _host_block(host: str) -> str:
    if host == "local":
        return "host: local                          # this machine; `{ssh: user@gpu-box}` for another one\n"
    return (
        "host: {ssh: root@gpu-box}            # user@host[:port] or a ~/.ssh/config alias (specsweep doctor FILE\n"
        "                                     # checks it); `hosts: [...]` spreads the sweep over a pool\n"
    )


def _url(port: int, host: str) -> str:
    where = "127.0.0.1" if host == "local" else "gpu-box"
    return f"http://{where}:{port}"


def _service(host: str, command: str, *, unit: str, environment: str = "") -> str:
    """A systemd drop-in on an SSH host (the unit must exist there), a plain process on this machine (and for an
    engine with no unit, the simulator, everywhere)."""
    if host == "ssh" and unit:
        return (
            "service:\n"
            "  kind: systemd                      # a drop-in replaces ExecStart for each configuration, and is\n"
            f"  unit: {unit}{' ' * max(1, 29 - len(unit))}# removed afterwards; the unit must exist on the host\n"
            "  exec_start: >-\n"
            f"    {command}\n" + environment
        )
    return (
        "service:\n"
        "  kind: process                      # started in its own session, stopped after each configuration\n"
        "  command: >-\n"
        f"    {command}\n" + environment
    )


_HEADER = """\
# {title}
# Written by `specsweep init`. Next:
#   specsweep validate {{file}}          # every error, with its line
#   specsweep plan {{file}}              # deployments (= restarts), load points, ETA
#   specsweep sweep {{file}} --dry-run   # what would be written and run, touching nothing
#   specsweep sweep {{file}}
# Every key is described in docs/guide.md ("An experiment file").
name: {name}
description: {description}
"""

_LOAD = """\
# The client side, the same for every configuration: each concurrency level is one load point.
load:
  concurrency: [1, 4, 16]
  warmup: 2                           # requests sent after each (re)start, not measured
  requests: {requests:<25} # per load point (or `duration: 60s`)
  max_tokens: {max_tokens}
  temperature: 0                      # greedy: the accept length does not depend on sampling luck
  prompts: "builtin:chat"             # or a JSONL / ShareGPT file, or "synthetic:in=128,out=256"
  repeats: {repeats}                          # each point measured N times (each with its own prompts): intervals
                                      # over windows, not only requests; a winner must beat the noise
  repeats_across_restarts: 1          # 2+ deploys every configuration again (restart-to-restart variance)
  # until: {{rel_ci: 0.02, max_requests: 512}}   # or: measure each point until its 95% interval is within ±2%
  # flush_cache: true                 # empty the prefix cache before every point
# When a sweep stops instead of spending ready_timeout on every configuration (these are the defaults).
failure_policy: {{stop_on_baseline_failure: true, max_consecutive_failed_deployments: 3}}
"""


def starter_experiment(engine: str, host: str, *, name: str | None = None, file: str = "FILE") -> str:
    """The text of a commented experiment file for ``engine`` on a ``host`` kind (``ssh`` or ``local``)."""
    if host not in HOST_KINDS:
        raise ValueError(f"host must be one of {', '.join(HOST_KINDS)}, got {host!r}")
    starter = _starter(engine, host)
    if starter is None:
        raise ValueError(f"engine must be one of {', '.join(starter_engines())}, got {engine!r}")
    name = name or starter.name
    description = json.dumps(starter.title.rstrip("."), ensure_ascii=False)  # a YAML string, quoted
    header = _HEADER.format(title=starter.title, name=name, description=description).replace("{file}", file)
    body = (
        _host_block(host)
        + starter.vars
        + _service(host, starter.command, unit=starter.unit, environment=starter.environment)
        + "server:\n"
        + f'  url: "{_url(starter.port, host)}"\n'
        + starter.server
        + starter.variants
    )
    return header + body + _LOAD.format(**{"requests": 32, "max_tokens": 256, "repeats": 3, **starter.load})
