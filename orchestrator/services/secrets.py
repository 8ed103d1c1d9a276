"""Secrets on their way to the server, and kept out of everything specsweep writes or prints.

An experiment names a secret where it is on the controller (``environment: {HF_TOKEN: {secret_env:
HF_TOKEN}}``, :class:`~orchestrator.experiment.service.SecretSource`); plans, the resolved experiment, events and
errors carry that reference only. The value goes to the host in one file of mode 0600, written through the
command's stdin (never on a command line), and from there into the server's environment alone:

- systemd: ``/run/specsweep/<unit>.env`` (a tmpfs: gone at reboot), named by ``EnvironmentFile=`` in the
  drop-in or unit file, removed on restore. ``systemctl show`` shows the file's path, not its content.
- a process: ``<state dir>/<name>.launch``, read by the wrapper shell that starts the server and removed
  before the server runs, so the values live in the server's environment only.

A command word that is a secret's name, ``$HF_TOKEN`` or ``${HF_TOKEN}``, is that secret's value as one
argument (systemd substitutes ``${NAME}`` from the unit's environment; the process wrapper does the same). Any
other ``$`` stays a literal character. An argument is visible to every user of the host in its process list,
as every argument is: a server that reads its token from the environment keeps it from them.

Log text the service hands out (journal windows, the lines that explain a failure) passes through
:class:`Redactor`, which masks every secret value (and the server's API key) of at least
:data:`MIN_REDACTED` characters: a server that logs its own arguments does not put them in the run directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from orchestrator.errors import ServiceError
from orchestrator.quoting import usable_text, validate_env_name

__all__ = ["MIN_REDACTED", "Redactor", "env_file_text", "reference", "require_values"]

#: Shorter values are not masked in log text (they would match ordinary words and numbers of metric lines).
MIN_REDACTED = 8
_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def reference(word: str, names: Iterable[str]) -> str | None:
    """The secret a whole command word stands for (``$NAME`` or ``${NAME}``, NAME a secret), else None."""
    match = _REFERENCE.fullmatch(word)
    if match is None:
        return None
    name = match.group(1) or match.group(2)
    return name if name in set(names) else None


def _single_quoted(value: str) -> str:
    """``value`` in single quotes, each ``'`` closed, given in double quotes and reopened: read back exactly by
    a POSIX shell and by systemd's environment-file parser (src/basic/env-file.c parse_env_file_internal:
    SINGLE_QUOTE_VALUE keeps every character up to the next ``'``, DOUBLE_QUOTE_VALUE keeps a ``'``, and
    quoted pieces with nothing between them join into one value)."""
    return "'" + value.replace("'", "'\"'\"'") + "'"


def env_file_text(values: Mapping[str, str]) -> str:
    """``NAME='value'`` lines, one per secret (values are one line of text: checked when they were read)."""
    lines = []
    for name, value in values.items():
        validate_env_name(name)
        usable_text(value, what=f"the secret {name}")
        if "\n" in value or "\r" in value:
            raise ServiceError(f"the secret {name} holds a line break")
        lines.append(f"{name}={_single_quoted(value)}")
    return "".join(line + "\n" for line in lines)


def require_values(secrets: Mapping[str, object | None]) -> dict[str, str]:
    """The secrets' values in clear (for the one file that carries them), or ServiceError naming one that was
    never read (an experiment validated from stored data, not loaded from its file)."""
    out: dict[str, str] = {}
    for name, value in secrets.items():
        if value is None:
            raise ServiceError(f"the secret {name} was not read: load the experiment from its file to apply it")
        get = getattr(value, "get_secret_value", None)
        out[name] = get() if callable(get) else str(value)
    return out


class Redactor:
    """Masks secret values in text: each value of at least :data:`MIN_REDACTED` characters becomes
    ``[secret NAME]``."""

    def __init__(self, values: Mapping[str, str]) -> None:
        pairs = sorted(((v, k) for k, v in values.items() if len(v) >= MIN_REDACTED), key=lambda p: -len(p[0]))
        self._pairs = pairs
        self._pattern = re.compile("|".join(re.escape(v) for v, _ in pairs)) if pairs else None
        self._names = dict(pairs)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda m: f"[secret {self._names[m.group(0)]}]", text)

    def lines(self, lines: list[str]) -> list[str]:
        return [self(line) for line in lines] if self._pattern is not None else lines
