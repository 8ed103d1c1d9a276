"""SGLang's dialect: the scheduler's log lines, ``/metrics``, the OpenAI and native responses, the health
and information endpoints, as SGLang 0.5.23 writes them (and 0.5.10 / 0.4.10 where they differ).

Every format below was read in SGLang's own wheels (``pip download --no-deps sglang==V``; paths inside the
wheel, ``python/sglang/...`` on GitHub). The 0.5.23 files:

- log prefix: ``sglang/srt/utils/common.py`` ``configure_logger`` (``[%(asctime)s{prefix}] %(message)s``, date
  ``%Y-%m-%d %H:%M:%S``) and ``sglang/srt/managers/scheduler.py`` ``configure_scheduler_process`` (prefix
  ``" DP{dp}"`` when a DP rank exists, ``" TP{tp}"`` when tp_size > 1; only attention-TP rank 0 logs);
- ``Decode batch`` / ``Prefill batch`` lines: ``sglang/srt/managers/scheduler_components/metrics_reporter.py``
  ``report_decode_stats`` / ``report_prefill_stats``, usage parts from ``pool_stats_observer.py``;
  0.5.10 ``sglang/srt/observability/scheduler_metrics_mixin.py``; 0.4.10
  ``sglang/srt/managers/scheduler_metrics_mixin.py`` (``Decode batch.``, trailing ``, ``, no accept rate);
- ``/metrics``: ``sglang/srt/observability/metrics_collector.py`` (0.4.10: ``sglang/srt/metrics/collector.py``),
  served by prometheus_client's MultiProcessCollector (``sglang/srt/utils/common.py``
  ``add_prometheus_middleware``): labels sorted, no ``_created``, a series exists once first set;
- responses: ``sglang/srt/entrypoints/openai/protocol.py``, ``serving_chat.py``, ``serving_completions.py``,
  ``sse_utils.py``, ``utils.py`` (``spec_tokens_details_from_meta_info``) and ``sglang/srt/managers/
  tokenizer_manager.py`` (``_calculate_spec_decoding_metrics``, the ``/generate`` meta_info);
- health and information: ``sglang/srt/entrypoints/http_server.py`` (``/health``, ``/health_generate``,
  ``/v1/models``, ``/get_server_info``, ``/get_model_info``, the warm-up request and
  ``The server is fired up and ready to roll!``), ``internal_state.py`` (``avg_spec_accept_length``).

Counting as SGLang counts (see docs/engines.md): a request's first token comes from its prefill, so
``completion_tokens = 1 + Σ(tokens of its verify steps)`` and ``spec_verify_ct`` counts verify steps only;
``sglang:generation_tokens_total`` and ``sglang:spec_verify_calls_total`` grow when a request finishes, by its
``completion_tokens`` and ``spec_verify_ct``; the gauges hold the last ``Decode batch`` interval's values; the
line's ``gen throughput`` divides the interval's decode tokens by the time since the previous line (idle time
included). SGLang's ``speculative_num_draft_tokens`` counts the verified root token too, so the simulator
reports ``drafted + 1`` and ``accept rate`` = accepted / (verify steps x drafted).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from orchestrator.sim.dialects.base import Dialect, EndpointInfo, StreamFormat, compact
from orchestrator.sim.expo import Family, render
from orchestrator.sim.request import SimRequest
from orchestrator.sim.stats import Counts

__all__ = ["WARMUP_MAX_NEW_TOKENS", "WARMUP_TEXT", "SGLangDialect", "bad_metric_lines", "decode_batch"]

# 0.5.23 metrics_reporter.py: GEN_THROUGHPUT_STALENESS_SECONDS; _maybe_log_idle_metrics republishes after 30 s.
GEN_THROUGHPUT_STALENESS_SECONDS = 30.0
# http_server.py _execute_server_warmup: a /generate of this text, temperature 0, max_new_tokens 8.
WARMUP_TEXT = "The capital city of France is"
WARMUP_MAX_NEW_TOKENS = 8

_ALGORITHM = {"ar": None, "linear": "DFLASH", "ddtree": "DDTREE"}


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


@dataclass
class _Group:
    """One scheduler's logging state (SchedulerMetricsReporter)."""

    prefix: str
    labels: dict[str, str]
    interval: Counts = field(default_factory=Counts)
    last_decode_line: float = 0.0  # last_decode_stats_tic
    last_prefill_line: float = 0.0
    steps_since_prefill_line: int = 1 << 30
    total_tokens: int = 0  # spec_total_num_accept_tokens (accumulated at Decode lines)
    total_forward: int = 0  # spec_total_num_forward_ct
    last_gen_throughput: float = 0.0
    intervals_logged: int = 0
    # The gauges as last published (log_stats).
    gauges: dict[str, float] = field(default_factory=dict)
    published_at: float = 0.0


@dataclass
class SGLangDialect(Dialect):
    engine: ClassVar[str] = "sglang"
    versions: ClassVar[tuple[str, ...]] = ("0.5.23", "0.5.10", "0.4.10")
    takes_dp_size: ClassVar[bool] = True
    uncoloured: ClassVar[str] = "SGLang's logger has no colours"  # utils/common.py configure_logger

    _groups: list[_Group] = field(default_factory=list)
    # TokenizerMetricsCollector counters: (name, label tuple) -> value; series appear on first increment.
    _counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)

    # Version traits (read in the wheels; see the module docstring).

    @property
    def _v(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.version.split("."))

    @property
    def accept_rate_kind(self) -> str | None:
        """``drafts`` (0.5.11+: accepted drafts / proposed drafts), ``incl_bonus`` (0.5.10: accepted tokens
        incl. bonus / (forward ct x num_draft_tokens)), or None (0.4.10 prints no accept rate)."""
        if self._v >= (0, 5, 11):
            return "drafts"
        if self._v >= (0, 5, 10):
            return "incl_bonus"
        return None

    @property
    def has_verify_calls_counter(self) -> bool:  # sglang:spec_verify_calls_total, 0.5.13+
        return self._v >= (0, 5, 13)

    @property
    def has_is_streaming_label(self) -> bool:  # 0.5.17+
        return self._v >= (0, 5, 17)

    @property
    def has_sglext(self) -> bool:  # return_spec_tokens_details, 0.5.19+
        return self._v >= (0, 5, 19)

    @property
    def num_draft_tokens(self) -> int:
        """``speculative_num_draft_tokens`` as SGLang counts it (the drafts plus the verified root)."""
        return self.drafted + 1 if self.speculative else 0

    # Groups: one scheduler (and one log prefix) per DP group.

    def setup_groups(self) -> None:
        cfg = self.config
        self._groups = []
        dp, tp = cfg.dp_size, cfg.tp_size
        per_group = max(1, tp // dp)
        for rank in range(dp):
            tp_rank = rank * per_group if dp > 1 else 0
            prefix = (f" DP{rank}" if dp > 1 else "") + (f" TP{tp_rank}" if tp > 1 else "")
            labels = {"model_name": cfg.model, "engine_type": "unified", "tp_rank": str(tp_rank), "pp_rank": "0"}
            if self._v >= (0, 5, 10):
                labels["moe_ep_rank"] = str(tp_rank) if cfg.ep_size > 1 else "0"
            if dp > 1:
                labels["dp_rank"] = str(rank)
            now = time.monotonic()
            self._groups.append(_Group(prefix=prefix, labels=labels, last_decode_line=now, last_prefill_line=now))

    def _scheduler_line(self, group: int, message: str) -> str:
        return f"[{_now()}{self._groups[group].prefix}] {message}"

    @staticmethod
    def _server_line(message: str) -> str:
        return f"[{_now()}] {message}"

    # Life cycle.

    def server_args(self, port: int) -> str:
        cfg = self.config
        algo = _ALGORITHM[cfg.algorithm]
        fields = [
            f"model_path={cfg.model!r}",
            f"served_model_name={cfg.model!r}",
            f"host={cfg.host!r}",
            f"port={port}",
            f"tp_size={cfg.tp_size}",
            f"dp_size={cfg.dp_size}",
            f"enable_dp_attention={cfg.dp_size > 1}",
            f"random_seed={cfg.seed}",
            f"decode_log_interval={cfg.decode_log_interval}",
            "enable_metrics=True",
            f"speculative_algorithm={algo!r}",
            f"speculative_num_draft_tokens={self.num_draft_tokens or None}",
        ]
        if cfg.algorithm == "ddtree":  # the DDTree research build's arguments
            fields += [f"speculative_ddtree_budget={cfg.budget}", f"speculative_ddtree_topk={cfg.topk}"]
        return "ServerArgs(" + ", ".join(fields) + ")"

    def startup_lines(self, url: str) -> list[str]:
        # http_server.py launch_server logs the arguments; uvicorn prints its own lines without SGLang's prefix.
        port = int(url.rsplit(":", 1)[1])
        return [self._server_line(f"server_args={self.server_args(port)}")]

    def load_begin_lines(self) -> list[str]:
        return [self._scheduler_line(0, "Load weight begin. avail mem=139.00 GB, mem usage=0.00 GB.")]

    def loading_line(self, done: int, total: int, elapsed: float, remaining: float) -> str | None:
        # tqdm's progress bar (printed by the model loader, without the logger's prefix).
        pct = 100 * done // total if total else 100
        rate = f"{done / elapsed:5.2f}it/s" if elapsed >= 0.5 else "?it/s"
        return (
            f"Loading safetensors checkpoint shards: {pct:3d}% Completed | {done}/{total} "
            f"[{_mmss(elapsed)}<{_mmss(remaining)}, {rate}]"
        )

    def loaded_lines(self) -> list[str]:
        return [
            self._scheduler_line(0, "Load weight end. type=SimModel, dtype=torch.bfloat16, avail mem=60.00 GB."),
            self._scheduler_line(0, "Capture cuda graph end. Time elapsed: 0.00 s. mem usage=1.00 GB."),
        ]

    def uvicorn_lines(self, url: str) -> list[str]:
        return [
            "INFO:     Started server process",
            "INFO:     Waiting for application startup.",
            "INFO:     Application startup complete.",
            f"INFO:     Uvicorn running on {url} (Press CTRL+C to quit)",
        ]

    def warmup_request(self) -> dict[str, Any] | None:
        """http_server.py ``_execute_server_warmup``: one ``/generate`` of a fixed text, temperature 0, 8 new
        tokens, counted in the metrics like any request, before the server is ready."""
        return {"text": WARMUP_TEXT, "sampling_params": {"temperature": 0, "max_new_tokens": WARMUP_MAX_NEW_TOKENS}}

    def ready_lines(self, url: str) -> list[str]:
        return [self._server_line("The server is fired up and ready to roll!")]

    def fail_start_lines(self) -> list[str]:
        site = "/usr/local/lib/python3.11/site-packages/sglang/srt"
        return [
            self._scheduler_line(0, "Scheduler hit an exception: Traceback (most recent call last):"),
            f'  File "{site}/managers/scheduler.py", line 2710, in run_scheduler_process',
            "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
            f'  File "{site}/model_loader/loader.py", line 381, in load_weights_and_postprocess',
            "    model.load_weights(weights)",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. (simulated by --fault fail-start)",
            "",
            self._server_line("Received sigquit from a child process. It usually means the child failed."),
        ]

    def crash_lines(self, completed: int) -> list[str]:
        return [
            self._scheduler_line(0, "Scheduler hit an exception: Traceback (most recent call last):"),
            '  File "/usr/local/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 1022, '
            "in event_loop_overlap",
            "    batch_result = self.run_batch(batch)",
            "RuntimeError: CUDA error: an illegal memory access was encountered "
            f"(simulated by --fault crash-after={completed})",
            self._server_line("Received sigquit from a child process. It usually means the child failed."),
        ]

    # Scheduler hooks.

    def prefill(self, group: int, batch: list[SimRequest], new_tokens: int, now: float) -> None:
        # SGLang prints every prefill batch; at simulated speeds that floods a journal (whose rate limit would
        # then drop Decode lines), so the simulator prints at most one per decode-log interval: the batch it
        # prints is a real one (its own numbers), the others are not printed.
        g = self._groups[group]
        stats = self.groups[group]
        gap = now - g.last_prefill_line
        g.last_prefill_line = now
        if g.steps_since_prefill_line < self.config.decode_log_interval:
            return
        g.steps_since_prefill_line = 0
        usage = f"token usage: {stats.token_usage:.2f}, "
        if self._v >= (0, 5, 10):
            throughput = new_tokens / gap if gap > 0 else 0.0
            msg = (
                f"Prefill batch, #new-seq: {len(batch)}, #new-token: {new_tokens}, #cached-token: 0, {usage}"
                f"#running-req: {stats.running}, #queue-req: {stats.queued}, "
            )
            if self._v >= (0, 5, 23):
                msg += "#pending-token: 0, "
            msg += f"cuda graph: False, input throughput (token/s): {throughput:.2f}"
        else:  # 0.4.10: "Prefill batch. ", trailing ", ", no throughput outside PD prefill
            msg = (
                f"Prefill batch. #new-seq: {len(batch)}, #new-token: {new_tokens}, #cached-token: 0, {usage}"
                f"#running-req: {stats.running}, #queue-req: {stats.queued}, "
            )
        self.log(self._scheduler_line(group, msg))
        self._publish(group, now, decode=False)

    def decode_step(self, group: int, step: Counts, now: float) -> None:
        g = self._groups[group]
        g.interval.add(step)
        g.steps_since_prefill_line += 1
        if g.interval.steps >= self.config.decode_log_interval:
            self._decode_line(group, now)

    def _decode_line(self, group: int, now: float) -> None:
        g = self._groups[group]
        stats = self.groups[group]
        done = g.interval
        g.interval = Counts()
        gap = now - g.last_decode_line
        g.last_decode_line = now
        g.last_gen_throughput = done.tokens / gap if gap > 0 else 0.0
        sep = ", " if self._v >= (0, 5, 10) else ". "
        msg = f"Decode batch{sep}#running-req: {stats.running}, #token: {stats.kv_tokens}, "
        msg += f"token usage: {stats.token_usage:.2f}, "
        accept_len = accept_rate = 0.0
        if self.speculative and done.request_steps:
            accept_len = done.tokens / done.request_steps
            g.total_tokens += done.tokens
            g.total_forward += done.request_steps
            kind = self.accept_rate_kind
            if kind == "drafts":
                proposed = done.request_steps * (self.num_draft_tokens - 1)
                accept_rate = done.accepted / proposed if proposed else 0.0
                msg += f"accept len: {accept_len:.2f}, accept rate: {accept_rate:.2f}, "
            elif kind == "incl_bonus":
                proposed = done.request_steps * self.num_draft_tokens
                accept_rate = done.tokens / proposed if proposed else 0.0
                msg += f"accept len: {accept_len:.2f}, accept rate: {accept_rate:.2f}, "
            else:
                msg += f"accept len: {accept_len:.2f}, "
        msg += f"cuda graph: True, gen throughput (token/s): {g.last_gen_throughput:.2f}, #queue-req: {stats.queued}"
        if self._v < (0, 5, 10):
            msg += ", "
        self.log(self._scheduler_line(group, msg))
        # What the line's ratios are made of and it does not print (spec_num_accept_tokens,
        # spec_num_forward_ct: the batch sizes summed, the seconds): the --truth-log, for tests.
        self.truth(
            {
                "engine": "sglang",
                "group": group,
                "message": msg,
                "tokens": done.tokens,
                "forward": done.request_steps,
                "accepted": done.accepted,
                "seconds": gap,
                "running": stats.running,
            }
        )
        g.gauges["spec_accept_length"] = accept_len
        g.gauges["spec_accept_rate"] = accept_rate
        self._publish(group, now, decode=True)
        if self.config.algorithm == "ddtree" and done.request_steps:
            # The DDTree research build prints its own line after SGLang's (a bare print, no prefix).
            self.log(
                f"DDTREE metrics: bs={max(1, round(done.request_steps / done.steps))} budget={self.config.budget} "
                f"avg_actual_nodes={self.drafted + 1.0:.2f} "
                f"avg_accepted_drafts={done.per_request(done.reported):.2f} "
                f"avg_commit_len={done.accept_length:.2f} avg_accepted_depth={done.per_request(done.depth):.2f}"
            )
        if self.config.faults.bad_metrics:
            for line in self.bad_metric_lines(g.intervals_logged):
                self.log(line)
        g.intervals_logged += 1

    def _publish(self, group: int, now: float, *, decode: bool) -> None:
        """SchedulerMetricsCollector.log_stats: set the gauges (at Decode and Prefill lines)."""
        g = self._groups[group]
        stats = self.groups[group]
        throughput = g.last_gen_throughput
        if self._v >= (0, 5, 23) and not decode and now - g.last_decode_line > GEN_THROUGHPUT_STALENESS_SECONDS:
            throughput = 0.0  # _current_gen_throughput decays a stale interval's figure
        g.gauges.update(
            num_running_reqs=stats.running,
            num_queue_reqs=stats.queued,
            gen_throughput=throughput,
            token_usage=round(stats.token_usage, 2) if self._v < (0, 5, 10) else stats.token_usage,
            num_used_tokens=stats.kv_tokens,
            cache_hit_rate=0.0,
        )
        g.published_at = now

    def idle_hook(self, group: int, now: float) -> None:
        """The scheduler has nothing to run (0.5.23 ``_maybe_log_idle_metrics``): if the published running
        count is stale or 30 s passed since the last publication, publish the idle values (running and
        waiting counts, gen throughput 0; the speculative gauges keep their last values)."""
        if self._v < (0, 5, 23) or not self._groups[group].gauges:
            return
        g = self._groups[group]
        stats = self.groups[group]
        stale = g.gauges.get("num_running_reqs") != stats.running
        if stale or now > g.published_at + 30:
            g.gauges.update(num_running_reqs=stats.running, num_queue_reqs=stats.queued, gen_throughput=0.0)
            g.published_at = now

    def request_finished(self, req: SimRequest, now: float) -> None:
        """TokenizerMetricsCollector.observe_one_finished_request (only requests with log_metrics)."""
        if not req.log_metrics:
            return
        labels = {"model_name": self.config.model}
        if self._v >= (0, 5, 23):  # tokenizer_metric_labels(); 0.5.10 and 0.4.10 label model_name only
            labels["engine_type"] = "unified"
        base = tuple(sorted(labels.items()))
        stream = base
        if self.has_is_streaming_label:
            stream = tuple(sorted({**labels, "is_streaming": "true" if req.streaming else "false"}.items()))
        self._inc("sglang:prompt_tokens_total", stream, req.prompt_tokens)
        self._inc("sglang:generation_tokens_total", stream, req.completion_tokens)
        if self.has_verify_calls_counter and req.spec_verify_ct > 0:
            self._inc("sglang:spec_verify_calls_total", base, req.spec_verify_ct)
        self._inc("sglang:num_requests_total", stream, 1)

    def _inc(self, name: str, labels: tuple[tuple[str, str], ...], value: float) -> None:
        key = (name, labels)
        self._counters[key] = self._counters.get(key, 0.0) + value

    def reset_counters(self) -> None:
        """The counter-reset fault: a new process's TokenizerMetricsCollector has no series until it counts
        (multiprocess mode writes a family once one of its series exists: sim/expo.py)."""
        self._counters.clear()

    # HTTP.

    def endpoints(self) -> list[EndpointInfo]:
        return [
            EndpointInfo("/health", "health_generate"),  # SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION defaults on
            EndpointInfo("/health_generate", "health_generate"),
            EndpointInfo("/v1/models", "models"),
            EndpointInfo("/get_model_info", "model_info"),
            EndpointInfo("/model_info", "model_info"),
            EndpointInfo("/get_server_info", "info"),
            EndpointInfo("/server_info", "info"),
            EndpointInfo("/metrics", "metrics"),
        ]

    def generation_paths(self) -> dict[str, str]:
        return {"/v1/chat/completions": "chat", "/v1/completions": "completions", "/generate": "generate"}

    def control_routes(self) -> list[tuple[str, str]]:
        # python/sglang/srt/entrypoints/http_server.py: @app.api_route("/flush_cache", methods=["GET", "POST"])
        return [("GET", "/flush_cache"), ("POST", "/flush_cache")]

    def control(self, method: str, path: str, params: dict[str, str], busy: bool) -> tuple[int, Any]:
        """``/flush_cache`` as SGLang 0.5.23 answers it (http_server.py ``flush_cache``; the scheduler's
        ``flush_cache`` in managers/scheduler.py logs and flushes only when idle)."""
        if path != "/flush_cache":
            return 404, None
        if busy:
            running = sum(g.running for g in self.groups)
            queued = sum(g.queued for g in self.groups)
            self.log(
                self._server_line(
                    "Cache not flushed because there are pending requests. "
                    f"#queue-req: {queued}, #running-req: {running}"
                )
            )
            return 400, "Flush cache failed.\n"
        for group in range(len(self._groups)):
            self.log(self._scheduler_line(group, "Cache flushed successfully!"))
        return 200, (
            "Cache flushed.\nPlease check backend logs for more details. "
            "(When there are running or waiting requests, the operation will not be performed.)\n"
        )

    def error_body(self, message: str, *, kind: str, code: int, param: str | None = None) -> dict[str, Any]:
        # protocol.py ErrorResponse: object "error", message, type, param, code at the top level.
        return {"object": "error", "message": message, "type": kind, "param": param, "code": code}

    def info_requested(self, path: str) -> None:
        if self._v >= (0, 5, 23) and path in ("/get_server_info", "/get_model_info"):
            new = "/server_info" if path == "/get_server_info" else "/model_info"
            self.log(
                f"[{_now()}] Endpoint '{path}' is deprecated and will be removed in a future version. "
                f"Please use '{new}' instead."
            )

    def info(self, port: int) -> dict[str, Any]:
        cfg = self.config
        states: list[dict[str, Any]] = []
        for g in self._groups:
            state: dict[str, Any] = {"last_gen_throughput": g.last_gen_throughput}
            if self.speculative and g.total_forward > 0:
                state["avg_spec_accept_length"] = g.total_tokens / g.total_forward
            states.append(state)
        body: dict[str, Any] = {
            "model_path": cfg.model,
            "served_model_name": cfg.model,
            "host": cfg.host,
            "port": port,
            "tp_size": cfg.tp_size,
            "dp_size": cfg.dp_size,
            "enable_dp_attention": cfg.dp_size > 1,
            "random_seed": cfg.seed,
            "decode_log_interval": cfg.decode_log_interval,
            "enable_metrics": True,
            "speculative_algorithm": _ALGORITHM[cfg.algorithm],
            "speculative_num_draft_tokens": self.num_draft_tokens or None,
        }
        if cfg.algorithm == "ddtree":
            body["speculative_ddtree_budget"] = cfg.budget
            body["speculative_ddtree_topk"] = cfg.topk
        body["internal_states"] = states
        body["version"] = self.version
        return body

    def model_info(self) -> dict[str, Any]:
        return {"model_path": self.config.model, "tokenizer_path": self.config.model, "is_generation": True}

    def models(self) -> dict[str, Any]:
        card = {
            "id": self.config.model,
            "object": "model",
            "created": int(self.started_wall),
            "owned_by": "sglang",
            "root": self.config.model,
            "parent": None,
            "max_model_len": self.config.profile.context_length,
        }
        return {"object": "list", "data": [card]}

    def metrics_text(self, *, bad_line: bool = False) -> str:
        v = self._v
        gauges: list[tuple[str, str]] = [
            ("num_running_reqs", "The number of running requests."),
            ("num_used_tokens", "The number of used tokens."),
            ("token_usage", "The token usage."),
            ("gen_throughput", "The generation throughput (token/s)."),
            ("num_queue_reqs", "The number of requests in the waiting queue."),
            ("cache_hit_rate", "The prefix cache hit rate."),
        ]
        if v >= (0, 5, 23):
            gauges.append(
                (
                    "spec_accept_length",
                    "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
                )
            )
            gauges.append(
                ("spec_accept_rate", "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).")
            )
        elif v >= (0, 5, 10):
            gauges.append(("spec_accept_length", "The average acceptance length of speculative decoding."))
            gauges.append(
                (
                    "spec_accept_rate",
                    "The average acceptance rate of speculative decoding (`accepted "
                    "tokens / total draft tokens` in batch).",
                )
            )
        else:
            gauges.append(("spec_accept_length", "The average acceptance length of speculative decoding."))
        families: list[Family] = []
        for short, doc in gauges:
            fam = Family(f"sglang:{short}", doc, "gauge")
            for g in self._groups:
                if short in g.gauges:
                    fam.add(g.labels, float(g.gauges[short]))
            families.append(fam)
        docs = {
            "sglang:prompt_tokens_total": "Number of prefill tokens processed.",
            "sglang:generation_tokens_total": "Number of generation tokens processed.",
            "sglang:spec_verify_calls_total": "Number of speculative decoding verification calls.",
            "sglang:num_requests_total": "Number of requests processed.",
        }
        for name, doc in docs.items():
            fam = Family(name, doc, "counter")
            for (cname, labels), value in self._counters.items():
                if cname == name:
                    fam.add(dict(labels), value)
            families.append(fam)
        text = render(families)
        if bad_line:
            text += f'sglang:spec_accept_length{{model_name="{self.config.model}" 3.5\n'
            text += "sglang:gen_throughput{model_name=} not-a-number\n"
        return text

    def bad_metric_lines(self, index: int) -> list[str]:
        return self.bad_lines(index, self._groups[0].prefix if self._groups else "")

    @staticmethod
    def bad_lines(index: int, prefix: str = "") -> list[str]:
        """Malformed variants a parser must skip and count without stopping (the bad-metrics fault)."""
        variants = (
            "Decode batch, #running-req: 1, #token: 1234, token usage: 0.01, accept len: nan%, accept rate: , "
            "cuda graph: True, gen throughput (token/s): --, #queue-req: 0",
            "Decode batch, #running-req: 3, #token: 12",
            None,
            "Decode batch, #running-req: , #token: -1, token usage: x, accept len: 3.5.2, #queue-req: ,",
        )
        line = variants[index % len(variants)]
        if line is None:
            return ["DDTREE metrics: bs=1 budget=7 avg_actual_nodes=8.00 avg_accepted_drafts=?? avg_commit_len="]
        return [f"[{_now()}{prefix}] {line}"]

    # Responses.

    def _spec_details(self, req: SimRequest) -> dict[str, Any] | None:
        """tokenizer_manager.py _calculate_spec_decoding_metrics: only when a verify step ran."""
        if not self.speculative or req.spec_verify_ct <= 0:
            return None
        proposed = req.spec_verify_ct * (self.num_draft_tokens - 1)
        if proposed <= 0:
            return None
        v = self._v
        out: dict[str, Any] = {}
        if v >= (0, 5, 10):
            out["spec_accept_rate"] = req.spec_accepted / proposed
            out["spec_accept_length"] = req.completion_tokens / req.spec_verify_ct
        if v >= (0, 5, 13):
            out["spec_num_correct_drafts"] = req.spec_accepted
            out["spec_num_proposed_drafts"] = proposed
        elif v >= (0, 5, 10):
            out["spec_accept_token_num"] = req.spec_accepted
            out["spec_draft_token_num"] = proposed
        out["spec_verify_ct"] = req.spec_verify_ct
        if v >= (0, 5, 13) and req.spec_hist:
            out["spec_correct_drafts_histogram"] = list(req.spec_hist)
        elif v >= (0, 5, 10) and req.spec_hist:
            out["spec_accept_histogram"] = list(req.spec_hist)
        return out

    def native_meta_info(self, req: SimRequest, *, final: bool, e2e_latency: float) -> dict[str, Any]:
        """``/generate``'s meta_info (tokenizer_manager.py): spec figures on the finished chunk."""
        meta: dict[str, Any] = {"id": req.rid}
        if final and req.finish_reason == "length":
            meta["finish_reason"] = {"type": "length", "length": req.completion_tokens}
        elif final:
            meta["finish_reason"] = {"type": req.finish_reason or "stop", "matched": None}
        else:
            meta["finish_reason"] = None
        meta.update(prompt_tokens=req.prompt_tokens, completion_tokens=req.completion_tokens, cached_tokens=0)
        if final:
            meta["e2e_latency"] = round(e2e_latency, 6)
            details = self._spec_details(req)
            if details:
                meta.update(details)
        elif self._v < (0, 5, 10) and self.speculative:
            meta["spec_verify_ct"] = req.spec_verify_ct
        return meta

    def _sglext(self, req: SimRequest, options: dict[str, Any]) -> dict[str, Any] | None:
        if not (self.has_sglext and options.get("return_spec_tokens_details")):
            return None
        details = self._spec_details(req)
        if details is None:
            return None
        # protocol.py SpecTokensDetails: every field, defaults for the ones not set.
        full = {
            "spec_accept_rate": details.get("spec_accept_rate", 0.0),
            "spec_accept_length": details.get("spec_accept_length", 0.0),
            "spec_cap_length": 0.0,
            "spec_block_accept_length": 0.0,
            "spec_num_correct_drafts": details.get("spec_num_correct_drafts", 0),
            "spec_num_proposed_drafts": details.get("spec_num_proposed_drafts", 0),
            "spec_verify_ct": details.get("spec_verify_ct", 0),
            "spec_correct_drafts_histogram": details.get("spec_correct_drafts_histogram", []),
            "spec_cap_lens_histogram": [],
        }
        return {"spec_tokens_details": full}

    @staticmethod
    def _usage(req: SimRequest) -> dict[str, Any]:
        return {
            "prompt_tokens": req.prompt_tokens,
            "total_tokens": req.prompt_tokens + req.completion_tokens,
            "completion_tokens": req.completion_tokens,
            "prompt_tokens_details": None,
            "reasoning_tokens": 0,
            "completion_tokens_details": None,
        }

    def openai_response(
        self, req: SimRequest, *, chat: bool, model: str, created: int, options: dict[str, Any]
    ) -> dict[str, Any]:
        reason = req.finish_reason or "stop"
        if chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": req.full_text, "reasoning_content": None},
                "logprobs": None,
                "finish_reason": reason,
                "matched_stop": None,
            }
            body: dict[str, Any] = {"id": req.rid, "object": "chat.completion", "created": created, "model": model}
            body.update(choices=[choice], usage=self._usage(req), metadata=None)
        else:
            choice = {
                "index": 0,
                "text": req.full_text,
                "logprobs": None,
                "finish_reason": reason,
                "matched_stop": None,
            }
            body = {"id": req.rid, "object": "text_completion", "created": created, "model": model}
            body.update(choices=[choice], usage=self._usage(req), metadata=None)
        ext = self._sglext(req, options)
        if ext is not None:
            body["sglext"] = ext
        return body

    def stream_format(self, req: SimRequest, *, chat: bool, model: str, created: int) -> StreamFormat:
        env = f'"id":"{req.rid}","object":"{"chat.completion.chunk" if chat else "text_completion"}",'
        env += f'"created":{created},"model":{compact(model)}'
        head = "data: {" + env + ',"choices":[{"index":0,'
        if chat:
            # sse_utils.py build_sse_content (msgspec): delta's reasoning_content always, role/content if set.
            return StreamFormat(
                head=head + '"delta":{"reasoning_content":null,"content":"',
                tail='"},"logprobs":null,"finish_reason":null,"matched_stop":null}]}\n\n',
                first=head + '"delta":{"reasoning_content":null,"role":"assistant","content":""},"logprobs":null,'
                '"finish_reason":null,"matched_stop":null}]}\n\n',
                envelope={"env": env, "chat": True},
            )
        return StreamFormat(
            head=head + '"text":"',
            tail='","logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}\n\n',
            envelope={"env": env, "chat": False},
        )

    def stream_tail(self, req: SimRequest, fmt: StreamFormat, *, reason: str, options: dict[str, Any]) -> list[str]:
        env = fmt.envelope["env"]
        out: list[str] = []
        if fmt.envelope["chat"]:
            out.append(
                "data: {" + env + ',"choices":[{"index":0,"delta":{"reasoning_content":null},"logprobs":null,'
                f'"finish_reason":"{reason}","matched_stop":null}}]}}\n\n'
            )
        else:
            out.append(
                "data: {" + env + ',"choices":[{"index":0,"text":"","logprobs":null,'
                f'"finish_reason":"{reason}","matched_stop":null}}],"usage":null}}\n\n'
            )
        ext = self._sglext(req, options)
        if ext is not None:  # serving_chat.py: a chunk with no choices carrying sglext, after the finish chunk
            out.append("data: {" + env + ',"choices":[],"usage":null,"sglext":' + compact(ext) + "}\n\n")
        if options.get("include_usage"):
            out.append("data: {" + env + ',"choices":[],"usage":' + compact(self._usage(req)) + "}\n\n")
        return out


def _mmss(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


def decode_batch(
    *,
    running: int,
    tokens: int,
    usage: float,
    accept_len: float | None,
    accept_rate: float | None,
    throughput: float,
    queue: int,
    prefix: str = "",
) -> str:
    """SGLang 0.5.23's ``Decode batch`` line (sglang/srt/managers/scheduler_components/metrics_reporter.py
    ``report_decode_stats``), for callers outside the simulator: the accept fields only when speculating;
    ``prefix`` like ``" TP0"``."""
    spec = ""
    if accept_len is not None:
        spec = f"accept len: {accept_len:.2f}, accept rate: {accept_rate or 0.0:.2f}, "
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"[{stamp}{prefix}] Decode batch, #running-req: {running}, #token: {tokens}, token usage: {usage:.2f}, "
        f"{spec}cuda graph: True, gen throughput (token/s): {throughput:.2f}, #queue-req: {queue}"
    )


def bad_metric_lines(index: int) -> list[str]:
    """The SGLang dialect's ``bad-metrics`` fault lines for interval ``index`` (malformed on purpose)."""
    return SGLangDialect.bad_lines(index)
