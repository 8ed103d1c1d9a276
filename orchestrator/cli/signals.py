"""The signals that stop a sweep or a playbook the way Ctrl-C does: the load stops, the hosts are restored, the
run is marked interrupted (exit 130).

SIGINT (Ctrl-C) and SIGTERM ask the run to stop. So does SIGHUP, which is what a closed terminal or a dropped
SSH session sends: without a handler it killed the controller on the spot, leaving the server running and the
host's lock and marker behind. A hangup also means the terminal is gone, so once it has said so the controller's
output goes to /dev/null (every later write to the dead terminal would fail, in the middle of the restore).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = ["STOPPING_SIGNALS", "stopping_signals"]

STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _detach_output() -> None:
    """Point stdout and stderr at /dev/null (the terminal they wrote to has hung up)."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            os.dup2(null, fd)
        os.close(null)


@contextlib.contextmanager
def stopping_signals(request_stop: Callable[[], None], say: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, each of :data:`STOPPING_SIGNALS` calls ``request_stop`` (after ``say`` says so);
    the previous handlers come back afterwards."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):
            if signum == signal.SIGHUP:
                say("hangup: the terminal is gone; stopping the load and restoring the host")
            else:
                say("interrupt: stopping the load and restoring the host...")
        if signum == signal.SIGHUP:
            _detach_output()
        request_stop()

    previous = {s: signal.signal(s, on_signal) for s in STOPPING_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
