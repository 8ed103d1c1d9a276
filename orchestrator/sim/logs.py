"""Log-line helpers shared by the dialects, and SGLang's ``Decode batch`` line for callers outside the simulator.

Each engine's own lines are built by its dialect (``orchestrator.sim.dialects``), which cites the engine file
each format comes from; the caller decides where lines go (stdout, flushed per line, under the process service
or systemd's journal).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["LogFn", "bad_metric_lines", "decode_batch"]

LogFn = Callable[[str], None]


def decode_batch(
    *,
    running: int,
    tokens: int,
    usage: float,
    accept_len: float | None,
    accept_rate: float | None,
    throughput: float,
    queue: int,
    prefix: str = "",
) -> str:
    """SGLang 0.5.23's ``Decode batch`` line (sglang/srt/managers/scheduler_components/metrics_reporter.py
    ``report_decode_stats``): the accept fields only when speculating; ``prefix`` like ``" TP0"``."""
    spec = ""
    if accept_len is not None:
        spec = f"accept len: {accept_len:.2f}, accept rate: {accept_rate or 0.0:.2f}, "
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"[{stamp}{prefix}] Decode batch, #running-req: {running}, #token: {tokens}, token usage: {usage:.2f}, "
        f"{spec}cuda graph: True, gen throughput (token/s): {throughput:.2f}, #queue-req: {queue}"
    )


def bad_metric_lines(index: int) -> list[str]:
    """The SGLang dialect's ``bad-metrics`` fault lines for interval ``index`` (malformed on purpose)."""
    from orchestrator.sim.dialects.sglang import SGLangDialect

    return SGLangDialect.bad_lines(index)
