"""Template fields in experiment files: ``{budget}`` style placeholders, ``{{`` and ``}}`` for literal braces.

Only bare names are allowed (no attribute access, indexing, conversions or format specs), so rendering can
never run code or reach into objects. Every placeholder is checked when the file is loaded.
"""

from __future__ import annotations

import string
from collections.abc import Mapping

__all__ = ["TemplateSyntaxError", "fields", "render"]

_FORMATTER = string.Formatter()


class TemplateSyntaxError(ValueError):
    """A template that is not well formed (an unmatched brace, a non-name field)."""


def fields(template: str) -> list[str]:
    """The placeholder names of ``template``, in order of appearance, without repeats."""
    names: list[str] = []
    try:
        parsed = list(_FORMATTER.parse(template))
    except ValueError as exc:
        raise TemplateSyntaxError(f"bad template {template!r}: {exc} (write {{{{ and }}}} for literal braces)") from exc
    for _literal, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise TemplateSyntaxError(
                f"bad placeholder {{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}} "
                f"in {template!r}: only bare names like {{budget}} are allowed"
            )
        if name not in names:
            names.append(name)
    return names


def render(template: str, values: Mapping[str, object]) -> str:
    """Fill ``template`` from ``values``; every placeholder must have a value (checked at load time)."""
    out: list[str] = []
    for literal, name, _spec, _conv in _FORMATTER.parse(template):
        out.append(literal)
        if name is not None:
            out.append(_stringify(values[name]))
    return "".join(out)


def _stringify(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
