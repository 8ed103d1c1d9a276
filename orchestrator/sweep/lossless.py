"""The lossless check: at temperature 0, speculative decoding must not change a single token of the output.

**The probe** (:func:`probe`, after each deployment's warm-up): the first ``lossless.prompts`` prompts of the
workload (its seed, so every configuration gets the same ones), sent one at a time, streamed, at temperature 0,
with the load's ``max_tokens`` (or ``lossless.max_tokens``), in the load's API and request shape. One at a time,
because batch composition changes the floating-point reductions of real engines: greedy outputs of the same
prompt can differ between batch sizes on a non-batch-invariant kernel, which says nothing about speculation.
The autoregressive baseline answers every prompt twice: if its two answers differ, the server is not
deterministic at temperature 0 and no configuration can be checked against it, which the check says instead
of failing. Each answer is kept in ``lossless/<deployment id>.jsonl``: the prompt's index and hash, the text,
its SHA-256, its length, where each streamed chunk ended (characters and, where the server counts them in the
stream, tokens), the finish reason and any error.

**The check** (:func:`check_lossless`, run by the analysis as the ``lossless`` check): every configuration's
answer to each prompt against the autoregressive baseline's on the same host; a difference is an error naming
the configuration, the prompt and the first position that differs: the character, and the token of the
baseline's answer (its chunks are its tokens: an autoregressive stream commits one token per chunk; where the
server sent cumulative token counts, those), with a few characters of context from both answers.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from orchestrator.load.settings import LoadSettings

__all__ = [
    "LOSSLESS_DIR",
    "Answer",
    "LosslessFinding",
    "LosslessResult",
    "check_lossless",
    "first_difference",
    "probe",
    "read_stream",
]

LOSSLESS_DIR = "lossless"
_CONTEXT = 24


@dataclass
class Answer:
    """One probe answer: the text and where its chunks ended."""

    prompt_index: int
    prompt_sha256: str
    run: int  # 1, or 2 for the baseline's second answer
    text: str = ""
    chunk_ends: list[int] = field(default_factory=list)  # cumulative characters at the end of each chunk
    chunk_tokens: list[int | None] = field(default_factory=list)  # cumulative tokens, where the server said
    finish_reason: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_index": self.prompt_index,
            "prompt_sha256": self.prompt_sha256,
            "run": self.run,
            "sha256": hashlib.sha256(self.text.encode("utf-8")).hexdigest(),
            "chars": len(self.text),
            "chunks": len(self.chunk_ends),
            "chunk_ends": self.chunk_ends,
            "chunk_tokens": self.chunk_tokens if any(t is not None for t in self.chunk_tokens) else None,
            "finish_reason": self.finish_reason,
            "error": self.error,
            "text": self.text,
        }


def _events(lines: Iterator[str]) -> Iterator[str]:
    """The data of each SSE event (data lines joined), ``[DONE]`` included."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
    if data:
        yield "\n".join(data)


def read_stream(api: str, lines: Iterator[str], answer: Answer) -> None:
    """Fill ``answer`` from a streamed response's lines, for each API's chunk shape (as the load generator's
    decoders read them, ``orchestrator/load/decoders.py``)."""
    cumulative_text = ""
    for data in _events(lines):
        if data.strip() == "[DONE]":
            break
        try:
            obj = json.loads(data)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if obj.get("error"):
            error = obj["error"]
            answer.error = str(error.get("message") if isinstance(error, dict) else error)[:200]
            break
        piece = ""
        tokens: int | None = None
        if api in ("chat", "completions"):
            choices = obj.get("choices") or []
            if choices and isinstance(choices[0], dict):
                choice = choices[0]
                if api == "chat":
                    delta = choice.get("delta") or {}
                    piece = delta.get("content") or "" if isinstance(delta, dict) else ""
                else:
                    piece = choice.get("text") or ""
                if choice.get("finish_reason"):
                    answer.finish_reason = str(choice["finish_reason"])
            usage = obj.get("usage")
            if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int) and choices:
                tokens = usage["completion_tokens"]
        elif api == "generate":
            text = obj.get("text")
            if isinstance(text, str):
                piece = text[len(cumulative_text) :] if text.startswith(cumulative_text) else text
                cumulative_text = text if text.startswith(cumulative_text) else cumulative_text + text
            meta = obj.get("meta_info") or {}
            if isinstance(meta, dict):
                if isinstance(meta.get("completion_tokens"), int):
                    tokens = meta["completion_tokens"]
                finish = meta.get("finish_reason")
                if isinstance(finish, dict) and finish.get("type"):
                    answer.finish_reason = str(finish["type"])
        else:  # llamacpp
            content = obj.get("content")
            piece = content if isinstance(content, str) else ""
            if obj.get("stop") is True:
                answer.finish_reason = str(obj.get("stop_type") or "stop")
        if isinstance(piece, str) and piece:
            answer.text += piece
            answer.chunk_ends.append(len(answer.text))
            answer.chunk_tokens.append(tokens)


def _prompt_sha(prompt: Any) -> str:
    body = json.dumps(prompt.as_messages(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


Post = Callable[[str, bytes, dict[str, str], float], Iterator[str]]


def _post_stream(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Iterator[str]:
    with (
        httpx.Client(timeout=httpx.Timeout(timeout, connect=10.0), trust_env=False) as client,
        client.stream("POST", url, content=body, headers=headers) as response,
    ):
        if response.status_code != 200:
            raise httpx.HTTPStatusError(
                f"HTTP {response.status_code}: {response.read()[:200]!r}", request=response.request, response=response
            )
        yield from response.iter_lines()


def probe(
    settings: LoadSettings,
    prompts: int,
    *,
    runs: int = 1,
    stop: threading.Event | None = None,
    post: Post = _post_stream,
) -> list[Answer]:
    """Ask the server of ``settings`` (the load's request shape, at temperature 0: ``PointMeasurer`` builds
    them) the first ``prompts`` prompts of the workload, ``runs`` times each, one at a time (see the module
    docstring); the answers, in order."""
    from orchestrator.load.client import LoadClient
    from orchestrator.load.workloads import load_workload

    workload = load_workload(settings.prompts, settings.seed)
    client = LoadClient(settings, settings.model)  # only its body(): the load's own request shape
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    answers: list[Answer] = []
    for run in range(1, runs + 1):
        for index in range(prompts):
            if stop is not None and stop.is_set():
                return answers
            prompt = workload.prompt(index)
            answer = Answer(prompt_index=index, prompt_sha256=_prompt_sha(prompt), run=run)
            try:
                read_stream(
                    settings.api, post(settings.endpoint, client.body(prompt), headers, settings.total_timeout), answer
                )
            except (httpx.HTTPError, OSError) as exc:
                answer.error = f"{type(exc).__name__}: {exc}"[:300]
            answers.append(answer)
    return answers


# -- the check (pure) -------------------------------------------------------------------------------------


def first_difference(a: str, b: str) -> int | None:
    """The first character index where ``a`` and ``b`` differ (one a prefix of the other: the shorter's
    length), or None when they are equal."""
    if a == b:
        return None
    limit = min(len(a), len(b))
    for i in range(limit):
        if a[i] != b[i]:
            return i
    return limit


def _token_at(answer: Mapping[str, Any], position: int) -> int:
    """The 0-based token of ``answer`` holding character ``position``: from its cumulative token counts where
    the stream carried them, else its chunks (one token each in an autoregressive stream)."""
    ends = answer.get("chunk_ends") or []
    tokens = answer.get("chunk_tokens")
    for i, end in enumerate(ends):
        if position < end:
            if tokens and tokens[i] is not None:
                before = tokens[i - 1] if i > 0 and tokens[i - 1] is not None else 0
                return int(before)
            return i
    return len(ends)


@dataclass(frozen=True)
class LosslessFinding:
    """One thing the check found: ``kind`` is ``changed`` (an answer differs from the baseline's),
    ``nondeterministic`` (the baseline's two answers differ), ``unchecked`` (an answer is missing or failed)
    or ``no_baseline``."""

    kind: str
    host: str
    config: str | None
    message: str
    prompt_index: int | None = None
    position: int | None = None
    token: int | None = None
    evidence: tuple[str, ...] = ()


@dataclass
class LosslessResult:
    findings: list[LosslessFinding] = field(default_factory=list)
    compared: int = 0  # answers compared with the baseline's
    configurations: int = 0
    passed: bool = True


def _context(text: str, position: int) -> str:
    start = max(0, position - _CONTEXT)
    return repr(text[start : position + _CONTEXT])


def check_lossless(
    answers: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]],
    labels: Mapping[tuple[str, str], str],
    baseline: Mapping[str, tuple[str, str] | None],
) -> LosslessResult:
    """Compare every deployment's answers with its host's baseline (see the module docstring).

    ``answers``: (host, deployment id) -> answer dicts (``Answer.to_dict``); ``labels``: the same keys ->
    configuration label; ``baseline``: host -> the (host, deployment id) of its autoregressive baseline."""
    result = LosslessResult()
    for host in sorted({h for h, _d in answers}):
        key = baseline.get(host)
        if key is None or key not in answers:
            result.findings.append(
                LosslessFinding(
                    "no_baseline", host, None, "no autoregressive baseline answered the probe: nothing to check against"
                )
            )
            continue
        base = answers[key]
        first = {a["prompt_index"]: a for a in base if a.get("run", 1) == 1}
        second = {a["prompt_index"]: a for a in base if a.get("run", 1) == 2}
        deterministic = True
        for index, again in sorted(second.items()):
            one = first.get(index)
            if one is None or one.get("error") or again.get("error"):
                continue
            position = first_difference(one.get("text", ""), again.get("text", ""))
            if position is not None:
                deterministic = False
                result.findings.append(
                    LosslessFinding(
                        "nondeterministic",
                        host,
                        labels.get(key),
                        f"the autoregressive baseline answered prompt {index} differently twice (first at "
                        f"character {position}, token {_token_at(one, position)}): the server is not deterministic "
                        "at temperature 0, so no configuration is checked against it",
                        index,
                        position,
                        _token_at(one, position),
                        (
                            f"first:  {_context(one.get('text', ''), position)}",
                            f"second: {_context(again.get('text', ''), position)}",
                        ),
                    )
                )
                break
        if not deterministic:
            continue
        for other, theirs in answers.items():
            if other[0] != host or other == key:
                continue
            result.configurations += 1
            label = labels.get(other, other[1])
            differing: list[LosslessFinding] = []
            for answer in theirs:
                index = answer["prompt_index"]
                ours = first.get(index)
                if ours is None or ours.get("error") or answer.get("error"):
                    why = answer.get("error") or (ours or {}).get("error") or "the baseline has no answer to it"
                    result.findings.append(
                        LosslessFinding("unchecked", host, label, f"prompt {index} could not be compared: {why}", index)
                    )
                    continue
                if ours.get("prompt_sha256") != answer.get("prompt_sha256"):
                    result.findings.append(
                        LosslessFinding(
                            "unchecked", host, label, f"prompt {index} is not the prompt the baseline answered", index
                        )
                    )
                    continue
                result.compared += 1
                position = first_difference(ours.get("text", ""), answer.get("text", ""))
                if position is None:
                    continue
                token = _token_at(ours, position)
                differing.append(
                    LosslessFinding(
                        "changed",
                        host,
                        label,
                        f"the output differs from the autoregressive baseline's for prompt {index}: first at "
                        f"character {position}, token {token} of the baseline's answer (both counted from 0)",
                        index,
                        position,
                        token,
                        (
                            f"baseline: {_context(ours.get('text', ''), position)}",
                            f"{label}: {_context(answer.get('text', ''), position)}",
                        ),
                    )
                )
            if differing:
                result.passed = False
                first_found = differing[0]
                others = [f"prompt {f.prompt_index} at character {f.position}" for f in differing[1:]]
                message = first_found.message + (
                    f"; {len(differing)} of {len(theirs)} prompts differ ({', '.join(others)})" if others else ""
                )
                result.findings.append(
                    LosslessFinding(
                        "changed",
                        host,
                        label,
                        message,
                        first_found.prompt_index,
                        first_found.position,
                        first_found.token,
                        first_found.evidence,
                    )
                )
    return result
