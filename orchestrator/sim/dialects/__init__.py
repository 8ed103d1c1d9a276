"""The engines the simulator imitates, each in its own dialect: ``sglang`` (the default), ``vllm``, ``llamacpp``.

A dialect owns everything an engine writes: its log lines, ``/metrics`` names, HELP texts, types and labels,
its response fields and its health and information endpoints, each copied from the engine's own source (the
modules cite the files). ``--engine-version`` picks an older version's formats where they differ.

Each dialect lives with its engine (``orchestrator/engines/<name>/simdialect.py``), subclasses :class:`Dialect`
from here, and is a member of its engine: ``Engine.sim_dialect()`` (``orchestrator/engines/base.py``). The
simulator finds it through the engine registry on use (:func:`dialect_class`), so it imports no engine
package, and no table of dialects is kept here: the registry's import is the simulator's one reach above its
layer, which the layers contract of pyproject.toml names (``ignore_imports``) and the ``engine-packages``
contract bounds (the simulator imports no engine package). :data:`ENGINES` (``orchestrator/sim/config.py``)
is the ``--engine`` choices: the engines whose dialect the simulator speaks, held to the registry by
tests/unit/test_engine_seam.py.

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError
from orchestrator.sim.config import ENGINES
from orchestrator.sim.dialects.base import Dialect, EndpointInfo, LogFn, StreamFormat

if TYPE_CHECKING:
    from orchestrator.sim.config import SimConfig

__all__ = ["ENGINES", "Dialect", "EndpointInfo", "StreamFormat", "dialect_class", "make_dialect"]


def dialect_class(engine: str) -> type[Dialect]:
    """The dialect class of ``engine`` (one of :data:`ENGINES`): the engine's own ``sim_dialect()``, its
    package imported by the registry on first use."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    from orchestrator.engines.registry import get_engine  # the one import above the simulator (module docstring)

    cls = get_engine(engine).sim_dialect()
    if not (isinstance(cls, type) and issubclass(cls, Dialect)):
        raise ConfigError(f"engine {engine!r}: {cls!r} is not a simulator dialect")
    return cls


def make_dialect(config: SimConfig, log: LogFn) -> Dialect:
    """The dialect ``config.engine`` speaks, at ``config.engine_version`` (its current version if empty)."""
    cls = dialect_class(config.engine)
    return cls(config=config, log=log, version=config.engine_version or "")
