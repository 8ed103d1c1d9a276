"""What the simulator logs with: ``LogFn``, one finished line at a time.

Each engine's own lines are built by its dialect (``orchestrator.sim.dialects``; the dialects live with their
engines, ``orchestrator/engines/<name>/simdialect.py``, which also has SGLang's decode-log line for callers
outside the simulator), citing the engine file each format comes from; the caller decides where lines go
(stdout, flushed per line, under the process service or systemd's journal).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

__all__ = ["LogFn", "Suppressor", "colourer", "unit_name"]

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


# vllm/logging_utils/formatter.py ColoredFormatter (0.32.0-0.33.0): the process prefix cyan, the level in its
# colour, the time and the file info grey, each followed by a reset; the message as it is.
_VLLM_LINE = re.compile(r"^(\(\S+ pid=\d+\)) (DEBUG|INFO|WARNING|ERROR|CRITICAL) (\S+ \S+) (\[[^\]]*\]) ")
_VLLM_COLOURS = {
    "DEBUG": "\x1b[37m",
    "INFO": "\x1b[32m",
    "WARNING": "\x1b[33m",
    "ERROR": "\x1b[31m",
    "CRITICAL": "\x1b[35m",
}
# llama.cpp common/log.cpp common_log_entry::print with colours on (common/log.h LOG_COL_*): the time blue, "I "
# green then the default colour; "W "/"E "/"D " coloured, their reset written after the message (so before the
# next line).
_LLAMA_LINE = re.compile(r"^(\d+\.\d\d\.\d{3}\.\d{3}) ([IWED]) ")
_LLAMA_COLOURS = {"I": "\x1b[32m", "W": "\x1b[35m", "E": "\x1b[31m", "D": "\x1b[33m"}


def colourer(log: LogFn, engine: str) -> LogFn:
    """The coloured-log fault (faults.py): each line as the engine's own formatter writes it under a terminal."""
    if engine == "vllm":

        def vllm(line: str) -> None:
            match = _VLLM_LINE.match(line)
            if match is None:
                log(line)
                return
            prefix, level, stamp, where = match.groups()
            log(
                f"\x1b[0;36m{prefix}\x1b[0;0m {_VLLM_COLOURS[level]}{level}\x1b[0m \x1b[90m{stamp}\x1b[0m "
                f"\x1b[90m{where}\x1b[0m {line[match.end() :]}"
            )

        return vllm
    if engine == "llamacpp":
        pending = [""]

        def llama(line: str) -> None:
            match = _LLAMA_LINE.match(line)
            if match is None:
                log(pending[0] + line)
                pending[0] = ""
                return
            stamp, level = match.groups()
            after = "\x1b[0m" if level == "I" else ""
            log(f"{pending[0]}\x1b[34m{stamp}\x1b[0m {_LLAMA_COLOURS[level]}{level} {after}{line[match.end() :]}")
            pending[0] = "\x1b[0m" if level != "I" else ""

        return llama
    return log
