"""Readers for the prompt-set formats the field uses, and the source a workload names.

A :class:`WorkloadSource` is what ``load.workloads.NAME`` says (orchestrator/experiment/load.py): a spec
(``builtin:NAME``, ``synthetic:in=N,out=M`` or a file path), a ``format``, an optional ``category`` and an
optional output-length cap. Formats, each read as the tool that defines it reads it:

``auto`` (and ``jsonl``)
    the layouts of :mod:`orchestrator.load.workloads`: one prompt per line (a string, ``prompt``/``text``/...,
    ``messages``, ShareGPT ``conversations``, SpecBench ``turns``) or a JSON list of them.
``sharegpt``
    ShareGPT's JSON list (or JSONL) of ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt",
    ...}]}``; the first human turn is the prompt. vLLM's ``ShareGPTDataset`` (vllm/benchmarks/datasets.py)
    takes ``conversations[0]["value"]`` of entries with at least two turns, the same turn for ShareGPT's files.
``specbench``
    Spec-Bench's ``data/spec_bench/question.jsonl``: one ``{"question_id": ..., "category": ..., "turns":
    [first, second, ...]}`` per line; the first turn is the prompt and ``category`` selects rows by equality,
    as vLLM's ``SpecBench`` dataset does (vllm/benchmarks/datasets.py ``SpecBench.load_data``: ``turns[0]``,
    ``--spec-bench-category``).
``speedbench``
    SPEED-Bench JSONL as AIPerf reads it (ai-dynamo/aiperf src/aiperf/dataset/loader/speed_bench.py
    ``SpeedBenchRow``/``SpeedBenchLoader``): ``{"question_id": ..., "category": ..., "messages": [{"role":
    ..., "content": ...}, ...]}``, ``category`` selecting rows by equality. The published file holds a
    placeholder instead of the text of prompts whose source may not be redistributed (``FULL BENCHMARK DATA
    SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH``); like AIPerf we refuse such rows and say to
    prepare the file first. Each request sends the messages up to the first user message (one turn).

The per-workload cap (``max_tokens``) bounds every prompt's own output length and is the length of prompts
that name none, so a runaway answer stops at a known length and shows as ``finish_reason: length``.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import LoadError

__all__ = ["FORMATS", "SPEED_BENCH_PLACEHOLDER", "WorkloadSource", "read_rows", "row_prompt_item", "select_rows"]

FORMATS = ("auto", "jsonl", "sharegpt", "specbench", "speedbench")
SPEED_BENCH_PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"


class CategoryError(LoadError):
    """No row of a file has the category asked for; ``categories`` lists those it has."""

    def __init__(self, message: str, categories: list[str]) -> None:
        super().__init__(message)
        self.categories = categories


@dataclass(frozen=True, slots=True)
class WorkloadSource:
    """Where one workload's prompts come from (see the module docstring)."""

    spec: str
    format: str = "auto"
    category: str | None = None
    max_tokens: int | None = None
    name: str | None = None

    def describe(self) -> str:
        parts = [self.spec]
        if self.format != "auto":
            parts.append(f"format {self.format}")
        if self.category is not None:
            parts.append(f"category {self.category}")
        if self.max_tokens is not None:
            parts.append(f"max_tokens {self.max_tokens}")
        return ", ".join(parts)


def read_rows(text: str, source: str) -> Iterator[tuple[str, Any]]:
    """(where, item) for each item of a JSON list or each non-empty line of a JSONL text."""
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LoadError(f"load: {source}:{exc.lineno}: not valid JSON: {exc.msg}") from exc
        for number, item in enumerate(items, 1):
            yield f"{source}: item {number}", item
        return
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LoadError(f"load: {source}:{number}: not valid JSON: {exc.msg}") from exc
        yield f"{source}:{number}", item


def select_rows(rows: list[tuple[str, Any]], category: str | None, source: str) -> list[tuple[str, Any]]:
    """The rows whose ``category`` equals ``category`` (every row without one); CategoryError when none does."""
    if category is None:
        return rows
    kept = [(where, item) for where, item in rows if isinstance(item, dict) and item.get("category") == category]
    if kept:
        return kept
    present = sorted({str(item["category"]) for _, item in rows if isinstance(item, dict) and "category" in item})
    close = difflib.get_close_matches(category, present, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listed = f" (its categories: {', '.join(present)})" if present else " (its rows have no 'category' field)"
    raise CategoryError(f"load: no row of {source} has category {category!r}{listed}{hint}", present)


def row_prompt_item(item: Any, where: str, fmt: str) -> Any:
    """The item the generic reader turns into a prompt, after the format's own checks (None: skip the row)."""
    if fmt in ("auto", "jsonl"):
        return item
    if not isinstance(item, dict):
        raise LoadError(f"load: {where}: a {fmt} row is an object, got {type(item).__name__}")
    if fmt == "sharegpt":
        if not isinstance(item.get("conversations"), list):
            raise LoadError(f"load: {where}: a ShareGPT entry needs 'conversations' (a list of from/value turns)")
        return {"conversations": item["conversations"], **_lengths(item)}
    if fmt == "specbench":
        turns = item.get("turns")
        if not isinstance(turns, list) or not turns or not isinstance(turns[0], str) or not turns[0].strip():
            raise LoadError(f"load: {where}: a SpecBench row needs 'turns', a list whose first item is the prompt")
        return {"prompt": turns[0], **_lengths(item)}
    if fmt == "speedbench":
        messages = item.get("messages")
        if not isinstance(messages, list) or not messages:
            raise LoadError(f"load: {where}: a SPEED-Bench row needs 'messages', a list of role/content objects")
        kept: list[dict[str, str]] = []
        for message in messages:
            if not isinstance(message, dict) or not isinstance(message.get("content"), str):
                raise LoadError(f"load: {where}: each SPEED-Bench message needs a string 'content'")
            if message["content"].strip() == SPEED_BENCH_PLACEHOLDER:
                raise LoadError(
                    f"load: {where}: this row holds SPEED-Bench's placeholder, not a prompt; prepare the dataset "
                    "with its own script first (the published file leaves some prompts out)"
                )
            kept.append({"role": str(message.get("role", "user")), "content": message["content"]})
            if kept[-1]["role"] == "user":
                break
        return {"messages": kept, **_lengths(item)}
    raise LoadError(f"load: unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def _lengths(item: dict[str, Any]) -> dict[str, Any]:
    return {k: item[k] for k in ("max_tokens", "output_len", "max_new_tokens") if k in item}
