"""vLLM's own per-request speculative figures, run on known steps: an oracle of test_responses_contract.py.

Run as a script in a subprocess, never imported by the test process::

    python vllm_responses_oracle.py SOURCES < SCENARIO.json

``SOURCES`` holds the Python files of a pinned vLLM wheel (tests/contract/wheels.py). The scenario: ``k``
(``num_speculative_tokens``) and, per request, the (drafted, accepted) tokens of each verify step. vLLM's code,
taken out of its files as text (``sglang_oracle.definitions``; the modules' own imports need torch and the
engine), runs on them:

- ``RequestSpecDecodeMetrics.new`` / ``observe`` / ``to_dict`` (vllm/v1/metrics/stats.py): the per-sequence
  accumulator the scheduler feeds once per verify step,
- ``build_spec_decoding_metrics`` (vllm/entrypoints/generate/base/serving.py), which the chat and completion
  servers call for ``n == 1`` only, over ``final_res.outputs[0]``,
- the pydantic models ``OpenAIBaseModel`` (vllm/entrypoints/serve/engine/protocol.py),
  ``SpeculativeDecodingMetrics`` and ``PerRequestMetrics`` (vllm/entrypoints/generate/base/protocol.py),
  dumped as the chat server's whole body does (``JSONResponse(content=response.model_dump())``).

Output on stdout: ``{"metrics": [{...}, ...]}``, one ``metrics`` object per request, as in a response body.
"""

from __future__ import annotations

import json
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sglang_oracle import definitions


class _Logger:
    def warning_once(self, *args: Any) -> None:
        return None

    def debug(self, *args: Any) -> None:
        return None


def main() -> None:
    root = Path(sys.argv[1])
    scenario = json.loads(sys.stdin.read())
    vllm = root / "vllm"
    module = types.ModuleType("vllm_protocol")  # pydantic resolves the models' annotations here
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    namespace.update(
        {
            "Any": Any,
            "ClassVar": ClassVar,
            "BaseModel": BaseModel,
            "ConfigDict": ConfigDict,
            "Field": Field,
            "model_validator": model_validator,
            "logger": _Logger(),
            "Literal": typing.Literal,
        }
    )
    definitions(vllm / "entrypoints" / "serve" / "engine" / "protocol.py", {"OpenAIBaseModel"}, namespace)
    namespace["_REMOVED_GUIDED_FIELDS"] = frozenset()
    definitions(
        vllm / "entrypoints" / "generate" / "base" / "protocol.py",
        {"SpeculativeDecodingMetrics", "PerRequestMetrics"},
        namespace,
    )
    for name in ("OpenAIBaseModel", "SpeculativeDecodingMetrics", "PerRequestMetrics"):
        namespace[name].model_rebuild()
    stats_module = types.ModuleType("vllm_stats")  # dataclasses read string annotations from the module
    sys.modules[stats_module.__name__] = stats_module
    stats_module.__dict__.update({"dataclass": dataclass, "field": field, "Any": Any})
    stats = definitions(vllm / "v1" / "metrics" / "stats.py", {"RequestSpecDecodeMetrics"}, stats_module.__dict__)[
        "RequestSpecDecodeMetrics"
    ]
    build = definitions(
        vllm / "entrypoints" / "generate" / "base" / "serving.py",
        {"build_spec_decoding_metrics"},
        {"SpeculativeDecodingMetrics": namespace["SpeculativeDecodingMetrics"]},
    )["build_spec_decoding_metrics"]
    out = []
    for steps in scenario["requests"]:
        metrics = stats.new(scenario["k"])
        for drafted, accepted in steps:
            metrics.observe(drafted, accepted)
        final_res = types.SimpleNamespace(outputs=[types.SimpleNamespace(spec_decode_metrics=metrics)])
        per_request = namespace["PerRequestMetrics"](speculative_decoding=build(final_res))
        out.append(per_request.model_dump())
    json.dump({"metrics": out}, sys.stdout)


if __name__ == "__main__":
    main()
