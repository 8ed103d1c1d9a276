"""The test host's fake GPUs, as a simulated server meets them: ``CUDA_VISIBLE_DEVICES`` honoured, memory
claimed per GPU, and a second server on a GPU that is taken failing to start with CUDA's out-of-memory error.

The GPUs are a small shared state file (``FAKE_GPU_STATE``: its path; ``FAKE_GPUS`` of them, default 8, each
``FAKE_GPU_TOTAL_MIB`` MiB, default 81559, an H100 80GB's) that the simulator writes and the nvidia-smi
stub (tests/data/fake-nvidia-smi/nvidia-smi) reads, under an ``flock`` of ``<state>.lock``::

    {"holders": [{"pid": 1234, "gpu": 0, "mib": 60000, "name": "python", "command": "..."}]}

``gpu`` is the physical index (``CUDA_VISIBLE_DEVICES=2,3`` puts a server's device 0 on GPU 2). A holder
whose process is gone no longer counts (a driver frees a dead process's memory), so a killed server frees
its GPUs, while a process that outlives its server (a worker left behind: the ``orphan-worker`` fault) keeps
holding them. Without ``FAKE_GPU_STATE`` the simulator claims nothing.

The out-of-memory failure prints PyTorch's caching-allocator message (c10/cuda/CUDACachingAllocator.cpp,
``OutOfMemoryError``: "CUDA out of memory. Tried to allocate ... GPU 0 has a total capacity of ... of which
... is free. Process N has ... memory in use."), the device numbered as the process sees it, as a CUDA
server's start-up prints it, and the server exits 1.

``python -m orchestrator.sim.gpus hold --gpus 0,1 --mib M`` registers itself as a holder and sleeps until
it is killed: the worker the ``orphan-worker`` fault leaves.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["GpuOutOfMemory", "claim", "holders", "oom_lines", "release", "spawn_orphan", "visible_gpus"]

DEFAULT_GPUS = 8
DEFAULT_TOTAL_MIB = 81559.0


class GpuOutOfMemory(Exception):
    """A claim that does not fit: the lines a CUDA server prints, in ``lines``."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(lines[-1])
        self.lines = lines


def state_path() -> str | None:
    return os.environ.get("FAKE_GPU_STATE") or None


def gpu_total() -> tuple[int, float]:
    return int(os.environ.get("FAKE_GPUS", DEFAULT_GPUS)), float(
        os.environ.get("FAKE_GPU_TOTAL_MIB", DEFAULT_TOTAL_MIB)
    )


def visible_gpus(value: str | None, count: int) -> list[int]:
    """The physical GPUs ``CUDA_VISIBLE_DEVICES`` names (all of them when unset; CUDA stops at the first
    invalid entry, as the runtime does)."""
    if value is None:
        return list(range(count))
    out: list[int] = []
    for word in value.split(","):
        word = word.strip()
        if not word.isdigit() or int(word) >= count:
            break
        out.append(int(word))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


@contextlib.contextmanager
def _locked(path: str) -> Iterator[dict[str, Any]]:
    """The state, read and written back under the lock (dead holders dropped)."""
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path) as fh:
                state = json.load(fh)
        except (OSError, ValueError):
            state = {}
        state["holders"] = [h for h in state.get("holders", []) if _alive(int(h.get("pid", 0)))]
        yield state
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            json.dump(state, fh)
        os.replace(tmp, path)


def holders(path: str) -> list[dict[str, Any]]:
    """The live holders in the state file."""
    with _locked(path) as state:
        return list(state["holders"])


def _gib(mib: float) -> str:
    return f"{mib / 1024:.2f} GiB"


def oom_lines(device: int, want: float, total: float, free: float, others: list[dict[str, Any]]) -> list[str]:
    """What a CUDA server prints when its model does not fit (see the module docstring)."""
    who = " ".join(f"Process {h['pid']} has {_gib(float(h['mib']))} memory in use." for h in others)
    return [
        "Traceback (most recent call last):",
        '  File "/sim/model_runner.py", line 1, in load_model',
        "torch.OutOfMemoryError: CUDA out of memory. "
        f"Tried to allocate {_gib(want)}. GPU {device} has a total capacity of {_gib(total)} of which "
        f"{_gib(max(free, 0.0))} is free. {who} Of the allocated memory 0 bytes is allocated by PyTorch, and 0 "
        "bytes is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
    ]


def claim(mib: float, *, pid: int | None = None, command: str = "", path: str | None = None) -> list[int]:
    """Claim ``mib`` on each visible GPU for ``pid`` (this process); the GPUs claimed. GpuOutOfMemory when one
    of them has not that much free. Nothing (an empty list) without a state file."""
    path = path or state_path()
    if path is None or mib <= 0:
        return []
    count, total = gpu_total()
    gpus = visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"), count)
    if not gpus:
        raise GpuOutOfMemory(["RuntimeError: CUDA error: no CUDA-capable device is detected"])
    pid = pid or os.getpid()
    with _locked(path) as state:
        for device, gpu in enumerate(gpus):
            on = [h for h in state["holders"] if int(h["gpu"]) == gpu]
            free = total - sum(float(h["mib"]) for h in on)
            if free < mib:
                raise GpuOutOfMemory(oom_lines(device, mib, total, free, on))
        name = os.path.basename(sys.executable)
        for gpu in gpus:
            state["holders"].append({"pid": pid, "gpu": gpu, "mib": mib, "name": name, "command": command})
    return gpus


def release(pid: int | None = None, path: str | None = None) -> None:
    """Drop ``pid``'s (this process's) claims."""
    path = path or state_path()
    if path is None:
        return
    pid = pid or os.getpid()
    with contextlib.suppress(OSError), _locked(path) as state:
        state["holders"] = [h for h in state["holders"] if int(h["pid"]) != pid]


def spawn_orphan(mib: float) -> int | None:
    """Start the worker the ``orphan-worker`` fault leaves: a process in its own session holding ``mib`` on
    this server's GPUs until it is killed (its pid; None without a state file)."""
    if state_path() is None:
        return None
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.sim.gpus", "hold", "--mib", str(mib)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until it holds its GPUs, so no later claim slips in before it
        path = state_path()
        if path is not None and any(int(h["pid"]) == proc.pid for h in holders(path)):
            break
        time.sleep(0.05)
    return proc.pid


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.sim.gpus")
    sub = parser.add_subparsers(dest="command", required=True)
    hold = sub.add_parser("hold", help="hold memory on the visible fake GPUs until killed")
    hold.add_argument("--mib", type=float, default=2048.0)
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.command == "hold":
        try:
            claim(args.mib, command=" ".join([sys.executable, "-m", "orchestrator.sim.gpus", "hold"]))
        except GpuOutOfMemory as exc:
            print("\n".join(exc.lines), file=sys.stderr)
            return 1
        while True:
            time.sleep(3600)
    return 2  # pragma: no cover - argparse refuses other commands


if __name__ == "__main__":
    sys.exit(main())
