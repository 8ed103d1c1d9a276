"""What every section's model is built of: the strict base model, durations and scalars, the whole-string
patterns of names, units and URLs, and the check that a path, URL or name holds no control character."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict

from orchestrator.experiment.durations import parse_duration

__all__ = ["Duration", "Scalar"]

Duration = Annotated[float, BeforeValidator(parse_duration)]
Scalar = str | int | float | bool

# Whole-string patterns, always used with fullmatch (``re.match`` with ``$`` accepts a trailing newline).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_UNIT = re.compile(r"[A-Za-z0-9:_.\\@-]{1,240}\.service")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_URL = re.compile(r"https?://[^\s/?#]+(?:[/?#]\S*)?")
#: C0 and C1 controls, DEL and the Unicode line separators: never part of a path, URL, host or name.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _no_control(value: str | None, what: str) -> str | None:
    """``value`` unchanged, or a ValueError naming the control character a path, URL or name cannot hold."""
    if value is not None:
        hit = _CONTROL.search(value)
        if hit:
            raise ValueError(f"{what} cannot contain the control character {hit.group()!r}")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
