"""How long one linear layer of SmolLM2-135M takes on this CPU, by dtype and by rows (the batch's tokens).

SGLang's verify step multiplies batch x draft-token rows where an AR decode step of one request multiplies one
row; with the CPU torch the engine venvs install, bf16 matrices of more than one row took 8 to 12 times as long
as one row, float32 ones about what their rows cost (bench/RESULTS-sglang.md). That is why sweeps/sglang-cpu.yaml
serves in float32. Ratios within one run are what to read: the machine is shared.

    $SGLANG_PYTHON bench/cpu_linear_dtype.py        # any python with torch
"""

from __future__ import annotations

import time

import torch

HIDDEN, INTERMEDIATE = 576, 1536  # SmolLM2-135M's MLP projection (its config.json)
CALLS, TRIALS = 50, 9


def per_call_us(rows: int, dtype: torch.dtype) -> float:
    """The fastest of TRIALS runs of CALLS calls (the least disturbed by the machine's other work)."""
    weight = torch.randn(INTERMEDIATE, HIDDEN, dtype=dtype)
    x = torch.randn(rows, HIDDEN, dtype=dtype)
    for _ in range(20):
        torch.nn.functional.linear(x, weight)
    best = float("inf")
    for _ in range(TRIALS):
        start = time.perf_counter()
        for _ in range(CALLS):
            torch.nn.functional.linear(x, weight)
        best = min(best, (time.perf_counter() - start) / CALLS)
    return best * 1e6


def main() -> None:
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| dtype | rows | µs a call | × one row |")
    print("|---|---|---|---|")
    for dtype in (torch.bfloat16, torch.float32):
        one = per_call_us(1, dtype)
        for rows in (1, 2, 4, 8):
            us = one if rows == 1 else per_call_us(rows, dtype)
            print(f"| {str(dtype).removeprefix('torch.')} | {rows} | {us:.0f} | {us / one:.1f} |")


if __name__ == "__main__":
    main()
