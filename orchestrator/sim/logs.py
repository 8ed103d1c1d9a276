"""What the simulator logs with: ``LogFn``, one finished line at a time.

Each engine's own lines are built by its dialect (``orchestrator.sim.dialects``; the dialects live with their
engines, ``orchestrator/engines/<name>/simdialect.py``, which also has SGLang's decode-log line for callers
outside the simulator), citing the engine file each format comes from; the caller decides where lines go
(stdout, flushed per line, under the process service or systemd's journal).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["LogFn"]

LogFn = Callable[[str], None]
