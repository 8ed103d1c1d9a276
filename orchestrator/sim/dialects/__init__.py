"""The engines the simulator imitates, each in its own dialect: ``sglang`` (the default), ``vllm``, ``llamacpp``.

A dialect owns everything an engine writes: its log lines, ``/metrics`` names, HELP texts, types and labels,
its response fields and its health and information endpoints, each copied from the engine's own source (the
modules cite the files). ``--engine-version`` picks an older version's formats where they differ.

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError
from orchestrator.sim.dialects.base import Dialect, EndpointInfo, LogFn, StreamFormat
from orchestrator.sim.dialects.llamacpp import LlamaCppDialect
from orchestrator.sim.dialects.sglang import SGLangDialect
from orchestrator.sim.dialects.vllm import VLLMDialect

if TYPE_CHECKING:
    from orchestrator.sim.config import SimConfig

__all__ = ["DIALECTS", "ENGINES", "Dialect", "EndpointInfo", "StreamFormat", "make_dialect"]

DIALECTS: dict[str, type[Dialect]] = {"sglang": SGLangDialect, "vllm": VLLMDialect, "llamacpp": LlamaCppDialect}
ENGINES = tuple(DIALECTS)


def make_dialect(config: SimConfig, log: LogFn) -> Dialect:
    """The dialect ``config.engine`` speaks, at ``config.engine_version`` (its current version if empty)."""
    try:
        cls = DIALECTS[config.engine]
    except KeyError:
        raise ConfigError(f"unknown engine {config.engine!r}; choose one of {', '.join(ENGINES)}") from None
    return cls(config=config, log=log, version=config.engine_version or "")
