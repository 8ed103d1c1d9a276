"""Run vLLM V0's own speculative-decoding counting and formatting code on known verify steps.

Run as a script in a subprocess with the unpacked Python files of a V0-era vLLM wheel (0.9.2: the last one
with V0 speculative decoding) as the first argument, the scenario as JSON on stdin, the result as JSON on
stdout::

    {"k": 3, "events": [
        {"op": "verify", "accepted": [[1, 1, 0], [1, 0, 1]]},   # one verify step: per sequence, per draft position,
                                                                 # did the verifier accept the draft token
        {"op": "advance", "s": 5.0},                             # the clock moves on
        {"op": "step"},                                          # one engine step: the worker polls its collector
        {"op": "log"}]}                                          # the engine's local log interval ends

vLLM's code that runs, unchanged, loaded straight from its files (the ``vllm`` package ``__init__`` of that
release imports the whole engine, so its files are loaded by path):

- ``vllm/model_executor/layers/spec_decode_base_sampler.py``: ``SpecDecodeBaseSampler._create_output`` builds the
  output tokens and adds to the sampler's cumulative ``num_accepted_tokens``, ``num_emitted_tokens`` and
  ``num_draft_tokens`` (the counts the line prints);
- ``vllm/spec_decode/metrics.py``: ``AsyncMetricsCollector.maybe_collect_rejsample_metrics`` copies those counts
  every ``collect_interval_s`` (5 s) and builds ``SpecDecodeWorkerMetrics`` (acceptance rate, system efficiency);
- ``vllm/engine/metrics.py``: ``LoggingStatLogger._format_spec_decode_metrics_str``, the line's text (taken out
  of the file with ``ast``: importing that module needs the engine).

Stubbed: ``vllm.platforms.current_platform`` (a device stream and event that do nothing, so the copy runs on CPU
tensors) and ``vllm.utils.is_pin_memory_available`` (False). The log interval itself is imitated as
``vllm/engine/metrics.py`` ``LoggingStatLogger.log`` does it: the latest metrics collected during the
interval are printed once, then forgotten; nothing is printed for an interval without a collection.
Needs torch (CPU) and msgspec.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import sys
import types
from pathlib import Path


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Stream:
    def wait_stream(self, other: object) -> None:
        return None


class _Event:
    def record(self, stream: object = None) -> None:
        return None

    def synchronize(self) -> None:
        return None


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _method_from_file(path: Path, class_name: str, method: str) -> types.FunctionType:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    item.returns = None
                    for arg in item.args.args:
                        arg.annotation = None
                    module = ast.Module(body=[item], type_ignores=[])
                    namespace: dict[str, object] = {}
                    exec(compile(module, str(path), "exec"), namespace)
                    function = namespace[method]
                    assert isinstance(function, types.FunctionType)
                    return function
    raise SystemExit(f"{class_name}.{method} not found in {path}")


def main() -> int:
    root = Path(sys.argv[1])
    scenario = json.load(sys.stdin)
    import torch

    for package in ("vllm", "vllm.model_executor", "vllm.model_executor.layers", "vllm.spec_decode"):
        stub = types.ModuleType(package)
        stub.__path__ = []  # type: ignore[attr-defined]
        sys.modules[package] = stub
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(  # type: ignore[attr-defined]
        Stream=_Stream,
        Event=_Event,
        current_stream=lambda: _Stream(),
        stream=lambda s: contextlib.nullcontext(),
        is_cuda_alike=lambda: True,
    )
    sys.modules["vllm.platforms"] = platforms
    utils = types.ModuleType("vllm.utils")
    utils.is_pin_memory_available = lambda: False  # type: ignore[attr-defined]
    sys.modules["vllm.utils"] = utils

    base = _load(
        "vllm.model_executor.layers.spec_decode_base_sampler",
        root / "vllm/model_executor/layers/spec_decode_base_sampler.py",
    )
    metrics = _load("vllm.spec_decode.metrics", root / "vllm/spec_decode/metrics.py")
    format_line = _method_from_file(
        root / "vllm/engine/metrics.py", "LoggingStatLogger", "_format_spec_decode_metrics_str"
    )

    class Sampler(base.SpecDecodeBaseSampler):  # type: ignore[misc,name-defined]
        def forward(self, *args: object, **kwargs: object) -> None:  # the abstract verify step; unused
            raise NotImplementedError

    k = int(scenario["k"])
    sampler = Sampler()
    sampler.init_tensors(0, device_type="cpu")
    clock = _Clock()
    collector = metrics.AsyncMetricsCollector(sampler, timer=clock)
    collector.init_tensors(0, device_type="cpu")

    lines: list[str] = []
    latest = None
    token = 100
    for event in scenario["events"]:
        op = event["op"]
        if op == "verify":
            accepted = torch.tensor(event["accepted"], dtype=torch.bool)
            batch = accepted.shape[0]
            draft = torch.arange(token, token + batch * k, dtype=torch.int64).reshape(batch, k)
            substitute = draft + 10_000
            bonus = torch.arange(batch, dtype=torch.int64).reshape(batch, 1) + 20_000
            token += batch * k
            sampler._create_output(accepted, substitute, draft, bonus)
        elif op == "advance":
            clock.now += float(event["s"])
        elif op == "step":
            got = collector.maybe_collect_rejsample_metrics(k)
            if got is not None:
                latest = got
        elif op == "log":
            if latest is not None:
                lines.append(format_line(None, latest))
                latest = None
        else:
            raise SystemExit(f"unknown op {op!r}")
    json.dump(
        {
            "lines": lines,
            "cumulative": {
                "accepted": int(sampler.num_accepted_tokens.item()),
                "emitted": int(sampler.num_emitted_tokens.item()),
                "draft_tokens": int(sampler.num_draft_tokens),
            },
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
