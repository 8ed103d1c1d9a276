"""The event loop a load run runs on: uvloop when it is installed, else asyncio's own.

A token stream costs the client a socket read, a parser call and a coroutine's worth of Python per token
(one token per read, as real engines write them); uvloop does the loop's and the transport's share of that in
C. Measured in bench/RESULTS-load.md: about a tenth less CPU per token at one token per read, nothing at
several. ``SPECSWEEP_EVENT_LOOP=asyncio`` forces asyncio's loop (to compare, or to rule uvloop out).

Only the processes the load generator owns choose their loop (``specsweep load``, the load workers); a caller
that runs ``run_load`` inside its own loop keeps that loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_factory", "loop_name", "run"]

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's ``new_event_loop`` when uvloop is importable and not turned off; None (asyncio's) otherwise."""
    if os.environ.get("SPECSWEEP_EVENT_LOOP", "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio``: which loop measured a run (kept with its results)."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` on the loop :func:`loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(coro)
