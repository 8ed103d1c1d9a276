"""Lines a log says it lost: journald's notices that a window of it is not whole, whatever the engine.

A window is cut from the unit's journal (``journalctl -u UNIT``) or from a saved log; when the log itself
says it dropped lines, the figures from what is left are biased (intervals missing, not at random: a rate
limit drops the busiest seconds). systemd 252's journald writes, as its own messages (format strings in
``systemd-journald``, src/journal/):

- ``Suppressed %i messages from %s`` (journald-server.c ``dispatch_message``: its rate limit,
  ``RateLimitBurst=``/``RateLimitIntervalSec=`` or the unit's ``LogRateLimitBurst=``/``LogRateLimitIntervalSec=``,
  dropped ``N_DROPPED`` messages of the unit; ``MESSAGE_ID`` ``SD_MESSAGE_JOURNAL_DROPPED``). It is sent with
  the unit's pid as ``OBJECT_PID``, so it carries ``OBJECT_SYSTEMD_UNIT=UNIT`` and ``journalctl -u UNIT`` shows
  it among the unit's own lines: the runner's window holds it.
- ``Forwarding to syslog missed %u messages.`` (journald-syslog.c ``server_maybe_warn_forward_syslog_missed``):
  a syslog copy of the journal (``/var/log/syslog``, a shipper reading the syslog socket) lacks N messages; the
  journal has them. It breaks a window read from such a copy (``specsweep parse`` of a syslog file).
- ``Failed to write entry to %s (%zu items, %zu bytes) despite vacuuming, ignoring: %m`` (journald-server.c
  ``write_to_journal``): the journal was full and an entry was dropped.

``Missed %lu kernel messages`` (journald-kmsg.c ``dev_kmsg_record``) is not read: it is kernel lines that are
missing, never an engine's. The notices are matched as whole messages (a journal ``MESSAGE``, or a
``journalctl`` short line ending in ``systemd-journald[PID]: MESSAGE``), so an engine's line that quotes one is
not one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.engines.lines import candidate_lines

__all__ = ["LOST_LINES_DEFINITION", "LostLines", "lost_lines"]

LOST_LINES_DEFINITION = (
    "A window whose log says it lost lines is not whole (integrity 'lost_lines') and gives no log figure; the "
    "record's figures come from a whole source (/metrics, the responses). systemd 252's journald notices: "
    "'Suppressed N messages from UNIT' (journald-server.c dispatch_message, its rate limit; shown by journalctl "
    "-u UNIT, OBJECT_SYSTEMD_UNIT), 'Forwarding to syslog missed N messages.' (journald-syslog.c, a syslog copy "
    "lacks them) and 'Failed to write entry to FILE (...) despite vacuuming, ignoring' (journald-server.c "
    "write_to_journal, a full journal dropped an entry)."
)

_JOURNALD = r"(?:^|\ssystemd-journald(?:\[\d+\])?:\s)"
_NOTICES: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    (
        "Suppressed ",
        "journald's rate limit suppressed {n} message(s) from {what} (journald-server.c dispatch_message)",
        re.compile(_JOURNALD + r"Suppressed (?P<n>\d+) messages from (?P<what>\S+)\s*$"),
    ),
    (
        "Forwarding to syslog missed ",
        "journald's forwarding to syslog missed {n} message(s): a syslog copy lacks them "
        "(journald-syslog.c server_maybe_warn_forward_syslog_missed)",
        re.compile(_JOURNALD + r"Forwarding to syslog missed (?P<n>\d+) messages\.\s*$"),
    ),
    (
        " despite vacuuming, ignoring",
        "the journal was full and dropped an entry: write to {what} failed despite vacuuming "
        "(journald-server.c write_to_journal)",
        re.compile(
            _JOURNALD + r"Failed to write entry to (?P<what>\S+) \(\d+ items, \d+ bytes\) despite vacuuming, ignoring"
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class LostLines:
    """One notice: the line it is on (1-based), how many messages it says were lost (None when it does not
    say), and what it says, in words."""

    line: int
    count: int | None
    detail: str
    text: str


def lost_lines(text: str) -> list[LostLines]:
    """Every journald notice of lost lines in ``text``, in text order (the module docstring)."""
    found: list[tuple[int, LostLines]] = []
    for marker, template, pattern in _NOTICES:
        for offset, line in candidate_lines(text, (marker,)):
            match = pattern.search(line)
            if match is None:
                continue
            groups = match.groupdict()
            count = int(groups["n"]) if groups.get("n") else None
            detail = template.format(n=count, what=groups.get("what") or "")
            found.append((offset, LostLines(text.count("\n", 0, offset) + 1, count, detail, line.strip()[:300])))
    return [entry for _, entry in sorted(found, key=lambda pair: pair[0])]
