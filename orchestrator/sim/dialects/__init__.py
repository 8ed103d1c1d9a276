"""The engines the simulator imitates, each in its own dialect: ``sglang`` (the default), ``vllm``, ``llamacpp``.

A dialect owns everything an engine writes: its log lines, ``/metrics`` names, HELP texts, types and labels,
its response fields and its health and information endpoints, each copied from the engine's own source (the
modules cite the files). ``--engine-version`` picks an older version's formats where they differ.

Each dialect lives with its engine (``orchestrator/engines/<name>/simdialect.py``) and subclasses
:class:`Dialect` from here; the simulator finds it by module path on use (:data:`DIALECTS`,
:func:`dialect_class`), so it imports no engine until one is asked for.

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError
from orchestrator.sim.dialects.base import Dialect, EndpointInfo, LogFn, StreamFormat

if TYPE_CHECKING:
    from orchestrator.sim.config import SimConfig

__all__ = ["DIALECTS", "ENGINES", "Dialect", "EndpointInfo", "StreamFormat", "dialect_class", "make_dialect"]

#: engine -> "module:class" of its dialect, loaded on first use.
DIALECTS: dict[str, str] = {
    "sglang": "orchestrator.engines.sglang.simdialect:SGLangDialect",
    "vllm": "orchestrator.engines.vllm.simdialect:VLLMDialect",
    "llamacpp": "orchestrator.engines.llamacpp.simdialect:LlamaCppDialect",
}
ENGINES = tuple(DIALECTS)


def dialect_class(engine: str) -> type[Dialect]:
    """The dialect class of ``engine`` (one of :data:`ENGINES`), its module imported on first use."""
    try:
        target = DIALECTS[engine]
    except KeyError:
        raise ConfigError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}") from None
    module, _, name = target.partition(":")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, Dialect)):
        raise ConfigError(f"engine {engine!r}: {target} is not a simulator dialect")
    return cls


def make_dialect(config: SimConfig, log: LogFn) -> Dialect:
    """The dialect ``config.engine`` speaks, at ``config.engine_version`` (its current version if empty)."""
    cls = dialect_class(config.engine)
    return cls(config=config, log=log, version=config.engine_version or "")
