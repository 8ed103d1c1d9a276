"""Response bytes exactly as the engines write them, for the load client's tests (unit and over sockets).

The SGLang bodies were produced by SGLang 0.5.23's own serializers (its pydantic models in
sglang/srt/entrypoints/openai/protocol.py, its msgspec chunk builder sse_utils.py ``build_sse_content``, and
orjson with ``dumps_json``'s options for ``/generate``), fed the ``meta_info`` that tokenizer_manager.py
``_calculate_spec_decoding_metrics`` builds; the vLLM ones by copies of vLLM 0.33.0's pydantic models fed
``RequestSpecDecodeMetrics.to_dict`` (vllm/v1/metrics/stats.py) run on known steps. Paths are inside the
wheels (on GitHub SGLang's are under ``python/``); line numbers are those of the pinned versions.

The answer in every SGLang fixture: 13 tokens, the first from prefill, then 4 verify steps committing
4 + 3 + 2 + 3 tokens (3 + 2 + 1 + 2 = 8 accepted drafts of 4 x 3 proposed, ``speculative_num_draft_tokens`` 4),
so ``spec_correct_drafts_histogram`` (steps that accepted exactly j drafts, schedule_batch.py
``Req.update_spec_correct_drafts_histogram``) is [0, 1, 2, 1].
"""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.engines.responses import SpecFigures
from orchestrator.engines.sglang.responses import SGLANG_SGLEXT

LLAMACPP_DATA = Path(__file__).resolve().parent / "data" / "llamacpp"

SGLANG_DETAILS = SpecFigures(
    SGLANG_SGLEXT,
    verify_steps=4,
    accepted_drafts=8,
    proposed_drafts=12,
    engine_accept_len=3.25,
    completion_tokens=13,  # round(spec_accept_length x spec_verify_ct): SGLang's own count, 3.25 = 13 / 4
    accepted_histogram=(0, 1, 2, 1),  # steps that accepted exactly 0, 1, 2, 3 drafts
)

# SGLang 0.5.23 /v1/chat/completions, stream with stream_options {include_usage, continuous_usage_stats} and
# return_spec_tokens_details (protocol.py:961). Role chunk: serving_chat.py:2586 via sse_utils.py:52
# build_sse_content (msgspec StreamChunk, sse_utils.py:38, omit_defaults); content chunks with continuous
# usage: serving_chat.py:1043/1071; the finish chunk: serving_chat.py:2655; the sglext chunk, choices [] at
# response level, after the finish chunk and before the usage chunk: serving_chat.py:2757-2764
# (ChatCompletionStreamResponse protocol.py:1388, SglExt protocol.py:470, SpecTokensDetails protocol.py:456,
# filled by utils.py:310 spec_tokens_details_from_meta_info); usage chunk serving_chat.py:2790; [DONE] :2805.
_USAGE = '"prompt_tokens_details":null,"reasoning_tokens":0,"completion_tokens_details":null'
_HEAD = '{"id":"8f1c","object":"chat.completion.chunk","created":1764547200,"model":"m","choices":'
_DETAILS = (
    '{"spec_tokens_details":{"spec_accept_rate":0.6666666666666666,"spec_accept_length":3.25,"spec_cap_length":0.0,'
    '"spec_block_accept_length":0.0,"spec_num_correct_drafts":8,"spec_num_proposed_drafts":12,"spec_verify_ct":4,'
    '"spec_correct_drafts_histogram":[0,1,2,1],"spec_cap_lens_histogram":[]}}'
)


def _sglang_chat_delta(text: str, done: int) -> bytes:
    return (
        f'data: {_HEAD}[{{"index":0,"delta":{{"reasoning_content":null,"content":{json.dumps(text)}}},"logprobs":null,'
        f'"finish_reason":null,"matched_stop":null}}],"usage":{{"prompt_tokens":7,"total_tokens":{7 + done},'
        f'"completion_tokens":{done},{_USAGE}}}}}\n\n'
    ).encode()


SGLANG_CHAT_STREAM = [
    f'data: {_HEAD}[{{"index":0,"delta":{{"reasoning_content":null,"role":"assistant","content":""}},'
    '"logprobs":null,"finish_reason":null,"matched_stop":null}]}\n\n'.encode(),
    _sglang_chat_delta(" The", 1),
    _sglang_chat_delta(" quick brown fox jumps", 5),
    _sglang_chat_delta(" over the lazy", 8),
    _sglang_chat_delta(" dog.", 10),
    _sglang_chat_delta(" It ran off.", 13),
    f'data: {_HEAD}[{{"index":0,"delta":{{"reasoning_content":null}},"logprobs":null,"finish_reason":"length",'
    '"matched_stop":null}]}\n\n'.encode(),
    f'data: {_HEAD}[],"usage":null,"sglext":{_DETAILS}}}\n\n'.encode(),
    f'data: {_HEAD}[],"usage":{{"prompt_tokens":7,"total_tokens":20,"completion_tokens":13,{_USAGE}}}}}\n\n'.encode(),
    b"data: [DONE]\n\n",
]

# SGLang 0.5.23 /v1/completions, same request (protocol.py:393): content chunks serving_completions.py:403
# (CompletionStreamResponse protocol.py:568, model_dump_json), the finish reason in the last one; the sglext
# chunk serving_completions.py:464-476; the usage chunk :488 (exclude_none).
_CHEAD = '{"id":"8f1c","object":"text_completion","created":1764547200,"model":"m","choices":'


def _sglang_completion(text: str, done: int, finish: str | None = None) -> bytes:
    reason = json.dumps(finish)
    return (
        f'data: {_CHEAD}[{{"index":0,"text":{json.dumps(text)},"logprobs":null,"finish_reason":{reason},'
        f'"matched_stop":null}}],"usage":{{"prompt_tokens":7,"total_tokens":{7 + done},"completion_tokens":{done},'
        f"{_USAGE}}}}}\n\n"
    ).encode()


SGLANG_COMPLETIONS_STREAM = [
    _sglang_completion(" The", 1),
    _sglang_completion(" quick brown fox jumps", 5),
    _sglang_completion(" over the lazy", 8),
    _sglang_completion(" dog.", 10),
    _sglang_completion(" It ran off.", 13, "length"),
    f'data: {_CHEAD}[],"usage":null,"sglext":{_DETAILS}}}\n\n'.encode(),
    f'data: {_CHEAD}[],"usage":{{"prompt_tokens":7,"total_tokens":20,"completion_tokens":13,'
    '"reasoning_tokens":0}}\n\n'.encode(),
    b"data: [DONE]\n\n",
]

# SGLang 0.5.23 non-streamed chat: ChatCompletionResponse (protocol.py:1336) with sglext at response level
# (serving_chat.py:2832 _build_chat_response).
SGLANG_CHAT_BODY = (
    '{"id":"8f1c","object":"chat.completion","created":1764547200,"model":"m","choices":[{"index":0,"message":'
    '{"role":"assistant","content":"The quick brown fox jumps over the lazy dog. It ran off.",'
    '"reasoning_content":null},'
    '"logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":{"prompt_tokens":7,"total_tokens":20,'
    f'"completion_tokens":13,{_USAGE}}},"metadata":null,"sglext":{_DETAILS}}}'
).encode()

# SGLang 0.5.23 /generate stream: http_server.py:956 yields b"data: " + dumps_json(out) (orjson), [DONE] at :975;
# meta_info built at tokenizer_manager.py:2507 and :2553, the speculative fields added once finished (:2756 ->
# :3138 _calculate_spec_decoding_metrics); text cumulative.
_GMETA = '"prompt_tokens":7,"weight_version":"default","num_retractions":0,"reasoning_tokens":0'


def _generate_chunk(text: str, done: int) -> bytes:
    ids = ",".join(str(101 + i) for i in range(done))
    return (
        f'data: {{"text":{json.dumps(text)},"output_ids":[{ids}],"meta_info":{{"id":"8f1c","finish_reason":null,'
        f'{_GMETA},"completion_tokens":{done},"cached_tokens":0}}}}\n\n'
    ).encode()


SGLANG_GENERATE_STREAM = [
    _generate_chunk(" The", 1),
    _generate_chunk(" The quick brown fox jumps", 5),
    _generate_chunk(" The quick brown fox jumps over the lazy", 8),
    _generate_chunk(" The quick brown fox jumps over the lazy dog.", 10),
    b'data: {"text":" The quick brown fox jumps over the lazy dog. It ran off.","output_ids":[101,102,103,104,105,106,'
    b'107,108,109,110,111,112,113],"meta_info":{"id":"8f1c","finish_reason":{"type":"length","length":13},'
    + _GMETA.encode()
    + b',"completion_tokens":13,"cached_tokens":0,"e2e_latency":0.25,"spec_accept_rate":0.6666666666666666,'
    b'"spec_accept_length":3.25,"spec_num_correct_drafts":8,"spec_num_proposed_drafts":12,"spec_verify_ct":4,'
    b'"spec_correct_drafts_histogram":[0,1,2,1]}}\n\n',
    b"data: [DONE]\n\n",
]

# vLLM 0.33.0 chat stream's final usage chunk with --per-request-spec-decode-metrics summary: the metrics ride on
# it only (vllm/entrypoints/openai/chat_completion/serving.py:903, serialized at :499-500 with exclude_unset and
# exclude_none as choices is empty); PerRequestMetrics / SpeculativeDecodingMetrics
# vllm/entrypoints/generate/base/protocol.py:122/100, from RequestSpecDecodeMetrics.to_dict
# vllm/v1/metrics/stats.py:397 after observe() of 4 steps of 3 drafts accepting 3, 1, 0, 2.
VLLM_CHAT_TAIL = [
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,'
    b'"delta":{"content":" and more"},"logprobs":null,"finish_reason":"length","stop_reason":null}]}\n\n',
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":5,"total_tokens":16,"completion_tokens":11},"metrics":{"speculative_decoding":'
    b'{"mean_acceptance_length":2.5,"draft_acceptance_rate":0.5,"acceptance_histogram":[1,1,1,1],"num_spec_steps":4,'
    b'"num_accepted_draft_tokens":6,"num_draft_tokens":12,"num_spec_tokens":3}}}\n\n',
    b"data: [DONE]\n\n",
]
# The non-streamed body's metrics: JSONResponse(content=response.model_dump()) keeps the None fields
# (vllm/entrypoints/openai/chat_completion/api_router.py; serving.py:1121-1134).
VLLM_BODY_METRICS = (
    '{"time_to_first_token_ms":null,"generation_time_ms":null,"queue_time_ms":null,"mean_itl_ms":null,'
    '"tokens_per_second":null,"speculative_decoding":{"mean_acceptance_length":2.5,"draft_acceptance_rate":0.5,'
    '"acceptance_histogram":[1,1,1,1],"num_spec_steps":4,"num_accepted_draft_tokens":6,"num_draft_tokens":12,'
    '"num_spec_tokens":3,"per_step_accepted":null,"per_step_drafted":null}}'
)


def llamacpp_stream() -> list[bytes]:
    """A real llama-server ``/v1/completions`` stream (n-gram speculation; see tests/data/llamacpp/README.md)."""
    return [e + b"\n\n" for e in (LLAMACPP_DATA / "ngram-simple-n3-m16.stream.sse").read_bytes().split(b"\n\n") if e]


# SGLang 0.5.23 /v1/completions with n = 3 and return_spec_tokens_details, made by SGLang's own code
# (tests/contract/sglang_responses_oracle.py: tokenizer_manager.py _calculate_spec_decoding_metrics per choice,
# serving_completions.py _build_completion_response and _generate_completion_stream's sglext block, the
# protocol.py models; test_responses_contract.py checks these bytes are what that code makes). Three choices
# of 13, 1 and 9 tokens: 4 verify steps accepting 3, 2, 1, 2 drafts; none (the one token came from prefill,
# so SGLang writes no speculative field and leaves the choice out of the list); 5 steps accepting 0, 0, 1, 0,
# 3. usage sums every choice (23); the per-choice details are a list of two. Pooled as SGLang's counters pool
# its requests: accept_len = ((13 - 1) + (1 - 1) + (9 - 1)) / (4 + 5) = 20 / 9.
SGLANG_N3_SCENARIO = {
    "num_draft_tokens": 4,
    "n": 3,
    "choices": [
        {"completion_tokens": 13, "steps": [3, 2, 1, 2]},
        {"completion_tokens": 1, "steps": []},
        {"completion_tokens": 9, "steps": [0, 0, 1, 0, 3]},
    ],
}
SGLANG_N3_COMPLETIONS_STREAM = [
    b'data: {"id":"r0","object":"text_completion","created":1764547200,"model":"m","choices":[{"index":0,"'
    b'text":"x","logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":null}\n\n',
    b'data: {"id":"r1","object":"text_completion","created":1764547200,"model":"m","choices":[{"index":1,"'
    b'text":"x","logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":null}\n\n',
    b'data: {"id":"r2","object":"text_completion","created":1764547200,"model":"m","choices":[{"index":2,"'
    b'text":"x","logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":null}\n\n',
    b'data: {"id":"r0","object":"text_completion","created":1764547200,"model":"m","choices":[],"usage":nu'
    b'll,"sglext":{"spec_tokens_details":[{"spec_accept_rate":0.6666666666666666,"spec_accept_length":3.25'
    b',"spec_cap_length":0.0,"spec_block_accept_length":0.0,"spec_num_correct_drafts":8,"spec_num_proposed'
    b'_drafts":12,"spec_verify_ct":4,"spec_correct_drafts_histogram":[0,1,2,1],"spec_cap_lens_histogram":['
    b']},{"spec_accept_rate":0.26666666666666666,"spec_accept_length":1.8,"spec_cap_length":0.0,"spec_bloc'
    b'k_accept_length":0.0,"spec_num_correct_drafts":4,"spec_num_proposed_drafts":15,"spec_verify_ct":5,"s'
    b'pec_correct_drafts_histogram":[3,1,0,1],"spec_cap_lens_histogram":[]}]}}\n\n',
    b'data: {"id":"r0","object":"text_completion","created":1764547200,"model":"m","choices":[],"usage":{"'
    b'prompt_tokens":7,"total_tokens":30,"completion_tokens":23,"reasoning_tokens":0}}\n\n',
    b"data: [DONE]\n\n",
]
SGLANG_N3_COMPLETIONS_BODY = (
    b'{"id":"r0","object":"text_completion","created":1764547200,"model":"m","choices":[{"index":0,"text":'
    b'"x","logprobs":null,"finish_reason":"length","matched_stop":null},{"index":1,"text":"x","logprobs":n'
    b'ull,"finish_reason":"length","matched_stop":null},{"index":2,"text":"x","logprobs":null,"finish_reas'
    b'on":"length","matched_stop":null}],"usage":{"prompt_tokens":7,"total_tokens":30,"completion_tokens":'
    b'23,"prompt_tokens_details":null,"reasoning_tokens":0,"completion_tokens_details":null},"metadata":{"'
    b'weight_version":"default"},"sglext":{"spec_tokens_details":[{"spec_accept_rate":0.6666666666666666,"'
    b'spec_accept_length":3.25,"spec_cap_length":0.0,"spec_block_accept_length":0.0,"spec_num_correct_draf'
    b'ts":8,"spec_num_proposed_drafts":12,"spec_verify_ct":4,"spec_correct_drafts_histogram":[0,1,2,1],"sp'
    b'ec_cap_lens_histogram":[]},{"spec_accept_rate":0.26666666666666666,"spec_accept_length":1.8,"spec_ca'
    b'p_length":0.0,"spec_block_accept_length":0.0,"spec_num_correct_drafts":4,"spec_num_proposed_drafts":'
    b'15,"spec_verify_ct":5,"spec_correct_drafts_histogram":[3,1,0,1],"spec_cap_lens_histogram":[]}]}}'
)
