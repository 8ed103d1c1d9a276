"""A shipped real-engine sweep file (sweeps/vllm-cpu.yaml, sweeps/sglang-cpu.yaml) made small for a test: its own
free port, one speculative configuration, two loads of three requests. Shared by the real-vLLM and real-SGLang
tests, which ran the same copy of it each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.reliability.harness import free_port


def small_copy(sweep: Path, tmp_path: Path, *, k: int, max_tokens: int) -> tuple[Path, int]:
    """``sweep`` with a free port, ngram ``k`` only, C = 1 and 2 of 3 requests of ``max_tokens``, no extra rounds
    (``load.decide``), and two lossless prompts, written under ``tmp_path``; with the port."""
    doc: dict[str, Any] = yaml.safe_load(sweep.read_text())
    port = free_port()
    doc["server"]["url"] = doc["server"]["url"].replace(str(doc["vars"]["port"]), str(port))
    doc["vars"]["port"] = port
    doc["variants"]["ngram"]["matrix"] = {"k": [k]}
    doc["load"].update({"concurrency": [1, 2], "requests": 3, "warmup": 1, "max_tokens": max_tokens})
    doc["load"].pop("decide", None)  # the points the test checks, not load.decide's extra rounds
    doc["lossless"] = {"prompts": 2}
    doc["checks"]["min_requests"] = 3
    path = tmp_path / sweep.name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path, port
