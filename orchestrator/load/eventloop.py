"""The event loop a load run runs on: uvloop when it is installed, else asyncio's own.

A token stream costs the client a socket read, a parser call and a coroutine's worth of Python per token
(one token per read, as real engines write them); uvloop does the loop's and the transport's share of that in
C. Measured in bench/RESULTS-load.md: about a tenth less CPU per token at one token per read, nothing at
several. ``SPECSWEEP_EVENT_LOOP=asyncio`` forces asyncio's loop (to compare, or to rule uvloop out).

Only the processes the load generator owns choose their loop (``specsweep load``, the load workers); a caller
that runs ``run_load`` inside its own loop keeps that loop. Those processes also tune the cyclic garbage
collector for the run (:func:`run`): what exists when the run starts (the imported modules, some 40,000
objects) is frozen out of its scans, and a collection waits for 7,000 new objects instead of 700. A run
allocates few cycles but keeps many containers (every request's record and its lists), and each
collection walked them all: in a firehose run at C=128 (4,096 requests of 256 tokens, 1.7 s of CPU) the
collections took 74 ms, 11 ms tuned.
"""

from __future__ import annotations

import asyncio
import gc
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


_GC_THRESHOLD0 = 7000  # new container objects between two collections of the youngest generation (CPython: 700)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` on the loop :func:`loop_factory` picks, the garbage collector tuned for the run and
    set back after it."""
    threshold = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(max(threshold[0], _GC_THRESHOLD0), *threshold[1:])
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            return runner.run(coro)
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
