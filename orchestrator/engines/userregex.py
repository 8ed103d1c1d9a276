"""User regex parsers: ``(name, pattern)`` pairs declared in the experiment; named groups become fields.

Engine-neutral (not an engine package): a user's patterns are read beside any engine's lines
(orchestrator/metrics/window.py).

Every non-empty match of a pattern anywhere in the window's text is one sample whose named groups are typed
(int, float, bool, else text). The window aggregate gives, per parser, the number of matches and, per
numeric group, its mean, sum, min, max and last value. A bad pattern is a ``ConfigError`` naming the parser.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.engines.samples import ParseResult, UserSample, typed_value
from orchestrator.errors import ConfigError

__all__ = ["DEFINITION", "UserParser", "aggregate_user", "compile_user_parsers", "parse_user"]

DEFINITION = (
    "User parsers: per parser, the number of matches in the window (every match, rank copies included) and, "
    "per numeric named group, its mean, sum, min, max and last value over the matches."
)


@dataclass(frozen=True, slots=True)
class UserParser:
    name: str
    pattern: re.Pattern[str]


def compile_user_parsers(specs: Sequence[tuple[str, str] | UserParser]) -> list[UserParser]:
    """Compile ``(name, regex)`` pairs; an invalid regex or a duplicate name raises ``ConfigError``."""
    parsers: list[UserParser] = []
    names: set[str] = set()
    for spec in specs:
        if isinstance(spec, UserParser):
            parser = spec
        else:
            name, pattern = spec
            try:
                parser = UserParser(str(name), re.compile(pattern))
            except (re.error, TypeError) as exc:
                raise ConfigError(f"invalid regular expression {pattern!r}: {exc}", key=f"parsers.{name}") from exc
        if parser.name in names:
            raise ConfigError("two parsers have this name", key=f"parsers.{parser.name}")
        names.add(parser.name)
        parsers.append(parser)
    return parsers


def parse_user(text: str, parsers: Sequence[UserParser]) -> ParseResult:
    """Every non-empty match of every parser in ``text``, as ``UserSample``s in parser order."""
    result = ParseResult()
    for parser in parsers:
        for match in parser.pattern.finditer(text):
            if match.end() == match.start():
                continue  # a pattern that can match nothing would otherwise match between every character
            groups = {k: typed_value(v) for k, v in match.groupdict().items() if v is not None}
            result.samples.append(UserSample(parser=parser.name, groups=groups))
    return result


def aggregate_user(samples: Sequence[UserSample], parsers: Sequence[UserParser]) -> dict[str, Any]:
    """``{parser: {"matches": n, "groups": {group: {"mean", "sum", "min", "max", "last"}}}}``."""
    out: dict[str, Any] = {}
    for parser in parsers:
        mine = [s for s in samples if s.parser == parser.name]
        groups: dict[str, dict[str, float]] = {}
        values: dict[str, list[float]] = {}
        for s in mine:
            for key, value in s.groups.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    values.setdefault(key, []).append(float(value))
        for key, vals in values.items():
            groups[key] = {
                "mean": sum(vals) / len(vals),
                "sum": sum(vals),
                "min": min(vals),
                "max": max(vals),
                "last": vals[-1],
            }
        out[parser.name] = {"matches": len(mine), "groups": groups}
    return out
