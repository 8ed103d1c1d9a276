"""Running one simulator process: parse the flags, serve until SIGTERM/SIGINT, return an exit code.

``main`` is what ``python -m orchestrator.sim`` and ``specsweep sim`` call. Log lines go to stdout, flushed
one by one (under systemd they land in the journal; under the process service in its log file); whoever
starts the simulator with a pipe must read it, or the server blocks on a full pipe.

Exit codes: 0 after SIGTERM/SIGINT (within a fraction of a second), 1 for ``fail-start`` and start-up errors
(a port in use), 2 for bad flags; ``crash-after`` ends the process with 1 from inside the server.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Sequence
from typing import Any

from orchestrator.errors import SpecsweepError
from orchestrator.sim import gpus, logs
from orchestrator.sim.config import SimConfig, parse_args
from orchestrator.sim.server import SimServer

__all__ = ["main", "run", "serve", "stdout_log"]


def stdout_log(line: str) -> None:
    """Write one log line to stdout and flush it (a closed stdout drops the line rather than the server)."""
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


async def serve(config: SimConfig, log: logs.LogFn, stop: asyncio.Event) -> int:
    """Serve until ``stop`` is set (exit code 0) or the server ends on its own (its code)."""
    server = SimServer(config, log)
    await server.start()
    try:  # the model onto the fake GPUs CUDA_VISIBLE_DEVICES names (none without FAKE_GPU_STATE)
        gpus.claim(config.gpu_memory_mib, command=" ".join(sys.argv))
    except gpus.GpuOutOfMemory as oom:
        for line in oom.lines:
            log(line)
        await server.stop()
        return 1
    if config.faults.orphan_worker_mib:
        gpus.spawn_orphan(config.faults.orphan_worker_mib)
    stopper = asyncio.ensure_future(stop.wait())
    waiters: list[asyncio.Future[Any]] = [stopper, server.finished]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        return server.finished.result() if server.finished.done() else 0
    finally:
        stopper.cancel()
        await server.stop()
        gpus.release()


def run(config: SimConfig, log: logs.LogFn = stdout_log) -> int:
    """Run the simulator in this process until SIGTERM/SIGINT; return the exit code."""

    async def _main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        return await serve(config, log, stop)

    return asyncio.run(_main())


def main(argv: Sequence[str] | None = None, *, prog: str | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and run; errors become one line on stderr and exit 1/2."""
    try:
        config = parse_args(argv, prog=prog)
        return run(config)
    except SpecsweepError as exc:
        print(f"sim: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
