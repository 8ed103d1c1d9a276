"""Per-API interpretation of responses: what each event or body says about tokens, finish and engine metadata.

One decoder per request. ``on_event`` takes the data of one SSE event and returns how many tokens it carried
(an online estimate, for live progress); ``on_body`` takes a whole non-streamed response; ``finish`` settles
the record's token counts (see :mod:`orchestrator.load.records`). A response that cannot be understood raises
:class:`StreamFault` with an error kind; the client turns it into a failed record.

APIs and what they send:

- ``chat`` / ``completions`` (OpenAI): ``choices[0].delta.content`` / ``choices[0].text``, ``finish_reason``,
  ``usage`` (in every chunk with ``continuous_usage_stats``, else in a final chunk with no choices), ``[DONE]``.
  Speculative figures, each where its engine writes it (``orchestrator/engines/<name>/responses.py``, reached
  through the registry: :func:`orchestrator.engines.responses.response_readers`, every engine's readers
  merged, tried on every response whatever the experiment's engine): SGLang's
  ``sglext.spec_tokens_details`` (asked for with ``return_spec_tokens_details``; in a stream, a chunk of its
  own with no choices before the usage chunk), vLLM's ``metrics.speculative_decoding`` (on the final usage
  chunk), llama.cpp's ``timings`` (on the last chunk). No engine puts ``meta_info`` at the top level of an
  OpenAI response, so it is not read there; SGLang's ``choices[i].meta_info`` of a non-streamed chat answer
  (``return_meta_info``) is, every choice's. With ``n > 1`` SGLang's ``spec_tokens_details`` is a list, one per
  choice, pooled as SGLang pools its requests (orchestrator/engines/sglang/responses.py).
- ``generate`` (SGLang native): cumulative ``text`` and ``meta_info.completion_tokens`` in every chunk,
  ``meta_info.finish_reason = {"type": "length", ...}``, the speculative fields in the final chunk's
  ``meta_info``, ``[DONE]``.
- ``llamacpp`` (llama.cpp native ``/completion``): ``content`` per token (``tokens`` ids in newer builds), a
  last chunk with ``stop: true``, ``tokens_predicted``, ``stop_type`` and ``timings``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, cast

import msgspec

from orchestrator.engines.responses import ResponseReaders, response_readers
from orchestrator.load.records import RequestRecord, spread_tokens

__all__ = ["DECODERS", "Decoder", "StreamFault"]

_json_loads = json.loads
_msgspec_decode = msgspec.json.decode
_MSGSPEC_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
_DONE = b"[DONE]"


def _loads(data: bytes | str) -> Any:
    """``json.loads``, by msgspec when it can (four times faster; what it accepts it reads as ``json`` does);
    what it refuses (NaN, integers beyond 64 bits, lone surrogates, another encoding than UTF-8) goes to
    ``json``, which decides."""
    try:
        return _msgspec_decode(data)
    except _MSGSPEC_ERRORS:
        return _json_loads(data)


# The fields of an OpenAI chunk that the decoder reads, decoded by msgspec straight into these (every other
# field is skipped, though still checked to be valid JSON). The types are the ones the decoder acts on; a chunk
# that does not fit them (a field of another type, an error, an engine extension: ``error`` must be null and
# every engine's extension field, SGLang's ``sglext``, vLLM's ``metrics``, llama.cpp's ``timings``, absent)
# fails to decode and goes the general way, through a dict, which reads it the same (slower;
# tests/unit/test_load_fastpath.py checks both agree).
class _Delta(msgspec.Struct, gc=False):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None


class _Choice(msgspec.Struct, gc=False):
    delta: _Delta | None = None
    text: str | None = None
    finish_reason: str | None = None


class _Usage(msgspec.Struct, gc=False):
    completion_tokens: int | None = None
    prompt_tokens: int | None = None


class _Chunk(msgspec.Struct, gc=False):
    object: str | None = None
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: None = None


class _Engines:
    """The engines' response readers (:func:`response_readers`) and the fast path's chunk type: :class:`_Chunk`
    with every engine's extension field, which must be absent; made on the first decoder (and again when an
    engine is registered)."""

    __slots__ = ("decode_chunk", "extension_keys", "readers")

    def __init__(self, readers: ResponseReaders) -> None:
        self.readers = readers
        self.extension_keys = tuple(readers.extensions)
        absent = [(key, msgspec.UnsetType, msgspec.UNSET) for key in self.extension_keys]
        chunk = cast("type[_Chunk]", msgspec.defstruct("_EngineChunk", absent, bases=(_Chunk,), gc=False))
        self.decode_chunk: Callable[[bytes], _Chunk] = msgspec.json.Decoder(chunk).decode


_engines: _Engines | None = None


def _engine_readers() -> _Engines:
    """The engines' readers, made again when the registry's engines changed (one registered at run time)."""
    global _engines
    readers = response_readers()
    engines = _engines
    if engines is None or engines.readers is not readers:
        engines = _engines = _Engines(readers)
    return engines


_LLAMACPP_STOP = {"limit": "length", "eos": "stop", "word": "stop"}
#: The most output tokens one response may claim (``usage.completion_tokens``, ``meta_info.completion_tokens``):
#: above the longest context any engine serves (10M). A server claiming more (or a negative count) is not
#: believed: the request fails ``implausible_count`` instead of the claim reaching the statistics (per-token
#: arrays of 10^15 entries ended a sweep with MemoryError, issue 49).
MAX_CLAIMED_TOKENS = 16_000_000


class StreamFault(Exception):
    """The response broke the protocol or reported an error; ``kind`` is the error kind counted."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


class Decoder:
    """Common bookkeeping; subclasses implement ``_chunk`` (one parsed event) and ``_body``."""

    __slots__ = (
        "_counts",
        "_final_total",
        "_last_cum",
        "_news",
        "_times",
        "_uncounted",
        "_usage_chunks",
        "_weights",
        "done",
        "engines",
        "record",
    )

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.engines = _engine_readers()
        self.done = False  # the end-of-stream marker arrived
        self._times: list[float] = []
        self._counts: list[int] = []
        self._weights: list[int] = []
        # Per kept chunk, what the server's cumulative count rose by (0 for a chunk without one); _uncounted
        # says how many kept chunks had none (then the counts cannot come from the cumulative figures).
        self._news: list[int] = []
        self._uncounted = 0
        self._usage_chunks = 0
        self._last_cum = 0
        self._final_total: int | None = None

    # -- streaming ---------------------------------------------------------------------------------------
    def on_event(self, data: bytes, now: float) -> int:
        if self.done:
            return 0  # anything after the end marker is ignored
        obj: Any = None
        if data[:1] == b"{":
            try:
                obj = _msgspec_decode(data)
            except _MSGSPEC_ERRORS:
                obj = None
            if type(obj) is dict:
                if obj.get("error") or obj.get("object") == "error":
                    raise StreamFault("stream_error", _error_text(obj))
                return self._chunk(obj, now)
        if data == _DONE or data.strip() == _DONE:
            self.done = True
            return 0
        try:
            obj = _loads(data)
        except ValueError:
            if b"\n" in data:
                # Several JSON documents on consecutive data lines without blank lines between them.
                return sum(self.on_event(line, now) for line in data.split(b"\n") if line.strip())
            raise StreamFault("malformed", f"an event is not JSON: {data[:120]!r}") from None
        if not isinstance(obj, dict):
            raise StreamFault("malformed", f"an event is not a JSON object: {data[:120]!r}")
        if obj.get("error") or obj.get("object") == "error":
            raise StreamFault("stream_error", _error_text(obj))
        return self._chunk(obj, now)

    def on_events(self, payloads: Sequence[bytes], now: float) -> int:
        """:meth:`on_event` for each of several events that arrived together (one read), in order."""
        on_event = self.on_event
        tokens = 0
        for data in payloads:
            tokens += on_event(data, now)
        return tokens

    def on_error_event(self, data: bytes) -> None:
        """An ``event: error`` SSE event."""
        try:
            obj = _loads(data)
        except ValueError:
            obj = None
        message = _error_text(obj) if isinstance(obj, dict) else data[:200].decode("utf-8", "replace")
        raise StreamFault("stream_error", message)

    def _add(self, now: float, count: int, weight: int, cum: int | None) -> int:
        """Note a chunk; only chunks that carry text or raise the cumulative count are kept."""
        delta = 0
        if cum is not None:
            self._usage_chunks += 1
            if cum > self._last_cum:
                delta = cum - self._last_cum
                self._last_cum = cum
        if count <= 0 and delta == 0:
            return 0
        self._times.append(now)
        self._counts.append(count)
        self._weights.append(weight)
        self._news.append(delta)
        if cum is None:
            self._uncounted += 1
        return delta or count

    # -- not streamed ------------------------------------------------------------------------------------
    def on_body(self, body: bytes, now: float) -> None:
        try:
            obj = _loads(body)
        except ValueError:
            raise StreamFault("malformed", f"the response is not JSON: {body[:120]!r}") from None
        if not isinstance(obj, dict):
            raise StreamFault("malformed", f"the response is not a JSON object: {body[:120]!r}")
        if obj.get("error") or obj.get("object") == "error":
            raise StreamFault("stream_error", _error_text(obj))
        self.done = True
        text, total = self._body(obj)
        if total is None:
            total = max(1, round(len(text) / 4)) if text else 0  # no count given: about 4 characters a token
            self.record.token_source = "estimate"
        self._final_total = total
        if total > 0:
            self._times.append(now)
            self._counts.append(total)
            self._weights.append(len(text))
            self._news.append(0)
            self._uncounted += 1

    # -- both --------------------------------------------------------------------------------------------
    def finish(self) -> None:
        """Settle token counts on the record (call once, after the last event)."""
        record = self.record
        counts = self._counts
        final = self._final_total
        claimed = max(final or 0, self._last_cum)
        if claimed > MAX_CLAIMED_TOKENS or (final is not None and final < 0):
            shown = final if final is not None and final < 0 else claimed
            if record.ok:
                record.fail(
                    "implausible_count",
                    f"the server claimed {shown} output tokens for one response (at most "
                    f"{MAX_CLAIMED_TOKENS:,} and never negative): not believed",
                )
            record.chunk_times, record.chunk_tokens, record.output_tokens, record.first_token = [], [], 0, None
            return
        if self._usage_chunks >= 2 and counts and not self._uncounted:
            # Every kept chunk had the cumulative count: its tokens are what that count rose by (never below
            # zero, against the highest count so far), worked out as the chunks came.
            counts = self._news
            record.token_source = "continuous_usage"
        elif final is not None and counts:
            if sum(counts) != final:
                counts = spread_tokens(final, self._weights)
            if record.token_source != "estimate":
                record.token_source = "usage"
        elif final is not None:
            record.token_source = "usage"
        elif record.token_source != "estimate":
            record.token_source = "chunks" if counts else "none"
        times = self._times
        if 0 in counts:
            pairs = [(t, n) for t, n in zip(times, counts, strict=True) if n > 0]
            times = [t for t, _ in pairs]
            counts = [n for _, n in pairs]
        record.chunk_times = times
        record.chunk_tokens = counts
        record.output_tokens = final if final is not None else sum(counts)
        record.first_token = times[0] if times else None

    def _chunk(self, obj: dict[str, Any], now: float) -> int:
        raise NotImplementedError

    def _body(self, obj: dict[str, Any]) -> tuple[str, int | None]:
        raise NotImplementedError

    # -- engine metadata ---------------------------------------------------------------------------------
    def _extension(self, key: str, value: object) -> None:
        """One engine's extension field of a chunk or body (its reader: the engine's ``response_fields``): the
        figures it carries replace any before (the last one wins), its prompt count fills a missing one."""
        read = self.engines.readers.extensions.get(key)
        if read is None:
            return
        spec, prompt = read(value)
        record = self.record
        if spec is not None:
            record.spec = spec
        if prompt is not None and record.input_tokens is None:
            record.input_tokens = prompt

    def _meta_info(self, meta: dict[str, Any]) -> int | None:
        """A native ``meta_info`` (SGLang's ``/generate``); returns its cumulative ``completion_tokens`` if any."""
        record = self.record
        spec = self.engines.readers.read_meta_info(meta)
        if spec is not None:
            record.spec = spec
        prompt = meta.get("prompt_tokens")
        if isinstance(prompt, int):
            record.input_tokens = prompt
        finish = meta.get("finish_reason")
        if isinstance(finish, dict):
            kind = finish.get("type")
            if isinstance(kind, str):
                record.finish_reason = kind
        elif isinstance(finish, str):
            record.finish_reason = finish
        completion = meta.get("completion_tokens")
        return completion if isinstance(completion, int) else None

    def _openai_extensions(self, obj: dict[str, Any]) -> None:
        """The engines' additions to an OpenAI chunk or body (SGLang ``sglext``, vLLM ``metrics``, llama.cpp
        ``timings``), in the engines' order."""
        for key in self.engines.extension_keys:
            if key in obj:
                self._extension(key, obj[key])


class OpenAIDecoder(Decoder):
    """``/v1/chat/completions`` and ``/v1/completions``."""

    __slots__ = ("_chat",)

    def __init__(self, record: RequestRecord, chat: bool) -> None:
        super().__init__(record)
        self._chat = chat

    def on_event(self, data: bytes, now: float) -> int:
        return self.on_events((data,), now)

    def on_events(self, payloads: Sequence[bytes], now: float) -> int:
        # The hot path, once per token (one event per read from a real engine; a firehose's sixteen, or the
        # chunks a late read finds waiting): msgspec decodes the few fields read here straight into _Chunk
        # (anything else fails to decode: then the general way), and this is _chunk and _add written out for
        # it, with the per-read lookups done once (property-tested against on_event of the base class).
        times = self._times
        counts = self._counts
        weights = self._weights
        news = self._news
        record = self.record
        chat = self._chat
        decode_chunk = self.engines.decode_chunk
        tokens = 0
        for data in payloads:
            if self.done:
                break  # anything after the end marker is ignored
            try:
                chunk = decode_chunk(data)
            except _MSGSPEC_ERRORS:
                tokens += Decoder.on_event(self, data, now)
                continue
            if chunk.object == "error":
                tokens += Decoder.on_event(self, data, now)
                continue
            count = 0
            weight = 0
            choices = chunk.choices
            if choices:
                choice = choices[0]
                if chat:
                    delta = choice.delta
                    text = (delta.content or delta.reasoning_content or delta.reasoning) if delta is not None else None
                else:
                    text = choice.text
                if text:
                    count = 1
                    weight = len(text)
                if choice.finish_reason:
                    record.finish_reason = choice.finish_reason
            usage = chunk.usage
            if usage is not None:
                if usage.prompt_tokens is not None:
                    record.input_tokens = usage.prompt_tokens
                completion = usage.completion_tokens
                if completion is not None:
                    self._final_total = completion
                    if choices:
                        self._usage_chunks += 1
                        new = 0
                        if completion > self._last_cum:
                            new = completion - self._last_cum
                            self._last_cum = completion
                        if count or new:
                            times.append(now)
                            counts.append(count)
                            weights.append(weight)
                            news.append(new)
                            tokens += new or count
                        continue
            if count:
                times.append(now)
                counts.append(count)
                weights.append(weight)
                news.append(0)
                self._uncounted += 1
                tokens += count
        return tokens

    def _chunk(self, obj: dict[str, Any], now: float) -> int:
        # Written out flat: this runs once per token.
        count = 0
        weight = 0
        cum: int | None = None
        choices = obj.get("choices")
        if choices and type(choices) is list:
            choice = choices[0]
            if type(choice) is dict:
                if self._chat:
                    delta = choice.get("delta")
                    text = (
                        (delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"))
                        if type(delta) is dict
                        else None
                    )
                else:
                    text = choice.get("text")
                if text and type(text) is str:
                    count = 1
                    weight = len(text)
                reason = choice.get("finish_reason")
                if reason:
                    self.record.finish_reason = str(reason)
        usage = obj.get("usage")
        if usage and type(usage) is dict:
            completion = usage.get("completion_tokens")
            if type(completion) is int:
                self._final_total = completion
                if choices:
                    cum = completion
            prompt = usage.get("prompt_tokens")
            if type(prompt) is int:
                self.record.input_tokens = prompt
        self._openai_extensions(obj)
        if count == 0 and cum is None:
            return 0
        return self._add(now, count, weight, cum)

    def _body(self, obj: dict[str, Any]) -> tuple[str, int | None]:
        text = ""
        choices = obj.get("choices")
        if choices and isinstance(choices, list) and isinstance(choices[0], dict):
            text = _choice_text(choices[0], self._chat, delta=False)
            reason = choices[0].get("finish_reason")
            if reason:
                self.record.finish_reason = str(reason)
        total: int | None = None
        usage = obj.get("usage")
        if isinstance(usage, dict):
            if isinstance(usage.get("completion_tokens"), int):
                total = usage["completion_tokens"]
            if isinstance(usage.get("prompt_tokens"), int):
                self.record.input_tokens = usage["prompt_tokens"]
        self._openai_extensions(obj)
        if self.record.spec is None and self._chat and choices:
            # SGLang's non-streamed chat with return_meta_info: the raw meta_info inside each choice, every
            # choice's pooled when n > 1 (python/sglang/srt/entrypoints/openai/serving_chat.py
            # _build_chat_response; orchestrator/engines/sglang/responses.py from_choices_meta_info).
            self.record.spec = self.engines.readers.read_choices(choices)
        return text, total


class GenerateDecoder(Decoder):
    """SGLang's native ``/generate``: cumulative text and token counts in every chunk."""

    __slots__ = ("_text_len",)

    def __init__(self, record: RequestRecord) -> None:
        super().__init__(record)
        self._text_len = 0

    def _chunk(self, obj: dict[str, Any], now: float) -> int:
        text = obj.get("text")
        weight = 0
        if isinstance(text, str):
            # Cumulative by default; with --incremental-streaming-output each chunk is new text only.
            weight = len(text) - self._text_len if len(text) >= self._text_len else len(text)
            self._text_len = max(self._text_len, len(text))
        cum: int | None = None
        meta = obj.get("meta_info")
        if isinstance(meta, dict):
            cum = self._meta_info(meta)
            if cum is not None:
                self._final_total = cum
        return self._add(now, 1 if weight > 0 else 0, max(weight, 0), cum)

    def _body(self, obj: dict[str, Any]) -> tuple[str, int | None]:
        total = None
        meta = obj.get("meta_info")
        if isinstance(meta, dict):
            total = self._meta_info(meta)
        text = obj.get("text")
        return (text if isinstance(text, str) else ""), total


class LlamaCppDecoder(Decoder):
    """llama.cpp's native ``/completion``."""

    __slots__ = ()

    def _chunk(self, obj: dict[str, Any], now: float) -> int:
        content = obj.get("content")
        weight = len(content) if isinstance(content, str) else 0
        count = 1 if weight else 0
        stop = obj.get("stop") is True
        tokens = obj.get("tokens")
        if not stop and isinstance(tokens, list) and tokens:
            count = len(tokens)
        if stop:
            self.done = True
            self._final(obj)
        return self._add(now, count, weight, None)

    def _body(self, obj: dict[str, Any]) -> tuple[str, int | None]:
        self._final(obj)
        content = obj.get("content")
        return (content if isinstance(content, str) else ""), self._final_total

    def _final(self, obj: dict[str, Any]) -> None:
        predicted = obj.get("tokens_predicted")
        timings = obj.get("timings")
        if not isinstance(predicted, int) and isinstance(timings, dict):
            predicted = timings.get("predicted_n")
        if isinstance(predicted, int):
            self._final_total = predicted
        evaluated = obj.get("tokens_evaluated")
        if isinstance(evaluated, int):
            self.record.input_tokens = evaluated
        stop_type = obj.get("stop_type")
        if isinstance(stop_type, str):
            self.record.finish_reason = _LLAMACPP_STOP.get(stop_type, stop_type)
        elif obj.get("stopped_limit"):
            self.record.finish_reason = "length"
        elif obj.get("stopped_eos") or obj.get("stopped_word"):
            self.record.finish_reason = "stop"
        if "timings" in obj:  # llama.cpp's own field, read by its reader (orchestrator/engines/llamacpp/responses.py)
            self._extension("timings", obj["timings"])


def _choice_text(choice: dict[str, Any], chat: bool, *, delta: bool) -> str:
    if chat:
        part = choice.get("delta" if delta else "message")
        if not isinstance(part, dict):
            return ""
        text = part.get("content") or part.get("reasoning_content") or part.get("reasoning")
    else:
        text = choice.get("text")
    return text if isinstance(text, str) else ""


def _error_text(obj: dict[str, Any] | None) -> str:
    if not isinstance(obj, dict):
        return "error"
    error = obj.get("error", obj)
    if isinstance(error, dict):
        message = error.get("message") or error.get("detail") or json.dumps(error)[:200]
        return str(message)
    return str(error)[:200]


def _openai_chat(record: RequestRecord) -> Decoder:
    return OpenAIDecoder(record, chat=True)


def _openai_completions(record: RequestRecord) -> Decoder:
    return OpenAIDecoder(record, chat=False)


DECODERS = {
    "chat": _openai_chat,
    "completions": _openai_completions,
    "generate": GenerateDecoder,
    "llamacpp": LlamaCppDecoder,
}
