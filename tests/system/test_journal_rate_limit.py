"""Real journald dropping a unit's lines: its rate limit's notice is in the unit's window, and the window is
read as not whole.

A unit on the test host (real systemd 252 and journald) with ``LogRateLimitIntervalSec=``/``LogRateLimitBurst=``
set low in a drop-in prints a burst of SGLang ``Decode batch`` lines, waits past the interval and prints one
more: journald drops most of the burst and, when the next line passes, writes ``Suppressed N messages from
UNIT`` (journald-server.c ``dispatch_message``) with the unit's pid as its object, so ``journalctl -u UNIT``
(specsweep's ``SystemdService.journal_since``, over SSH) holds it. ``parse_window`` says the window lost lines
and gives no figure.
"""

from __future__ import annotations

import itertools

import pytest

from orchestrator.metrics import parse_window
from orchestrator.services import SystemdService
from tests.system.support import TestHost, wait_for

pytestmark = pytest.mark.timeout(120)

BURST = 400
LINE = (
    "[2026-05-30 00:39:10] Decode batch, #running-req: 1, #token: 100, token usage: 0.01, accept len: 3.00, "
    "accept rate: 0.66, cuda graph: True, gen throughput (token/s): 80.00, #queue-req: 0,"
)
_units = itertools.count(1)


def test_journald_rate_limit_notice_is_in_the_units_window(testhost: TestHost) -> None:
    unit = f"specsweep-chatty{next(_units)}.service"
    script = f'for i in $(seq 1 {BURST}); do echo "{LINE}"; done; sleep 2.5; echo "{LINE}"'
    text = (
        f"[Unit]\nDescription=specsweep rate-limit test\n\n[Service]\nType=oneshot\nExecStart=/bin/bash -c '{script}'\n"
    )
    dropin = "[Service]\nLogRateLimitIntervalSec=2s\nLogRateLimitBurst=10\n"
    testhost.admin(
        f"cat > /etc/systemd/system/{unit} <<'EOF'\n{text}EOF\nmkdir -p /etc/systemd/system/{unit}.d\n"
        f"cat > /etc/systemd/system/{unit}.d/50-ratelimit.conf <<'EOF'\n{dropin}EOF\nsystemctl daemon-reload"
    )
    ssh = testhost.ssh()
    try:
        service = SystemdService(ssh, unit)
        cursor = service.journal_cursor()
        testhost.admin(f"systemctl start --no-block {unit}")
        wait_for(lambda: "Suppressed" in service.journal_since(cursor).text, timeout=60, interval=0.5)
        window = service.journal_since(cursor).text
        printed = window.count("Decode batch")
        assert 0 < printed < BURST + 1  # journald dropped some of the unit's lines
        notice = next(line for line in window.splitlines() if line.startswith("Suppressed "))
        assert notice.endswith(f" messages from {unit}")
        dropped = int(notice.split()[1])
        assert printed + dropped == BURST + 1  # every line is either in the window or counted in the notice
        wm = parse_window("sglang", window, cut=True)
        assert wm.integrity.names() == ["lost_lines"] and wm.integrity.part is None
        assert wm.accept_len is None and wm.gen_throughput is None
        assert wm.details["lost_lines"]["messages"] == dropped
        assert f"journald's rate limit suppressed {dropped} message(s) from {unit}" in (wm.integrity.describe() or "")
    finally:
        ssh.close()
        testhost.admin(
            f"systemctl stop {unit}; rm -rf /etc/systemd/system/{unit} /etc/systemd/system/{unit}.d; "
            f"systemctl daemon-reload; systemctl reset-failed {unit} 2>/dev/null; true",
            check=False,
        )


def test_a_window_whose_start_the_journal_vacuumed_says_so(testhost: TestHost) -> None:
    # journalctl --cursor on a cursor whose entry was vacuumed away starts at the next entry it still holds and
    # exits 0: the unit's lines of the window are gone without a word. journal_since sees it.
    unit = f"specsweep-vacuum{next(_units)}.service"
    text = (
        "[Unit]\nDescription=specsweep vacuum test\n\n[Service]\nType=oneshot\n"
        f"ExecStart=/bin/bash -c 'echo \"{LINE}\"'\n"
    )
    testhost.admin(f"cat > /etc/systemd/system/{unit} <<'EOF'\n{text}EOF\nsystemctl daemon-reload")
    ssh = testhost.ssh()
    try:
        service = SystemdService(ssh, unit)
        cursor = service.journal_cursor()
        testhost.admin(f"systemctl start {unit}")
        wait_for(lambda: "Decode batch" in service.journal_since(cursor))
        whole = service.journal_since(cursor)
        assert whole.lost is None  # the journal holds the cursor's entry: nothing removed
        assert parse_window("sglang", whole, lost=whole.lost).integrity.whole
        testhost.admin("journalctl --sync; journalctl --rotate; journalctl --vacuum-files=1 >/dev/null 2>&1")
        gone = service.journal_since(cursor)
        assert "Decode batch" not in gone  # the window's line went with the vacuumed file
        assert gone.lost is not None and "no longer holds the window's" in gone.lost
        wm = parse_window("sglang", gone, cut=True, lost=gone.lost)
        assert wm.integrity.names() == ["lost_lines"] and wm.details["lost_lines"]["reader"] == gone.lost
    finally:
        ssh.close()
        testhost.admin(
            f"rm -f /etc/systemd/system/{unit}; systemctl daemon-reload; "
            f"systemctl reset-failed {unit} 2>/dev/null; true",
            check=False,
        )
