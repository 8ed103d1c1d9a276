"""SGLang's own response code, run on known choices: the oracle of tests/contract/test_sglang_responses_contract.py.

Run as a script in a subprocess, never imported by the test process::

    python sglang_responses_oracle.py SOURCES SCENARIO.json

``SOURCES`` holds the Python files of a pinned sglang wheel (tests/contract/wheels.py). The scenario gives, per
choice of one request, its completion tokens and the drafts each verify step accepted. What SGLang does with
them is SGLang's code, taken out of its files as text (``sglang_oracle.definitions``: the files' own imports
need torch and the whole server) and executed:

- per verify step, ``Req.update_spec_correct_drafts_histogram`` (managers/schedule_batch.py), with
  ``spec_verify_ct += 1`` and ``spec_num_correct_drafts += num_correct_drafts`` as
  batch_result_processor.py ``process_batch_result_decode`` adds them;
- once the choice finished, ``TokenizerManager._calculate_spec_decoding_metrics`` (managers/tokenizer_manager.py):
  the choice's ``meta_info`` speculative fields (written only when ``spec_verify_ct > 0``);
- the whole response: ``OpenAIServingCompletion._build_completion_response`` (entrypoints/openai/
  serving_completions.py) with utils.py ``process_spec_tokens_details_from_ret`` /
  ``spec_tokens_details_from_meta_info`` and the other ``process_*_from_ret`` helpers, usage_processor.py
  ``UsageProcessor``, utils/weight_versions.py ``build_endpoint_weight_version_metadata`` and the pydantic
  models of entrypoints/openai/protocol.py, serialized as http_server.py's ``model_json_response`` does
  (utils/json_response.py: ``model_dump_json(by_alias=True)``);
- the stream: one ``CompletionStreamResponse`` content chunk per choice (serving_completions.py
  ``_generate_completion_stream``, ``chunk.model_dump_json()``), then that generator's own statement that
  builds ``sglext_spec_tokens_details`` (the ``if request.return_spec_tokens_details and spec_tokens_details:``
  block, taken out of the generator's body and executed), its sglext chunk (``choices=[]``) and its usage chunk
  (``UsageProcessor.calculate_streaming_usage``, ``model_dump_json(exclude_none=True)``).

The request is a stand-in with the fields these read (``n``, ``return_spec_tokens_details`` and the other
flags off). Output, one JSON object on stdout: ``{"meta_info": [...], "body": "<json>", "stream": ["data: ...",
...]}``.
"""

from __future__ import annotations

import ast
import json
import sys
import time
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_serializer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sglang_oracle import definitions

PROTOCOL = {
    "PromptTokensDetails",
    "CompletionTokensDetails",
    "UsageInfo",
    "CachedTokensDetails",
    "LogProbs",
    "SpecTokensDetails",
    "SglExt",
    "CompletionResponseChoice",
    "CompletionResponse",
    "CompletionResponseStreamChoice",
    "CompletionStreamResponse",
}
UTILS = {
    "spec_tokens_details_from_meta_info",
    "process_spec_tokens_details_from_ret",
    "process_routed_experts_from_ret",
    "process_cached_tokens_details_from_ret",
    "cached_tokens_details_from_dict",
    "process_hidden_states_from_ret",
}


def protocol(openai: Path) -> types.ModuleType:
    """The pydantic models of protocol.py, in a module of their own (pydantic resolves the annotations there)."""
    module = types.ModuleType("sglang_protocol")
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    namespace.update(
        {name: getattr(typing, name) for name in ("Any", "Dict", "List", "Literal", "Optional", "Tuple", "Union")}
    )
    namespace.update({"BaseModel": BaseModel, "Field": Field, "model_serializer": model_serializer, "time": time})
    definitions(openai / "protocol.py", PROTOCOL, namespace)
    for name in PROTOCOL:
        namespace[name].model_rebuild()
    return module


def stream_spec_block(path: Path) -> types.CodeType:
    """The statement of ``_generate_completion_stream`` that turns the per-choice details into the sglext
    chunk's ``spec_tokens_details`` (SGLang's own text)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "_generate_completion_stream":
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.If)
                    and isinstance(inner.test, ast.BoolOp)
                    and "return_spec_tokens_details" in ast.unparse(inner.test)
                    and "spec_tokens_details" in ast.unparse(inner.test).split(" and ")[-1]
                ):
                    return compile(ast.Module(body=[inner], type_ignores=[]), str(path), "exec", dont_inherit=True)
    raise SystemExit(f"{path}: no sglext spec_tokens_details block in _generate_completion_stream")


def main() -> None:
    root, scenario = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    srt = root / "sglang" / "srt"
    openai = srt / "entrypoints" / "openai"
    proto = protocol(openai)
    p = proto.__dict__
    spec = types.SimpleNamespace(speculative_num_draft_tokens=scenario["num_draft_tokens"])

    # The per-step bookkeeping and the finished request's meta_info.
    update = definitions(srt / "managers" / "schedule_batch.py", {"Req.update_spec_correct_drafts_histogram"}, {})[
        "update_spec_correct_drafts_histogram"
    ]
    calculate = definitions(
        srt / "managers" / "tokenizer_manager.py",
        {"TokenizerManager._calculate_spec_decoding_metrics"},
        {"get_spec": lambda: spec, "_ragged_verify_cap_accept": lambda: False, "Any": Any},
    )["_calculate_spec_decoding_metrics"]
    ret: list[dict[str, Any]] = []
    for index, choice in enumerate(scenario["choices"]):
        req = types.SimpleNamespace(spec_correct_drafts_histogram=[], spec_verify_ct=0, spec_num_correct_drafts=0)
        for correct in choice["steps"]:
            req.spec_verify_ct += 1
            req.spec_num_correct_drafts += correct
            update(req, correct)
        recv = types.SimpleNamespace(
            spec_verify_ct=[req.spec_verify_ct],
            spec_num_correct_drafts=[req.spec_num_correct_drafts],
            completion_tokens=[choice["completion_tokens"]],
            spec_correct_drafts_histogram=[req.spec_correct_drafts_histogram],
        )
        # tokenizer_manager.py _handle_batch_output's meta_info (id, finish_reason, prompt, weight_version, the
        # token counts), then the speculative fields.
        meta: dict[str, Any] = {
            "id": f"r{index}",
            "finish_reason": {"type": "length", "length": choice["completion_tokens"]},
            "prompt_tokens": 7,
            "weight_version": "default",
            "reasoning_tokens": 0,
            "completion_tokens": choice["completion_tokens"],
            "cached_tokens": 0,
        }
        calculate(None, meta, recv, 0)
        ret.append({"text": choice.get("text", "x"), "output_ids": [], "meta_info": meta})

    namespace: dict[str, Any] = dict(p)
    definitions(openai / "utils.py", UTILS, namespace)
    usage = definitions(
        openai / "usage_processor.py",
        {"UsageProcessor"},
        {**p, "final": typing.final, "Any": Any, "Dict": dict, "List": list, "Mapping": typing.Mapping},
    )["UsageProcessor"]
    weights = definitions(
        srt / "utils" / "weight_versions.py", {"build_endpoint_weight_version_metadata"}, {"Any": Any, "Dict": dict}
    )
    namespace.update(
        {
            "UsageProcessor": usage,
            "get_serving": lambda: types.SimpleNamespace(enable_cache_report=False),
            "build_endpoint_weight_version_metadata": weights["build_endpoint_weight_version_metadata"],
            "to_openai_style_logprobs": None,  # request.logprobs is None: never called
        }
    )
    build = definitions(
        openai / "serving_completions.py", {"OpenAIServingCompletion._build_completion_response"}, namespace
    )["_build_completion_response"]
    request = types.SimpleNamespace(
        n=scenario["n"],
        model="m",
        echo=False,
        logprobs=None,
        return_spec_tokens_details=True,
        return_routed_experts=False,
        return_cached_tokens_details=False,
        return_hidden_states=False,
        return_token_ids=False,
    )
    response = build(None, request, ret, 1764547200)
    body = response.model_dump_json(by_alias=True)

    # The stream: a content chunk per choice, the sglext chunk, the usage chunk.
    stream = []
    for index, item in enumerate(ret):
        choice_data = p["CompletionResponseStreamChoice"](index=index, text=item["text"], finish_reason="length")
        chunk = p["CompletionStreamResponse"](
            id=item["meta_info"]["id"], created=1764547200, object="text_completion", choices=[choice_data], model="m"
        )
        stream.append(f"data: {chunk.model_dump_json()}\n\n")
    local: dict[str, Any] = {
        "request": request,
        "spec_tokens_details": {
            index: namespace["spec_tokens_details_from_meta_info"](item["meta_info"]) for index, item in enumerate(ret)
        },
        "sglext_spec_tokens_details": None,
    }
    exec(stream_spec_block(openai / "serving_completions.py"), local)
    sglext_chunk = p["CompletionStreamResponse"](
        id=ret[0]["meta_info"]["id"],
        created=1764547200,
        object="text_completion",
        choices=[],
        model="m",
        sglext=p["SglExt"](spec_tokens_details=local["sglext_spec_tokens_details"]),
    )
    stream.append(f"data: {sglext_chunk.model_dump_json()}\n\n")
    streaming_usage = usage.calculate_streaming_usage(
        {i: 7 for i in range(len(ret))},
        {i: 0 for i in range(len(ret))},
        {i: item["meta_info"]["completion_tokens"] for i, item in enumerate(ret)},
        cached_tokens={i: 0 for i in range(len(ret))},
        n_choices=request.n,
        enable_cache_report=False,
    )
    final = p["CompletionStreamResponse"](id="r0", created=1764547200, choices=[], model="m", usage=streaming_usage)
    stream.append(f"data: {final.model_dump_json(exclude_none=True)}\n\n")
    stream.append("data: [DONE]\n\n")
    json.dump({"meta_info": [item["meta_info"] for item in ret], "body": body, "stream": stream}, sys.stdout)


if __name__ == "__main__":
    main()
