"""The rich consoles the CLI renders to (stdout for results, stderr for errors and progress).

Everything they print passes the redactor first (orchestrator/redaction.py): a secret known anywhere in this
process (found in the plan, read for the server) or shaped like one never reaches the terminal, whatever line
(a point's failure, a server's log quoted as evidence, a progress line) carries it.
"""

from __future__ import annotations

import sys
from typing import IO

from rich.console import Console

from orchestrator.redaction import redact_text

__all__ = ["RedactingStream", "console", "err_console"]


class _Redacting:
    """A text stream that writes what it is given through :func:`redact_text` (the stream is looked up at each
    write, so a test's captured ``sys.stdout`` is the one written to)."""

    def __init__(self, stream: str) -> None:
        self._stream = stream

    @property
    def _target(self) -> IO[str]:
        return getattr(sys, self._stream)

    def write(self, text: str) -> int:
        self._target.write(redact_text(text))
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def isatty(self) -> bool:
        return self._target.isatty()

    def fileno(self) -> int:
        return self._target.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._target, "encoding", "utf-8") or "utf-8"


class RedactingStream:
    """``stream`` (the process's stdout or stderr) written through :func:`redact_text`: what ``typer.echo``,
    ``print`` and the consoles write while the CLI runs (:func:`orchestrator.cli.app.main`)."""

    def __init__(self, stream: IO[str]) -> None:
        self._wrapped = stream

    def write(self, text: str) -> int:
        self._wrapped.write(redact_text(text))
        return len(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self._wrapped, name)


console = Console(highlight=False, file=_Redacting("stdout"))  # type: ignore[arg-type]
err_console = Console(stderr=True, highlight=False, file=_Redacting("stderr"))  # type: ignore[arg-type]
