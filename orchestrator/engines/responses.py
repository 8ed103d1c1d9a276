"""Per-response speculative-decoding figures: the type every engine's reader fills, and the rules by source.

Each engine that writes speculative figures into its responses reads them in its own module
(``orchestrator/engines/<name>/responses.py``: the source names, their definitions with the engine files, the
readers). What they share lives here: :class:`SpecFigures` (one response's figures, tagged with the name of
the source they came from), the source rules (:class:`ResponseSource`: how a source's figures give the
``accept_len`` terms, what each figure means) and the whole-body readers in the order
:func:`orchestrator.load.spec.response_spec` tries them.

The engine modules import this one for the shared type, so this one finds them by module path on first use
(as :mod:`orchestrator.engines.registry` finds the engines), never by an import statement.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BODY_READERS",
    "SOURCE_MODULES",
    "BodyReader",
    "ResponseSource",
    "SpecFigures",
    "body_readers",
    "response_source",
]

#: (figures, verify steps (> 0), completion tokens) -> (numerator, verify steps) of one response's ratio.
AcceptTerms = Callable[["SpecFigures", int, int], tuple[int, int]]
#: A whole response body (or the final chunks of a stream merged into one mapping) -> the figures it carries
#: and its completion-token count, each None when this reader finds none.
BodyReader = Callable[[Mapping[str, Any]], tuple["SpecFigures | None", "int | None"]]


@dataclass(frozen=True)
class ResponseSource:
    """What specsweep knows of one per-response source, given by the engine module that reads it.

    ``accept``: the terms of ``accept_len`` (tokens committed by verify steps, verify steps), None when the
    source has no verify-step count. ``engine_accept``: the engine's own (completion tokens, verify steps)
    where its formula differs from ``accept_len`` (None: it does not). ``tokens_per_pass``: the source's
    accepted drafts and completion tokens give tokens per target pass. ``definitions``: figure -> what it
    is, with the engine file, and ``where`` -> where in the response it is read.
    """

    definitions: Mapping[str, str]
    accept: AcceptTerms | None = None
    engine_accept: AcceptTerms | None = None
    tokens_per_pass: bool = False


@dataclass(slots=True)
class SpecFigures:
    """What one response said about its speculation, under the engine's own counts.

    ``source``: the name of the source (an engine module's constant, e.g. SGLang's ``sglext``); its
    :class:`ResponseSource` says how the figures combine. ``verify_steps``: the engine's count of verify
    steps (None where the source has none). ``accepted_drafts`` / ``proposed_drafts``: accepted and proposed
    draft tokens under the engine's names (each engine module says which). ``engine_accept_len``: the
    engine's own per-response figure as written, kept to check ours against.
    """

    source: str
    verify_steps: int | None = None
    accepted_drafts: int | None = None
    proposed_drafts: int | None = None
    engine_accept_len: float | None = None

    def accept_terms(self, completion_tokens: int) -> tuple[int, int] | None:
        """(tokens committed by verify steps, verify steps): ``accept_len`` of this response is their ratio."""
        steps = self.verify_steps
        if not steps:
            return None
        rule = response_source(self.source)
        if rule is None or rule.accept is None:
            return None
        return rule.accept(self, steps, completion_tokens)

    def engine_accept_terms(self, completion_tokens: int) -> tuple[int, int] | None:
        """The engine's own (completion tokens, verify steps), where the engine's formula differs from accept_len."""
        steps = self.verify_steps
        if not steps:
            return None
        rule = response_source(self.source)
        if rule is None or rule.engine_accept is None:
            return None
        return rule.engine_accept(self, steps, completion_tokens)

    def accept_len(self, completion_tokens: int) -> float | None:
        terms = self.accept_terms(completion_tokens)
        return terms[0] / terms[1] if terms else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "verify_steps": self.verify_steps,
            "accepted_drafts": self.accepted_drafts,
            "proposed_drafts": self.proposed_drafts,
            "engine_accept_len": self.engine_accept_len,
        }


def _int(value: object) -> int | None:
    return value if type(value) is int else None


def _float(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _first(*values: object) -> int | None:
    for value in values:
        if type(value) is int:
            return value
    return None


#: The built-in engines' response modules: each defines ``SOURCES`` (source name -> :class:`ResponseSource`).
SOURCE_MODULES: tuple[str, ...] = (
    "orchestrator.engines.sglang.responses",
    "orchestrator.engines.vllm.responses",
    "orchestrator.engines.llamacpp.responses",
)

#: The whole-body readers ("module:function"), in the order they are tried: the first figures found win, and
#: so does the first completion-token count (after the body's ``usage``).
BODY_READERS: tuple[str, ...] = (
    "orchestrator.engines.sglang.responses:read_sglext",
    "orchestrator.engines.vllm.responses:read_metrics",
    "orchestrator.engines.llamacpp.responses:read_timings",
    "orchestrator.engines.sglang.responses:read_meta_info",
)


@dataclass
class _Loaded:
    sources: dict[str, ResponseSource] = field(default_factory=dict)
    readers: tuple[BodyReader, ...] = ()


_lock = threading.Lock()
_loaded: _Loaded | None = None


def _resolve(target: str) -> Any:
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _load() -> _Loaded:
    global _loaded
    loaded = _loaded
    if loaded is not None:
        return loaded
    with _lock:
        if _loaded is None:
            sources: dict[str, ResponseSource] = {}
            for module in SOURCE_MODULES:
                for name, source in _resolve(f"{module}:SOURCES").items():
                    sources.setdefault(name, source)
            _loaded = _Loaded(sources, tuple(_resolve(target) for target in BODY_READERS))
        return _loaded


def response_source(name: str) -> ResponseSource | None:
    """The rule of the source called ``name`` (None for a source no engine module defines)."""
    return _load().sources.get(name)


def body_readers() -> tuple[BodyReader, ...]:
    """The whole-body readers of :data:`BODY_READERS`, resolved once."""
    return _load().readers
