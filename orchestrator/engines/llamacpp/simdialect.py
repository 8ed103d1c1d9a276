"""llama.cpp's dialect (``llama-server``): the per-request ``print_timing`` block, ``/metrics``, ``timings`` in
responses, ``/health`` and ``/props``, as the llama.cpp tree of llama-cpp-python 0.3.36 writes them (the build
``scripts/get-llama-server.sh`` makes, reporting ``b0-unknown``); the real captures of that build in
``tests/data/llamacpp/`` are the reference the tests compare with.

Source files (tools/server/ of that tree):

- log lines: ``server-context.cpp`` ``server_slot::print_timings`` (the block printed when a request stops,
  before ``release``), through ``SLT_INF`` = ``"slot %12.*s: id %2d | task %d | "``
  (``server-common.h``); the line stamp ``%d.%02d.%03d.%03d`` (minutes.seconds.ms.us since start) and level
  letter ``I`` from ``common/log.cpp``; ``srv  llama_server: model loaded`` / ``listening on ...`` from
  ``server.cpp``.
- ``eval time`` per token and tokens/s over ``n_gen - 1`` tokens (the first comes from the prompt's logits);
  ``draft acceptance = accepted / drafted`` (no bonus), ``mean len = 1 + accepted / verify steps``; only
  requests that drafted print it.
- ``/metrics``: ``server-task.cpp`` ``server_task_result_metrics::to_metrics``: names, HELP and TYPE exactly,
  values through ``std::ostream``; a request's counts are added when it is released; the rate gauges count
  ``n_gen - 1`` tokens per request and are reset by every scrape.
- ``timings``: ``server-common.cpp`` ``server_slot_stats::to_json`` (``draft_n`` and ``draft_n_accepted`` only
  when the request drafted); responses ``server-task.cpp`` (``to_json_oaicompat*``), keys in that order.
- health: ``GET /health`` ``{"status":"ok"}``; while loading every endpoint answers 503
  ``{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`` (``server-http.cpp``);
  ``GET /props`` ``build_info`` = ``b<build>-<commit>`` (``b0-unknown`` for this build).

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from __future__ import annotations

import random
import re
import string
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from orchestrator.sim.dialects.base import Dialect, EndpointInfo, LogFn, StreamFormat, compact
from orchestrator.sim.expo import Family, render
from orchestrator.sim.request import SimRequest
from orchestrator.sim.stats import Counts

if TYPE_CHECKING:
    from orchestrator.sim.config import SimConfig

__all__ = ["LlamaCppDialect"]

BUILD_INFO = "b0-unknown"  # llama_build_info() of a build without git (the sdist's tree)
_ID_CHARS = string.ascii_letters + string.digits
# common/log.cpp common_log_entry::print with colours on (common/log.h LOG_COL_*): the time blue, "I " green then
# the default colour; "W "/"E "/"D " coloured, their reset written after the message (so before the next line).
_COLOUR_LINE = re.compile(r"^(\d+\.\d\d\.\d{3}\.\d{3}) ([IWED]) ")
_COLOURS = {"I": "\x1b[32m", "W": "\x1b[35m", "E": "\x1b[31m", "D": "\x1b[33m"}


@dataclass
class LlamaCppDialect(Dialect):
    engine: ClassVar[str] = "llamacpp"
    versions: ClassVar[tuple[str, ...]] = (BUILD_INFO,)
    algorithms: ClassVar[tuple[str, ...]] = ("ar", "linear")
    coloured_log: ClassVar[bool] = True

    started: float = field(default_factory=time.monotonic)
    _task: int = 0
    _free_slots: list[int] = field(default_factory=list)
    _rng: random.Random = field(default_factory=random.Random)
    # Server metrics (server_metrics), added per released request.
    _prompt_tokens: int = 0
    _prompt_seconds: float = 0.0
    _predicted: int = 0
    _predicted_seconds: float = 0.0
    _decode_calls: int = 0
    _decode_reset: int = 0  # _decode_calls at the counter-reset fault (n_decode_total counts from it)
    _busy_slots: int = 0
    _cached_tokens: dict[int, int] = field(default_factory=dict)  # slot -> prompt tokens it holds (slot erase)
    _tokens_max: int = 0
    _spec: Counts = field(default_factory=Counts)
    _bucket_prompt: list[float] = field(default_factory=lambda: [0.0, 0.0])  # tokens, seconds since last scrape
    _bucket_predict: list[float] = field(default_factory=lambda: [0.0, 0.0])

    @classmethod
    def max_running(cls, config: SimConfig) -> int:
        """One request per slot (-np): at most ``--slots`` at once."""
        return min(config.profile.max_running_requests, config.slots)

    @classmethod
    def coloured(cls, log: LogFn) -> LogFn:
        """Each line as llama.cpp's common/log.cpp writes it with --log-colors on (the coloured-log fault)."""
        pending = [""]

        def coloured(line: str) -> None:
            match = _COLOUR_LINE.match(line)
            if match is None:
                log(pending[0] + line)
                pending[0] = ""
                return
            stamp, level = match.groups()
            after = "\x1b[0m" if level == "I" else ""
            log(f"{pending[0]}\x1b[34m{stamp}\x1b[0m {_COLOURS[level]}{level} {after}{line[match.end() :]}")
            pending[0] = "\x1b[0m" if level != "I" else ""

        return coloured

    def slots(self) -> int:
        return self.config.slots

    def _stamp(self) -> str:
        us = int((time.monotonic() - self.started) * 1e6)
        minutes, rest = divmod(us, 60_000_000)
        seconds, rest = divmod(rest, 1_000_000)
        ms, micro = divmod(rest, 1000)
        return f"{minutes}.{seconds:02d}.{ms:03d}.{micro:03d}"

    def _info(self, message: str, level: str = "I") -> str:
        return f"{self._stamp()} {level} {message}"

    def _slot_line(self, func: str, slot: int, task: int, message: str) -> str:
        return self._info(f"slot {func[:12]:>12}: id {slot:2d} | task {task} | {message}")

    # Life cycle.

    def startup_lines(self, url: str) -> list[str]:
        # tools/server/server.cpp: SRV_INF("initializing ...") after the arguments are parsed, then
        # common/common.cpp common_params_print_info's INFO line (its build and system_info lines are trace
        # level, -lv 4); both once per process start, as the captures in tests/data/llamacpp/ show.
        return [
            self._info("srv  llama_server: initializing ..."),
            self._info("cmn  common_param: common_params_print_info: verbosity = 3 (adjust with the `-lv N` CLI arg)"),
        ]

    def loaded_lines(self) -> list[str]:
        return [
            self._info(f"srv    load_model: loading model '{self.config.model}'"),
            self._info(
                f"srv    load_model: initializing, n_slots = {self.slots()}, "
                f"n_ctx_slot = {self.config.profile.context_length // max(1, self.slots())}, kv_unified = 'false'"
            ),
        ]

    def ready_lines(self, url: str) -> list[str]:
        return [self._info("srv  llama_server: model loaded"), self._info(f"srv  llama_server: listening on {url}")]

    def fail_start_lines(self) -> list[str]:
        return [
            self._info("llama_model_load: error loading model: (simulated by --fault fail-start)", "E"),
            self._info("srv    load_model: failed to load model", "E"),
            self._info("srv    operator(): operator(): cleaning up before exit...", "I"),
            self._info("main: exiting due to model loading error", "E"),
        ]

    def crash_lines(self, completed: int) -> list[str]:
        return [self._info(f"GGML_ASSERT failed (simulated by --fault crash-after={completed})", "E")]

    # Scheduler hooks.

    def prefill(self, group: int, batch: list[SimRequest], new_tokens: int, now: float) -> None:
        self._decode_calls += 1
        self._busy_slots += len(batch)
        for req in batch:
            if not self._free_slots:
                self._free_slots = list(range(self.slots()))
            slot = self._free_slots.pop()
            self._task += 1
            req.extra["slot"], req.extra["task"] = slot, self._task
            self.log(self._slot_line("get_availabl", slot, -1, "selected slot by LRU, t_last = -1"))
            self.log(self._slot_line("launch_slot_", slot, self._task, "processing task, is_child = 0"))

    def decode_step(self, group: int, step: Counts, now: float) -> None:
        self._decode_calls += 1
        self._busy_slots += step.request_steps

    def request_finished(self, req: SimRequest, now: float) -> None:
        if "slot" not in req.extra:
            return
        slot, task = int(req.extra["slot"]), int(req.extra["task"])  # type: ignore[call-overload]
        t = self.request_times(req)
        t_prompt, t_gen = t["prompt_ms"], t["predicted_ms"]
        n_gen, n_prompt = req.completion_tokens, req.prompt_tokens
        steps = max(0, n_gen - 1)
        log = self.log
        log(
            self._slot_line(
                "print_timing",
                slot,
                task,
                f"prompt eval time = {t_prompt:10.2f} ms / {n_prompt:5d} tokens "
                f"({t['prompt_per_token_ms']:8.2f} ms per token, {t['prompt_per_second']:8.2f} tokens per second)",
            )
        )
        log(
            self._slot_line(
                "print_timing",
                slot,
                task,
                f"       eval time = {t_gen:10.2f} ms / {n_gen:5d} tokens ({t['predicted_per_token_ms']:8.2f} ms per "
                f"token, {t['predicted_per_second']:8.2f} tokens per second)",
            )
        )
        log(
            self._slot_line(
                "print_timing",
                slot,
                task,
                f"      total time = {t_prompt + t_gen:10.2f} ms / {n_prompt + n_gen:5d} tokens",
            )
        )
        log(self._slot_line("print_timing", slot, task, f"   graphs reused = {self._decode_calls:10d}"))
        if req.spec_drafted > 0:
            mean = 1.0 + req.spec_accepted / req.spec_verify_ct if req.spec_verify_ct else 1.0
            log(
                self._slot_line(
                    "print_timing",
                    slot,
                    task,
                    f"draft acceptance = {req.spec_accepted / req.spec_drafted:0.5f} "
                    f"({req.spec_accepted:5d} accepted / {req.spec_drafted:5d} generated), mean len = {mean:5.2f}",
                )
            )
        if self.config.faults.bad_metrics:
            log(self._slot_line("print_timing", slot, task, "draft acceptance = nan (  accepted /"))
        log(
            self._slot_line("release", slot, task, f"stop processing: n_tokens = {n_prompt + n_gen - 1}, truncated = 0")
        )
        self._cached_tokens[slot] = n_prompt + n_gen - 1  # what the slot's prompt cache holds until erased
        self._free_slots.append(slot)
        # metrics_on_prediction, at release (only requests that generated something).
        if n_gen > 0:
            self._prompt_tokens += n_prompt
            self._prompt_seconds += t_prompt / 1000.0
            self._predicted += n_gen
            self._predicted_seconds += t_gen / 1000.0
            self._tokens_max = max(self._tokens_max, n_prompt + n_gen)
            self._bucket_prompt[0] += n_prompt
            self._bucket_prompt[1] += t_prompt / 1000.0
            self._bucket_predict[0] += steps
            self._bucket_predict[1] += t_gen / 1000.0
            if req.spec_drafted > 0:
                counts = Counts(drafts=req.spec_verify_ct, draft_tokens=req.spec_drafted, accepted=req.spec_accepted)
                counts.hist = list(req.spec_hist)
                self._spec.add(counts)

    @staticmethod
    def request_times(req: SimRequest) -> dict[str, float]:
        """server_slot_stats: prompt and generation times (ms) and rates, the first token being free."""
        admitted = req.admitted_at if req.admitted_at is not None else req.arrival
        first = req.first_token_at if req.first_token_at is not None else admitted
        last = req.finished_at if req.finished_at is not None else first
        t_prompt = max(1e-3, (first - admitted) * 1000.0)
        t_gen = max(0.0, (last - first) * 1000.0)
        n_prompt, steps = req.prompt_tokens, max(0, req.completion_tokens - 1)
        return {
            "prompt_ms": t_prompt,
            "prompt_per_token_ms": t_prompt / n_prompt if n_prompt else 0.0,
            "prompt_per_second": 1e3 / t_prompt * n_prompt if t_prompt > 0 else 0.0,
            "predicted_ms": t_gen,
            "predicted_per_token_ms": t_gen / steps if steps else 0.0,
            "predicted_per_second": 1e3 / t_gen * steps if t_gen > 0 else 0.0,
        }

    # HTTP.

    def endpoints(self) -> list[EndpointInfo]:
        return [
            EndpointInfo("/health", "health", body='{"status":"ok"}'),
            EndpointInfo("/v1/health", "health", body='{"status":"ok"}'),
            EndpointInfo("/v1/models", "models"),
            EndpointInfo("/props", "props"),
            EndpointInfo("/metrics", "metrics"),
        ]

    def loading_response(self) -> tuple[int, str | None]:
        return 503, '{"error":{"message":"Loading model","type":"unavailable_error","code":503}}'

    def control_routes(self) -> list[tuple[str, str]]:
        # tools/server/server.cpp: ctx_http.get("/slots", ...), ctx_http.post("/slots/:id_slot", ...)
        return [("GET", "/slots"), ("POST", "/slots/{id_slot}")]

    def control(self, method: str, path: str, params: dict[str, str], busy: bool) -> tuple[int, Any]:
        """``GET /slots`` and ``POST /slots/{id}?action=erase`` as llama-server answers them
        (tools/server/server-context.cpp ``get_slots``, ``post_slots``, ``handle_slots_erase``; the slot actions
        need ``--slot-save-path``, else 501 not_supported_error)."""
        n_ctx = self.config.profile.context_length // max(1, self.slots())
        if method == "GET" and path == "/slots":
            return 200, [
                {"id": i, "id_task": -1, "n_ctx": n_ctx, "speculative": self.speculative, "is_processing": False}
                for i in range(self.slots())
            ]
        if method == "POST" and path == "/slots/{id_slot}":
            if not self.config.slot_save_path:
                return 501, self.error_body(
                    "This server does not support slots action. Start it with `--slot-save-path`",
                    kind="not_supported_error",
                    code=501,
                )
            try:
                slot = int(params.get("id_slot", ""))
            except ValueError:
                return 400, self.error_body("Invalid slot ID", kind="invalid_request_error", code=400)
            if params.get("action") != "erase":
                return 400, self.error_body("Invalid action", kind="invalid_request_error", code=400)
            if not 0 <= slot < self.slots():
                return 400, self.error_body("Invalid slot ID", kind="invalid_request_error", code=400)
            erased = self._cached_tokens.pop(slot, 0)
            return 200, {"id_slot": slot, "n_erased": erased}
        return 404, None

    def error_body(self, message: str, *, kind: str, code: int, param: str | None = None) -> dict[str, Any]:
        # server-common.cpp format_error_response: code, message, type (invalid_request_error for 400s).
        kinds = {
            400: "invalid_request_error",
            500: "server_error",
            501: "not_supported_error",
            503: "unavailable_error",
        }
        return {"error": {"code": code, "message": message, "type": kinds.get(code, "server_error")}}

    def info(self, port: int) -> dict[str, Any]:
        return {
            "default_generation_settings": {"n_ctx": self.config.profile.context_length // max(1, self.slots())},
            "total_slots": self.slots(),
            "model_path": self.config.model,
            "build_info": BUILD_INFO,
        }

    def models(self) -> dict[str, Any]:
        card = {
            "id": self.config.model,
            "object": "model",
            "created": int(self.started_wall),
            "owned_by": "llamacpp",
            "meta": None,
        }
        return {"object": "list", "data": [card]}

    def reset_counters(self) -> None:
        """The counter-reset fault: server_metrics's cumulative counts as a new process starts them (at 0)."""
        self._prompt_tokens = self._predicted = self._busy_slots = self._tokens_max = 0
        self._prompt_seconds = self._predicted_seconds = 0.0
        self._spec = Counts()
        self._decode_reset = self._decode_calls  # the log's "graphs reused" count goes on: the process does

    def metrics_text(self, *, bad_line: bool = False) -> str:
        self._task += 1  # a /metrics request is a task of the server queue
        stats = self.groups[0]
        spec = self._spec
        prompt_tps = self._bucket_prompt[0] / self._bucket_prompt[1] if self._bucket_prompt[1] else 0.0
        predict_tps = self._bucket_predict[0] / self._bucket_predict[1] if self._bucket_predict[1] else 0.0
        self._bucket_prompt = [0.0, 0.0]  # reset by every scrape (metrics_reset_bucket)
        self._bucket_predict = [0.0, 0.0]
        counters = (
            ("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", self._prompt_tokens),
            ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", 0),
            ("prompt_seconds_total", "Total time spent processing prompts", self._prompt_seconds),
            ("tokens_predicted_total", "Number of generation tokens processed", self._predicted),
            ("tokens_predicted_seconds_total", "Total time spent generating tokens", self._predicted_seconds),
            (
                "n_decode_total",
                "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding",
                self._decode_calls - self._decode_reset,
            ),
            ("n_tokens_max", "Largest observed sequence length (prompt + generation)", self._tokens_max),
            ("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", spec.draft_tokens),
            (
                "spec_decode_num_accepted_tokens_total",
                "Speculative: Total draft tokens accepted by the target model",
                spec.accepted,
            ),
            ("spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", spec.drafts),
        )
        gauges = (
            ("prompt_tokens_seconds", "Average prompt throughput in tokens/s", prompt_tps),
            ("predicted_tokens_seconds", "Average generation throughput in tokens/s", predict_tps),
            ("requests_processing", "Number of requests processing", stats.running),
            ("requests_deferred", "Number of requests deferred", stats.queued),
            (
                "n_busy_slots_per_decode",
                "Average number of busy slots per llama_decode() call",
                self._busy_slots / max(self._decode_calls - self._decode_reset, 1),
            ),
        )
        fams = [Family(f"llamacpp:{n}", d, "counter").add({}, float(v)) for n, d, v in counters]
        fams += [Family(f"llamacpp:{n}", d, "gauge").add({}, float(v)) for n, d, v in gauges]
        if spec.drafts:
            per_pos = Family(
                "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
                "Accepted tokens per draft position",
                "counter",
            )
            for pos, n in enumerate(spec.accepted_per_position(self.draft_depth)):
                per_pos.add({"position": str(pos)}, int(n))
            fams.append(per_pos)
        text = render(fams, cpp=True)
        if bad_line:
            text += "llamacpp:tokens_predicted_total not-a-number\n"
        return text

    # Responses.

    def completion_id(self, req: SimRequest, chat: bool) -> str:
        if "id" not in req.extra:  # gen_chatcmplid(): "chatcmpl-" + 32 random alphanumerics, for both APIs
            req.extra["id"] = "chatcmpl-" + "".join(self._rng.choice(_ID_CHARS) for _ in range(32))
        return str(req.extra["id"])

    def timings(self, req: SimRequest) -> dict[str, Any]:
        t = self.request_times(req)
        out: dict[str, Any] = {
            "cache_n": 0,
            "prompt_n": req.prompt_tokens,
            "prompt_ms": round(t["prompt_ms"], 3),
            "prompt_per_token_ms": t["prompt_per_token_ms"],
            "prompt_per_second": t["prompt_per_second"],
            "predicted_n": req.completion_tokens,
            "predicted_ms": round(t["predicted_ms"], 3),
            "predicted_per_token_ms": t["predicted_per_token_ms"],
            "predicted_per_second": t["predicted_per_second"],
        }
        if req.spec_drafted > 0:
            out["draft_n"] = req.spec_drafted
            out["draft_n_accepted"] = req.spec_accepted
        return out

    @staticmethod
    def _usage(req: SimRequest) -> dict[str, Any]:
        return {
            "completion_tokens": req.completion_tokens,
            "prompt_tokens": req.prompt_tokens,
            "total_tokens": req.prompt_tokens + req.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
        }

    def openai_response(
        self, req: SimRequest, *, chat: bool, model: str, created: int, options: dict[str, Any]
    ) -> dict[str, Any]:
        reason = "stop" if req.finish_reason == "stop" else "length"
        if chat:
            choice: dict[str, Any] = {
                "finish_reason": reason,
                "index": 0,
                "message": {"role": "assistant", "content": req.full_text},
            }
        else:
            choice = {"text": req.full_text, "index": 0, "logprobs": None, "finish_reason": reason}
        return {
            "choices": [choice],
            "created": created,
            "model": model,
            "system_fingerprint": BUILD_INFO,
            "object": "chat.completion" if chat else "text_completion",
            "usage": self._usage(req),
            "id": self.completion_id(req, chat),
            "timings": self.timings(req),
        }

    def stream_format(self, req: SimRequest, *, chat: bool, model: str, created: int) -> StreamFormat:
        rid = self.completion_id(req, chat)
        if chat:
            return StreamFormat(
                head='data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"',
                tail=f'"}}}}],"created":{created},"id":"{rid}","model":{compact(model)},'
                f'"system_fingerprint":"{BUILD_INFO}","object":"chat.completion.chunk"}}\n\n',
                envelope={"chat": True, "created": created, "id": rid, "model": model},
            )
        return StreamFormat(
            head='data: {"choices":[{"text":"',
            tail=f'","index":0,"logprobs":null,"finish_reason":null}}],"created":{created},"model":{compact(model)},'
            f'"system_fingerprint":"{BUILD_INFO}","object":"text_completion","id":"{rid}"}}\n\n',
            envelope={"chat": False, "created": created, "id": rid, "model": model},
        )

    def stream_tail(self, req: SimRequest, fmt: StreamFormat, *, reason: str, options: dict[str, Any]) -> list[str]:
        env = fmt.envelope
        reason = "stop" if reason == "stop" else "length"
        if env["chat"]:
            chunks: list[dict[str, Any]] = [
                {
                    "choices": [{"finish_reason": reason, "index": 0, "delta": {}}],
                    "created": env["created"],
                    "id": env["id"],
                    "model": env["model"],
                    "system_fingerprint": BUILD_INFO,
                    "object": "chat.completion.chunk",
                }
            ]
            if options.get("include_usage"):
                chunks.append(
                    {
                        "choices": [],
                        "created": env["created"],
                        "id": env["id"],
                        "model": env["model"],
                        "system_fingerprint": BUILD_INFO,
                        "object": "chat.completion.chunk",
                        "usage": self._usage(req),
                    }
                )
            chunks[-1]["timings"] = self.timings(req)
        else:
            chunks = [
                {
                    "choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": reason}],
                    "created": env["created"],
                    "model": env["model"],
                    "system_fingerprint": BUILD_INFO,
                    "object": "text_completion",
                    "usage": self._usage(req),
                    "id": env["id"],
                    "timings": self.timings(req),
                }
            ]
        return [f"data: {compact(c)}\n\n" for c in chunks]
