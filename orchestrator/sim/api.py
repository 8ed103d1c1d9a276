"""The simulator's request side: parsing OpenAI and SGLang-native request bodies into ``GenerationParams``.

Bad requests raise ``BadRequest`` (a 400 in the dialect's error shape). The responses are the dialects' business
(``orchestrator.sim.dialects``): each builds its engine's response bodies and streamed chunks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import SpecsweepError

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DONE",
    "BadRequest",
    "GenerationParams",
    "count_tokens",
    "error_body",
    "parse_chat",
    "parse_completion",
    "parse_generate",
]

DEFAULT_MAX_TOKENS = 128  # when a request names none (SGLang's native default for max_new_tokens)
DONE = "data: [DONE]\n\n"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


class BadRequest(SpecsweepError):
    """A request the server refuses with HTTP 400; ``param`` names the offending field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        self.message = message
        self.param = param
        super().__init__(message)


def error_body(message: str, *, kind: str, code: int, param: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


@dataclass(frozen=True)
class GenerationParams:
    """One validated generation request, whichever endpoint it came from."""

    prompt_key: str  # the canonical prompt, which seeds the token stream
    prompt_tokens: int
    max_tokens: int
    temperature: float
    ignore_eos: bool
    stream: bool
    include_usage: bool
    stop: tuple[str, ...]
    seed: int | None
    model: str | None
    return_spec_tokens_details: bool = False  # SGLang's OpenAI extension (protocol.py, 0.5.19+)


def count_tokens(text: str) -> int:
    """A tokenizer's count, approximately: one token per four characters, at least one."""
    return max(1, (len(text) + 3) // 4)


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def _int(body: dict[str, Any], key: str, default: int | None, low: int = 1) -> int | None:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"'{key}' must be an integer", key)
    if value < low:
        raise BadRequest(f"'{key}' must be at least {low}", key)
    return value


def _float(body: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"'{key}' must be a number", key)
    if not low <= value <= high:
        raise BadRequest(f"'{key}' must be between {low:g} and {high:g}", key)
    return float(value)


def _bool(body: dict[str, Any], key: str, default: bool = False) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"'{key}' must be a boolean", key)
    return value


def _stop(value: Any, key: str = "stop") -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list) and all(isinstance(s, str) for s in value) and len(value) <= 16:
        return tuple(s for s in value if s)
    raise BadRequest(f"'{key}' must be a string or a list of strings", key)


def _common(body: dict[str, Any], prompt_key: str, prompt_tokens: int, context_length: int) -> GenerationParams:
    n = _int(body, "n", 1)
    if n != 1:
        raise BadRequest("only n=1 is supported", "n")
    max_tokens = _int(body, "max_completion_tokens", None)
    max_tokens = _int(body, "max_tokens", max_tokens) or DEFAULT_MAX_TOKENS
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object", "stream_options")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest("'model' must be a string", "model")
    seed = _int(body, "seed", None, low=-(2**63))
    _check_context(prompt_tokens, max_tokens, context_length)
    return GenerationParams(
        prompt_key=prompt_key,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        temperature=_float(body, "temperature", 1.0, 0.0, 2.0),
        ignore_eos=_bool(body, "ignore_eos"),
        stream=_bool(body, "stream"),
        include_usage=_bool(options, "include_usage"),
        stop=_stop(body.get("stop")),
        seed=seed,
        model=model,
        return_spec_tokens_details=_bool(body, "return_spec_tokens_details"),
    )


def _check_context(prompt_tokens: int, max_tokens: int, context_length: int) -> None:
    if prompt_tokens + max_tokens > context_length:
        raise BadRequest(
            f"Requested token count exceeds the model's maximum context length of {context_length} tokens. "
            f"You requested a total of {prompt_tokens + max_tokens} tokens: {prompt_tokens} tokens from the "
            f"input messages and {max_tokens} tokens for the completion.",
            "max_tokens",
        )


def parse_chat(body: Any, context_length: int) -> GenerationParams:
    """A ``/v1/chat/completions`` body."""
    body = _object(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list", "messages")
    parts: list[str] = []
    tokens = 2  # the assistant turn's header
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a 'role'", "messages")
        content = message.get("content")
        if isinstance(content, list):
            text = "".join(
                p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text", ""), str)
            )
        elif isinstance(content, str) or content is None:
            text = content or ""
        else:
            raise BadRequest(f"messages[{i}].content must be a string or a list of parts", "messages")
        parts.append(f"{message['role']}:{text}")
        tokens += 4 + (count_tokens(text) if text else 0)
    return _common(body, "\n".join(parts), tokens, context_length)


def parse_completion(body: Any, context_length: int) -> GenerationParams:
    """A ``/v1/completions`` body (``prompt`` a string, a one-string list, or token ids)."""
    body = _object(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return _common(body, prompt, count_tokens(prompt), context_length)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return _common(body, json.dumps(prompt), len(prompt), context_length)
    raise BadRequest("'prompt' must be a string, a list of one string, or a list of token ids", "prompt")


def parse_generate(body: Any, context_length: int) -> GenerationParams:
    """An SGLang-native ``/generate`` body: ``text`` or ``input_ids``, and ``sampling_params``."""
    body = _object(body)
    text, ids = body.get("text"), body.get("input_ids")
    if isinstance(text, str):
        key, prompt_tokens = text, count_tokens(text)
    elif isinstance(ids, list) and ids and all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        key, prompt_tokens = json.dumps(ids), len(ids)
    else:
        raise BadRequest("'text' must be a string (or 'input_ids' a list of token ids); batches are not supported")
    sp = body.get("sampling_params") or {}
    if not isinstance(sp, dict):
        raise BadRequest("'sampling_params' must be an object", "sampling_params")
    max_tokens = _int(sp, "max_new_tokens", DEFAULT_MAX_TOKENS) or DEFAULT_MAX_TOKENS
    _check_context(prompt_tokens, max_tokens, context_length)
    return GenerationParams(
        prompt_key=key,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        temperature=_float(sp, "temperature", 1.0, 0.0, 2.0),
        ignore_eos=_bool(sp, "ignore_eos"),
        stream=_bool(body, "stream"),
        include_usage=False,
        stop=_stop(sp.get("stop"), "sampling_params.stop"),
        seed=_int(sp, "sampling_seed", None, low=-(2**63)),
        model=None,
    )
