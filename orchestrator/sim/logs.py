"""What the simulator logs with: ``LogFn``, one finished line at a time.

Each engine's own lines are built by its dialect (``orchestrator.sim.dialects``; the dialects live with their
engines, ``orchestrator/engines/<name>/simdialect.py``, which also has SGLang's decode-log line for callers
outside the simulator), citing the engine file each format comes from; the caller decides where lines go
(stdout, flushed per line, under the process service or systemd's journal). The coloured-log fault's colours
are the dialect's too (``Dialect.coloured``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["LogFn", "Suppressor", "unit_name"]

LogFn = Callable[[str], None]


def unit_name(cgroup: Path = Path("/proc/self/cgroup"), default: str = "specsweep-sim.service") -> str:
    """The systemd unit this process runs in, as journald names it in its notices (the last ``.service`` part
    of the process's cgroup path), or ``default`` outside systemd."""
    try:
        text = cgroup.read_text()
    except OSError:
        return default
    for line in text.splitlines():
        for part in reversed(line.rpartition(":")[2].split("/")):
            if part.endswith(".service"):
                return part
    return default


class Suppressor:
    """The journal-suppress fault (faults.py): once ``after()`` reaches N, the next K lines are dropped, and the
    first line after them comes with journald's notice before it, as journald writes it when a unit's rate
    limit lets a message through again (systemd 252 journald-server.c ``dispatch_message``:
    ``Suppressed %i messages from %s``, the unit's name; under the unit's match, so ``journalctl -u`` shows it)."""

    def __init__(self, log: LogFn, after: Callable[[], int], start: int, lines: int, unit: str) -> None:
        self._log, self._after, self._start, self._lines, self._unit = log, after, start, lines, unit
        self._dropped = 0
        self._done = False

    def __call__(self, line: str) -> None:
        if self._done or self._after() < self._start:
            self._log(line)
            return
        if self._dropped < self._lines:
            self._dropped += 1
            return
        self._done = True
        self._log(f"Suppressed {self._dropped} messages from {self._unit}")
        self._log(line)
