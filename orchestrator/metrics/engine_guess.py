"""Which engine wrote a log, for the case that matters: the configured engine's parser read none of its lines.

A wrong ``engine:`` drops every server metric without an error (each parser only reads its own engine's
lines, :mod:`orchestrator.engines.sglang.log`, :mod:`~orchestrator.engines.vllm.log`,
:mod:`~orchestrator.engines.llamacpp.log`). :func:`engine_fit` runs the configured engine's parser and, when it
read nothing while the server logged lines, the other engines' parsers on the same text, and names the one
that reads most. ``sim`` prints SGLang's lines, so it and ``sglang`` are one family here. ``DDTREE
metrics:`` lines are read for every engine and decide no engine; a text that holds them is not silent (a server
metric was read: the DDTree averages).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.engines.ddtreelog import parse_ddtree
from orchestrator.engines.registry import engine_names, get_engine
from orchestrator.engines.samples import READ, ParseResult

__all__ = ["EngineFit", "engine_fit"]

_EXAMPLES = 3


@dataclass(frozen=True)
class EngineFit:
    """How well the configured engine's parser fits a text, and which engine fits it instead."""

    engine: str
    #: Non-empty lines in the text.
    lines: int
    #: Lines the configured engine's parser read, and lines carrying its markers it could not read.
    matched: int
    skipped: int
    #: The engine whose parser reads most of the text, when the configured one read nothing (else None).
    likely: str | None = None
    likely_matched: int = 0
    #: A few of the lines ``likely``'s parser read.
    examples: list[str] = field(default_factory=list)
    #: ``DDTREE metrics:`` lines read (every engine reads them: a server metric was read).
    ddtree: int = 0

    @property
    def silent(self) -> bool:
        """The server logged lines and neither the configured engine's parser nor the DDTree one (read for every
        engine) recognised any of them."""
        return self.lines > 0 and self.matched == 0 and self.skipped == 0 and self.ddtree == 0

    def describe(self) -> str | None:
        """The one-line warning for a silent fit (None when the parser read something)."""
        if not self.silent:
            return None
        if self.likely is not None:
            return (
                f"engine: {self.engine} read none of the {self.lines} lines the server logged, but the "
                f"{self.likely} parser reads {self.likely_matched} of them: the server looks like {self.likely} "
                f"(set engine: {self.likely}); no server metric was read"
            )
        return (
            f"engine: {self.engine} read none of the {self.lines} lines the server logged, and no other engine's "
            "parser reads them either: no server metric was read (check engine:, the server's log level and "
            "its metric logging interval)"
        )


def _lines_read(text: str, result: ParseResult, limit: int) -> list[str]:
    out: list[str] = []
    for offset in sorted(o for o, status in result.status.items() if status == READ):
        end = text.find("\n", offset)
        out.append(text[offset : end if end >= 0 else len(text)].strip()[:300])
        if len(out) >= limit:
            break
    return out


def engine_fit(engine: str, text: str) -> EngineFit:
    """Run ``engine``'s parser over ``text`` and, when it reads nothing, the other engines' (module docstring)."""
    lines = sum(1 for line in text.splitlines() if line.strip())
    names = engine_names()
    family = get_engine(engine).family if engine in names else engine
    # one parser per family (the simulator speaks SGLang's formats): the family's own engine reads for it
    parsers = {get_engine(name).family: get_engine(name) for name in reversed(names)}
    own = parsers[family].parse_log(text) if family in parsers else ParseResult()
    tree = parse_ddtree(text).matched if "DDTREE" in text else 0
    fit = EngineFit(engine=engine, lines=lines, matched=own.matched, skipped=own.skipped, ddtree=tree)
    if not fit.silent:
        return fit
    best: tuple[int, str, ParseResult] | None = None
    for name, parser in parsers.items():
        if name == family:
            continue
        result = parser.parse_log(text)
        if result.matched and (best is None or result.matched > best[0]):
            best = (result.matched, name, result)
    if best is None:
        return fit
    matched, name, result = best
    return EngineFit(
        engine=engine,
        lines=lines,
        matched=0,
        skipped=0,
        likely=name,
        likely_matched=matched,
        examples=_lines_read(text, result, _EXAMPLES),
    )
