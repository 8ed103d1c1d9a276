"""Per-response speculative-decoding figures: the type every engine's reader fills, and the rules by source.

Each engine that writes speculative figures into its responses reads them in its own module
(``orchestrator/engines/<name>/responses.py``: the source names, their definitions with the engine files, the
readers) and gives them to the rest of the code as one :class:`ResponseFields`, its engine's
``response_fields()`` (:class:`~orchestrator.engines.base.Engine`). What they share lives here:
:class:`SpecFigures` (one response's figures, tagged with the name of the source they came from), the source
rules (:class:`ResponseSource`: how a source's figures give the ``accept_len`` terms, what each figure means),
:class:`ResponseFields`, and :func:`response_readers`, every engine's fields merged, through the registry
(:mod:`orchestrator.engines.registry`), which the load generator's decoders
(``orchestrator/load/decoders.py``) and :func:`orchestrator.load.spec.response_spec` read responses with.
A response says which engine wrote it by its fields, not by the experiment's ``engine:``, so every engine's
readers are tried on every response.

The engine modules import this one for the shared type, so this one reaches them only through the registry,
never by an import statement.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.engines.registry import BUILTIN, engine_names, generation, get_engine
from orchestrator.errors import ConfigError

__all__ = [
    "ACCEPTED_KEY",
    "DRAFTED_KEY",
    "BodyReader",
    "ExtensionReader",
    "ResponseFields",
    "ResponseReaders",
    "ResponseSource",
    "SpecFigures",
    "body_readers",
    "response_readers",
    "response_source",
]

#: The names a window's per-response summary gives its sums of drafted and of accepted draft tokens
#: (``orchestrator/load/spec.py`` ``summarize_spec``), which the analysis frame's columns use: llama.cpp's own
#: field names in its ``timings`` (``orchestrator/engines/llamacpp/responses.py``), kept for every engine.
DRAFTED_KEY = "draft_n"
ACCEPTED_KEY = "draft_n_accepted"

#: (figures, verify steps (> 0), completion tokens) -> (numerator, verify steps) of one response's ratio.
AcceptTerms = Callable[["SpecFigures", int, int], tuple[int, int]]
#: A whole response body (or the final chunks of a stream merged into one mapping) -> the figures it carries
#: and its completion-token count, each None when this reader finds none.
BodyReader = Callable[[Mapping[str, Any]], tuple["SpecFigures | None", "int | None"]]
#: The value of one top-level field an engine adds to an OpenAI chunk or body (SGLang's ``sglext``, vLLM's
#: ``metrics``, llama.cpp's ``timings``) -> the figures it carries and the prompt tokens it counts (each None
#: when it has none).
ExtensionReader = Callable[[object], tuple["SpecFigures | None", "int | None"]]
#: A native response's ``meta_info`` (SGLang's ``/generate``) -> its figures, None when it has none.
MetaInfoReader = Callable[[Mapping[str, Any]], "SpecFigures | None"]
#: The ``choices`` of a non-streamed chat body -> the figures the engine put in them, None when it put none.
ChoicesReader = Callable[[object], "SpecFigures | None"]


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
    #: The source's accepted drafts include drafts a request's last verify step accepted past its end, which it
    #: discards (SGLang: orchestrator/engines/sglang/overshoot.py): ``acceptance_rate`` is then the committed one,
    #: (tokens committed by verify steps - verify steps) / proposed, and the engine's own ``acceptance_rate_engine``.
    drafts_past_end: bool = False


@dataclass(slots=True)
class SpecFigures:
    """What one response said about its speculation, under the engine's own counts.

    ``source``: the name of the source (an engine module's constant, e.g. SGLang's ``sglext``); its
    :class:`ResponseSource` says how the figures combine. ``verify_steps``: the engine's count of verify
    steps (None where the source has none). ``accepted_drafts`` / ``proposed_drafts``: accepted and proposed
    draft tokens under the engine's names (each engine module says which). ``engine_accept_len``: the
    engine's own per-response figure as written, kept to check ours against. ``completion_tokens``: the
    engine's own completion-token count of these figures where the source gives one per response or per
    choice (SGLang; None elsewhere: then the response's ``usage`` count is used). ``accepted_histogram``:
    entry j = verify steps that accepted exactly j drafts (vLLM's ``acceptance_histogram``, SGLang's
    ``spec_correct_drafts_histogram``), None where the source has none.

    ``choices``: a response with several choices (SGLang with ``n > 1``: one entry per choice that verified)
    keeps each choice's own figures here, and the fields above hold their sums (``engine_accept_len`` None:
    the engine writes one per choice only). Every figure combines the choices as the engine's own counters
    do: each choice is a request of its own inside the engine, with its own prefill token and verify steps
    (:meth:`accept_terms`).
    """

    source: str
    verify_steps: int | None = None
    accepted_drafts: int | None = None
    proposed_drafts: int | None = None
    engine_accept_len: float | None = None
    completion_tokens: int | None = None
    accepted_histogram: tuple[int, ...] | None = None
    choices: tuple[SpecFigures, ...] = ()

    def accept_terms(self, completion_tokens: int) -> tuple[int, int] | None:
        """(tokens committed by verify steps, verify steps): ``accept_len`` of this response is their ratio.

        ``completion_tokens`` is the response's count (its ``usage``); the figures' own count, where the source
        gives one, is used instead. With several choices: the sums of each choice's terms, each from that
        choice's own count (None when a choice that verified has none: ``usage`` sums every choice and cannot
        be split among them)."""
        if self.choices:
            return _summed(c.accept_terms(0) if c.completion_tokens is not None else None for c in self._verified())
        steps = self.verify_steps
        if not steps:
            return None
        rule = response_source(self.source)
        if rule is None or rule.accept is None:
            return None
        tokens = self.completion_tokens if self.completion_tokens is not None else completion_tokens
        return rule.accept(self, steps, tokens)

    def engine_accept_terms(self, completion_tokens: int) -> tuple[int, int] | None:
        """The engine's own (completion tokens, verify steps), where the engine's formula differs from accept_len."""
        if self.choices:
            return _summed(
                c.engine_accept_terms(0) if c.completion_tokens is not None else None for c in self._verified()
            )
        steps = self.verify_steps
        if not steps:
            return None
        rule = response_source(self.source)
        if rule is None or rule.engine_accept is None:
            return None
        tokens = self.completion_tokens if self.completion_tokens is not None else completion_tokens
        return rule.engine_accept(self, steps, tokens)

    def _verified(self) -> list[SpecFigures]:
        return [choice for choice in self.choices if choice.verify_steps]

    def parts(self) -> tuple[SpecFigures, ...]:
        """The engine's requests behind this response: its choices, or itself."""
        return self.choices or (self,)

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
            "completion_tokens": self.completion_tokens,
            "accepted_histogram": list(self.accepted_histogram) if self.accepted_histogram is not None else None,
            "choices": [choice.to_dict() for choice in self.choices] if self.choices else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpecFigures | None:
        """The figures :meth:`to_dict` wrote (a requests file's ``spec``); None when it is not such a dict."""
        source = data.get("source")
        if not isinstance(source, str):
            return None
        histogram = data.get("accepted_histogram")
        choices = data.get("choices")
        return cls(
            source,
            verify_steps=_int(data.get("verify_steps")),
            accepted_drafts=_int(data.get("accepted_drafts")),
            proposed_drafts=_int(data.get("proposed_drafts")),
            engine_accept_len=_float(data.get("engine_accept_len")),
            completion_tokens=_int(data.get("completion_tokens")),
            accepted_histogram=_histogram(histogram),
            choices=tuple(
                c for c in (cls.from_dict(item) for item in choices if isinstance(item, Mapping)) if c is not None
            )
            if isinstance(choices, list)
            else (),
        )


def _summed(terms: Iterable[tuple[int, int] | None]) -> tuple[int, int] | None:
    numerator = denominator = 0
    for term in terms:
        if term is None:
            return None  # a choice that verified but whose terms are unknown: no figure for the response
        numerator += term[0]
        denominator += term[1]
    return (numerator, denominator) if denominator else None


def _histogram(value: object) -> tuple[int, ...] | None:
    """A histogram of accepted drafts per step: a list of non-negative integers, else None."""
    if isinstance(value, list | tuple) and all(type(v) is int and v >= 0 for v in value):
        return tuple(value)
    return None


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


@dataclass(frozen=True)
class ResponseFields:
    """What one engine writes into its responses and how specsweep reads it: an engine's
    ``response_fields()`` (each engine's ``responses.py`` builds it, citing the engine's files).

    ``sources``: source name -> its rule. ``extensions``: a top-level field the engine adds to an OpenAI chunk
    or body (and to its own native final chunk) -> its reader, which the streaming decoders call on every
    chunk that has the field (the last figures found win). ``body_readers``: whole-body readers, tried in the
    registry's order of engines, every engine's before any engine's ``late_body_readers`` (a field that
    also appears in answers that carry an extension, SGLang's ``meta_info``). ``meta_info``: the reader of a
    native ``/generate`` answer's ``meta_info``; ``choices``: the reader of the figures a non-streamed chat
    body carries in its choices (SGLang's ``return_meta_info``), tried when no extension gave any.
    """

    sources: Mapping[str, ResponseSource] = field(default_factory=dict)
    extensions: Mapping[str, ExtensionReader] = field(default_factory=dict)
    body_readers: tuple[BodyReader, ...] = ()
    late_body_readers: tuple[BodyReader, ...] = ()
    meta_info: MetaInfoReader | None = None
    choices: ChoicesReader | None = None


@dataclass(frozen=True)
class ResponseReaders:
    """Every engine's :class:`ResponseFields` merged (:func:`response_readers`): the first engine
    that names a source or an extension keeps it; the readers in the registry's order of engines."""

    sources: Mapping[str, ResponseSource]
    extensions: Mapping[str, ExtensionReader]
    body_readers: tuple[BodyReader, ...]
    meta_info: tuple[MetaInfoReader, ...]
    choices: tuple[ChoicesReader, ...]

    def read_meta_info(self, meta: Mapping[str, Any]) -> SpecFigures | None:
        """The figures of a native ``meta_info``: the first engine's reader that finds some."""
        for read in self.meta_info:
            found = read(meta)
            if found is not None:
                return found
        return None

    def read_choices(self, choices: object) -> SpecFigures | None:
        """The figures a non-streamed chat body carries in its ``choices``: the first engine's that has some."""
        for read in self.choices:
            found = read(choices)
            if found is not None:
                return found
        return None


_lock = threading.Lock()
_loaded: tuple[int, ResponseReaders] | None = None  # (the registry's generation, every engine's fields merged)


def _merge(every: Iterable[ResponseFields]) -> ResponseReaders:
    sources: dict[str, ResponseSource] = {}
    extensions: dict[str, ExtensionReader] = {}
    early: list[BodyReader] = []
    late: list[BodyReader] = []
    meta_info: list[MetaInfoReader] = []
    choices: list[ChoicesReader] = []
    for fields in every:
        for name, source in fields.sources.items():
            sources.setdefault(name, source)
        for key, reader in fields.extensions.items():
            extensions.setdefault(key, reader)
        early.extend(fields.body_readers)
        late.extend(fields.late_body_readers)
        if fields.meta_info is not None:
            meta_info.append(fields.meta_info)
        if fields.choices is not None:
            choices.append(fields.choices)
    return ResponseReaders(sources, extensions, (*early, *late), tuple(meta_info), tuple(choices))


def response_readers() -> ResponseReaders:
    """Every engine's response fields, merged: the registry's engines in its order (the built-in ones first,
    then those registered at run time, then entry points; an engine that shares another's fields, the
    simulator SGLang's, counted once), merged again only when an engine is registered at run time. An engine from
    outside that fails to load is left out (choosing it fails with the registry's error); one whose
    ``response_fields()`` is not a :class:`ResponseFields` is a ``ConfigError``."""
    global _loaded
    key = generation()
    loaded = _loaded
    if loaded is not None and loaded[0] == key:
        return loaded[1]
    names = engine_names()
    every: list[ResponseFields] = []
    for name in names:
        try:
            engine = get_engine(name)
        except ConfigError:
            if name in BUILTIN:
                raise
            continue
        fields = engine.response_fields()
        if fields is None or any(fields is seen for seen in every):
            continue
        if not isinstance(fields, ResponseFields):
            raise ConfigError(f"engine {name!r}: response_fields() gave {type(fields).__name__}, not ResponseFields")
        every.append(fields)
    merged = _merge(every)
    with _lock:
        if _loaded is None or _loaded[0] != key:
            _loaded = (key, merged)
        return _loaded[1]


def response_source(name: str) -> ResponseSource | None:
    """The rule of the source called ``name`` (None for a source no engine defines)."""
    return response_readers().sources.get(name)


def body_readers() -> tuple[BodyReader, ...]:
    """Every engine's whole-body readers, in the order they are tried (the first figures found win, and so
    does the first completion-token count after the body's ``usage``)."""
    return response_readers().body_readers
