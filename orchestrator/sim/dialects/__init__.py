"""The engines the simulator imitates, each in its own dialect: ``sglang`` (the default), ``vllm``, ``llamacpp``.

A dialect owns everything an engine writes: its log lines, ``/metrics`` names, HELP texts, types and labels,
its response fields and its health and information endpoints, each copied from the engine's own source (the
modules cite the files). ``--engine-version`` picks an older version's formats where they differ.

Each dialect lives with its engine (``orchestrator/engines/<name>/simdialect.py``), subclasses :class:`Dialect`
from here, and is a member of its engine: ``Engine.sim_dialect()`` (``orchestrator/engines/base.py``). The
simulator finds it through the engine registry on use (:func:`dialect_class`), so it imports no engine
package, and no table of dialects is kept here: the registry's import is the simulator's one reach above its
layer, which the layers contract of pyproject.toml names (``ignore_imports``) and the ``engine-packages``
contract bounds (the simulator imports no engine package). :func:`spoken_engines` is the ``--engine``
choices: the registered engines whose own dialect the simulator speaks, asked of the registry too.

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError
from orchestrator.sim.dialects.base import Dialect, EndpointInfo, LogFn, StreamFormat

if TYPE_CHECKING:
    from orchestrator.sim.config import SimConfig

__all__ = [
    "Dialect",
    "EndpointInfo",
    "StreamFormat",
    "dialect_class",
    "make_dialect",
    "refusal",
    "spoken_engines",
]


def _own_dialect(name: str) -> type[Dialect] | None:
    """Engine ``name``'s own dialect: its ``sim_dialect()`` when that is a :class:`Dialect` of that name (the
    ``sim`` engine reads SGLang's dialect, which is SGLang's, not its own); None otherwise."""
    from orchestrator.engines.registry import get_engine  # the one import above the simulator (module docstring)

    try:
        cls = get_engine(name).sim_dialect()
    except ConfigError:
        return None
    return cls if isinstance(cls, type) and issubclass(cls, Dialect) and cls.engine == name else None


def spoken_engines() -> tuple[str, ...]:
    """The engines whose dialect the simulator speaks (its ``--engine`` choices), in the registry's order: every
    registered engine with a dialect of its own, so a new engine's dialect needs no list here."""
    from orchestrator.engines.registry import engine_names

    return tuple(name for name in engine_names() if _own_dialect(name) is not None)


def dialect_class(engine: str) -> type[Dialect]:
    """The dialect class of ``engine`` (one of :func:`spoken_engines`): the engine's own ``sim_dialect()``, its
    package imported by the registry on first use."""
    cls = _own_dialect(engine)
    if cls is None:
        raise ConfigError(f"unknown engine {engine!r}; choose one of {', '.join(spoken_engines())}")
    return cls


def make_dialect(config: SimConfig, log: LogFn) -> Dialect:
    """The dialect ``config.engine`` speaks, at ``config.engine_version`` (its current version if empty);
    ``ConfigError`` for what the configuration asks that the dialect does not simulate (:func:`refusal`)."""
    cls = dialect_class(config.engine)
    refused = refusal(cls, config)
    if refused is not None:
        raise ConfigError(refused)
    return cls(config=config, log=log, version=config.engine_version or "")


def refusal(cls: type[Dialect], config: SimConfig) -> str | None:
    """Why dialect ``cls`` cannot run ``config`` (a flag or fault only other dialects simulate), else None."""
    if config.dp_size > 1 and not cls.takes_dp_size:
        return f"--dp-size is simulated for the {_those('takes_dp_size')} dialect only"
    if config.faults.coloured_log and not cls.coloured_log:
        why = f" ({cls.uncoloured})" if cls.uncoloured else ""
        return f"the coloured-log fault is the {_those('coloured_log')} dialects'{why}"
    if config.faults.idle_debug_engines and not cls.takes_idle_debug:
        those = _those("takes_idle_debug")
        return f"the idle-debug-intervals fault is the {those} dialect's (--engine {those})"
    if config.spec_schedule and (not cls.takes_spec_schedule or config.algorithm != "linear"):
        those = _those("takes_spec_schedule")
        return (
            f"num_speculative_tokens_per_batch_size is the {those} dialect's, on a chain "
            f"(--engine {those} --algorithm linear)"
        )
    return None


def _those(trait: str) -> str:
    """The engines whose dialect has ``trait``, for a refusal: ``vllm``, ``vllm and llamacpp``."""
    names = [engine for engine in spoken_engines() if getattr(dialect_class(engine), trait)]
    return " and ".join(names) if names else "no"
