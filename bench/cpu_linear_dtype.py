"""How long one linear layer of SmolLM2-135M takes on this CPU, by dtype and by rows (the batch's tokens).

SGLang's verify step multiplies batch x draft-token rows where an AR decode step of one request multiplies one
row. Quiet, the fastest of 9 trials: bf16 87 to 131 µs whatever the rows (1 to 8), float32 36 to 148 µs, about half
bf16's at 1 to 4 rows (bench/RESULTS-sglang.md). A first, unrepeated reading at load 5 (bf16 389 µs for one row,
3,022 to 4,667 µs for 2 to 4) was the machine's noise, not the dtype. Ratios within one run are what to read.

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
