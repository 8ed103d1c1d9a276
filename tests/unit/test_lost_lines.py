"""journald's notices of lost lines (orchestrator/engines/lost.py) and a window that holds one.

The notices' text is systemd 252's (the format strings in systemd-journald: ``Suppressed %i messages from
%s``, ``Forwarding to syslog missed %u messages.``, ``Failed to write entry to %s (%zu items, %zu bytes) despite
vacuuming, ignoring: %m``); tests/system/test_journal_rate_limit.py has real journald write the first one.
"""

from __future__ import annotations

import json

import pytest

from orchestrator.engines.lost import lost_lines
from orchestrator.metrics import parse_window

DECODE = (
    "[2026-05-30 00:39:10 TP0] Decode batch, #running-req: 1, #token: 1234, token usage: 0.01, accept len: 3.52, "
    "accept rate: 0.63, cuda graph: True, gen throughput (token/s): 86.12, #queue-req: 0,\n"
)


@pytest.mark.parametrize(
    ("line", "count", "said"),
    [
        pytest.param("Suppressed 12 messages from sglang.service", 12, "rate limit suppressed 12", id="message"),
        pytest.param(
            "Dec 03 16:20:01 gpu1 systemd-journald[212]: Suppressed 7 messages from vllm.service",
            7,
            "from vllm.service",
            id="short-output",
        ),
        pytest.param(
            "Dec 03 16:20:01 gpu1 systemd-journald[212]: Forwarding to syslog missed 31 messages.",
            31,
            "a syslog copy lacks them",
            id="syslog",
        ),
        pytest.param(
            "Failed to write entry to /var/log/journal/x/system.journal (21 items, 731 bytes) despite vacuuming, "
            "ignoring: No space left on device",
            None,
            "the journal was full",
            id="full-journal",
        ),
    ],
)
def test_each_notice_is_read(line: str, count: int | None, said: str) -> None:
    (found,) = lost_lines("first line\n" + line + "\nlast line\n")
    assert (found.line, found.count) == (2, count)
    assert said in found.detail


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("Missed 3 kernel messages", id="kernel-lines-are-not-an-engines"),
        pytest.param('INFO: user said "Suppressed 12 messages from sglang.service" today', id="quoted"),
        pytest.param("Suppressed 12 messages from sglang.service and more", id="not-the-whole-message"),
    ],
)
def test_lines_that_are_not_a_notice_of_lost_engine_lines(line: str) -> None:
    assert lost_lines(line + "\n") == []


@pytest.mark.parametrize("engine", ["sglang", "vllm", "llamacpp", "sim"])
def test_a_window_with_a_notice_gives_no_log_figure_for_every_engine(engine: str) -> None:
    text = DECODE * 3 + "Suppressed 12 messages from x.service\n" + DECODE
    wm = parse_window(engine, text)
    assert wm.integrity.names() == ["lost_lines"] and wm.integrity.part is None
    assert (wm.accept_len, wm.acceptance_rate, wm.gen_throughput) == (None, None, None)
    assert wm.exactness == {} and wm.details["lost_lines"]["messages"] == 12
    assert (wm.integrity.describe() or "").endswith("(no figures)")
    assert "lost_lines" in wm.definitions
    whole = parse_window("sglang", DECODE * 4)
    assert whole.integrity.whole and whole.accept_len is not None


CURSOR = "s=a2f98433d91a4b7891736316868965e0;i=32;b=3e6086dd3a044029bcbf85b2218a9f98;m=3ff7f792;t=661bd2e85e3ed;x=ca"


def _first(seqnum: str, space: str = "a2f98433d91a4b7891736316868965e0") -> str:
    return json.dumps({"__CURSOR": f"s={space};i={seqnum};b=3e60;m=400d66db;t=661bd2e9b5337;x=c9"}) + "\n"


@pytest.mark.parametrize(
    ("first", "gone"),
    [
        pytest.param(_first("32"), None, id="the-cursors-entry-is-there"),
        pytest.param(_first("38"), "first 6 entries", id="vacuumed-up-to-a-later-entry"),
        pytest.param(_first("40", space="0" * 32), "another sequence-number space", id="files-replaced"),
        pytest.param("", "nor any entry after it", id="nothing-left"),
    ],
)
def test_journal_gap_from_the_first_entry_the_journal_holds_from_the_cursor(first: str, gone: str | None) -> None:
    from orchestrator.services.systemd import journal_gap

    said = journal_gap(CURSOR, first)
    assert (said is None) if gone is None else (said is not None and gone in said)
