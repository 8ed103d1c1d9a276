"""The rich consoles the CLI renders to (stdout for results, stderr for errors and progress).

Both mask secrets (:func:`orchestrator.redaction.redact_text`) in what they write, terminal or not: the text
of each stretch between control codes is redacted once rendered into segments and before it is written. The
streams themselves are left as they are (a wrapper around a terminal's stream hung rich's live display), so
the live display, its cursor moves and its measurements are rich's own. A line that holds a secret is
written without its styles (its colours would have to be cut apart around the mask).
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

from orchestrator.redaction import redact_text

__all__ = ["RedactingConsole", "console", "err_console"]


class RedactingConsole(Console):
    """A rich Console whose output passes the redactor (module docstring)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(redacted_segments(buffer))


def redacted_segments(buffer: Iterable[Segment]) -> list[Segment]:
    """``buffer`` with each run of text segments (between control segments) redacted as one text: a secret
    split over several segments (a style change inside it) is found whole."""
    out: list[Segment] = []
    run: list[Segment] = []

    def flush() -> None:
        if not run:
            return
        text = "".join(segment.text for segment in run)
        if redact_text(text) == text:
            out.extend(run)
        else:  # line by line: only a line that holds a secret loses its styles
            lines = list(Segment.split_lines(run))
            for index, line in enumerate(lines):
                if index:
                    out.append(Segment("\n"))
                plain = "".join(segment.text for segment in line)
                shown = redact_text(plain)
                out.extend(line if shown == plain else [Segment(shown)])
            if text.endswith("\n"):
                out.append(Segment("\n"))
        run.clear()

    for segment in buffer:
        if segment.control:
            flush()
            out.append(segment)
        else:
            run.append(segment)
    flush()
    return out


console = RedactingConsole(highlight=False)
err_console = RedactingConsole(stderr=True, highlight=False)
