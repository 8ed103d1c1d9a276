"""The simulator's log lines, in the formats SGLang (and a DDTree research build) print.

Only formatting lives here; the caller decides where lines go (stdout, flushed per line, under the process
service or systemd's journal). Scheduler lines carry SGLang's ``[YYYY-mm-dd HH:MM:SS TP0] `` prefix, server
lines ``[YYYY-mm-dd HH:MM:SS] ``; the DDTree line is bare, as a research build's ``print`` gives it. Like
SGLang, the ``Decode batch`` line has ``accept len``/``accept rate`` only when speculative decoding is on.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = [
    "LogFn",
    "bad_metric_lines",
    "crash_lines",
    "ddtree_metrics",
    "decode_batch",
    "fail_start_lines",
    "load_progress",
    "prefill_batch",
    "server",
    "tp0",
]

LogFn = Callable[[str], None]


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def tp0(message: str) -> str:
    """A scheduler line: ``[2026-05-30 00:39:10 TP0] message``."""
    return f"[{_now()} TP0] {message}"


def server(message: str) -> str:
    """A server (tokenizer manager / HTTP) line: ``[2026-05-30 00:39:10] message``."""
    return f"[{_now()}] {message}"


def decode_batch(
    *,
    running: int,
    tokens: int,
    usage: float,
    accept_len: float | None,
    accept_rate: float | None,
    throughput: float,
    queue: int,
) -> str:
    """SGLang's periodic decode line; the accept fields only when speculating."""
    spec = ""
    if accept_len is not None:
        spec = f"accept len: {accept_len:.2f}, "
        if accept_rate is not None:
            spec += f"accept rate: {accept_rate:.2f}, "
    return tp0(
        f"Decode batch, #running-req: {running}, #token: {tokens}, token usage: {usage:.2f}, {spec}"
        f"cuda graph: True, gen throughput (token/s): {throughput:.2f}, #queue-req: {queue},"
    )


def prefill_batch(*, new_seq: int, new_tokens: int, usage: float, running: int, queue: int) -> str:
    """SGLang's line for every prefill batch."""
    return tp0(
        f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_tokens}, #cached-token: 0, "
        f"token usage: {usage:.2f}, #running-req: {running}, #queue-req: {queue},"
    )


def ddtree_metrics(*, bs: int, budget: int, nodes: float, drafts: float, commit: float, depth: float) -> str:
    """The DDTree research build's per-interval line (``avg_actual_nodes`` counts the root too)."""
    return (
        f"DDTREE metrics: bs={bs} budget={budget} avg_actual_nodes={nodes:.2f} "
        f"avg_accepted_drafts={drafts:.2f} avg_commit_len={commit:.2f} avg_accepted_depth={depth:.2f}"
    )


def load_progress(done: int, total: int, elapsed: float, remaining: float) -> str:
    """A tqdm-style weight-loading progress line, as SGLang prints while loading shards."""
    pct = 100 * done // total if total else 100
    rate = f"{done / elapsed:5.2f}it/s" if elapsed >= 0.5 else "?it/s"  # tqdm's way before a rate settles
    return (
        f"Loading safetensors checkpoint shards: {pct:3d}% Completed | {done}/{total} "
        f"[{_mmss(elapsed)}<{_mmss(remaining)}, {rate}]"
    )


def _mmss(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


def fail_start_lines() -> list[str]:
    """What a scheduler that dies while loading prints: a Python traceback and SGLang's error line."""
    site = "/usr/local/lib/python3.11/site-packages/sglang/srt"
    return [
        tp0("Scheduler hit an exception: Traceback (most recent call last):"),
        f'  File "{site}/managers/scheduler.py", line 2710, in run_scheduler_process',
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
        f'  File "{site}/model_executor/model_runner.py", line 262, in __init__',
        "    self.load_model()",
        f'  File "{site}/model_loader/loader.py", line 381, in load_weights_and_postprocess',
        "    model.load_weights(weights)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity "
        "of 139.81 GiB of which 1.02 GiB is free. (simulated by --fault fail-start)",
        "",
        server("Received sigquit from a child process. It usually means the child failed."),
    ]


def crash_lines(completed: int) -> list[str]:
    """What a scheduler that dies mid-service prints before the process goes."""
    return [
        tp0("Scheduler hit an exception: Traceback (most recent call last):"),
        '  File "/usr/local/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 1022, '
        "in event_loop_overlap",
        "    batch_result = self.run_batch(batch)",
        "RuntimeError: CUDA error: an illegal memory access was encountered "
        f"(simulated by --fault crash-after={completed})",
        server("Received sigquit from a child process. It usually means the child failed."),
    ]


# Malformed variants a parser must skip and count without stopping: an unparseable number, a line cut short,
# a missing value, and a DDTree line with garbage in it.
_BAD_LINES: tuple[Callable[[], str], ...] = (
    lambda: tp0(
        "Decode batch, #running-req: 1, #token: 1234, token usage: 0.01, accept len: nan%, accept rate: , "
        "cuda graph: True, gen throughput (token/s): --, #queue-req: 0,"
    ),
    lambda: tp0("Decode batch, #running-req: 3, #token: 12"),
    lambda: "DDTREE metrics: bs=1 budget=7 avg_actual_nodes=8.00 avg_accepted_drafts=?? avg_commit_len=",
    lambda: tp0("Decode batch, #running-req: , #token: -1, token usage: x, accept len: 3.5.2, #queue-req: ,"),
)


def bad_metric_lines(index: int) -> list[str]:
    """The ``bad-metrics`` fault's line for interval ``index`` (rotates through the malformed variants)."""
    return [_BAD_LINES[index % len(_BAD_LINES)]()]
