"""SGLang's own metrics code, run on known numbers: the oracle of tests/contract/test_sglang_contract.py.

Run as a script in a subprocess, never imported by the test process::

    python sglang_oracle.py SOURCES SCENARIO.json

``SOURCES`` holds the Python files of a pinned sglang wheel (tests/contract/wheels.py). The script imports
the real modules that build SGLang's figures and formats:

- ``sglang/srt/managers/scheduler_components/metrics_reporter.py`` (``SchedulerMetricsReporter``:
  ``update_spec_metrics``, ``report_decode_stats``, which computes accept len / accept rate / gen throughput,
  prints the ``Decode batch`` line and sets the scheduler gauges),
- ``sglang/srt/observability/metrics_collector.py`` (``SchedulerMetricsCollector.init_new``: which ranks log
  and export, with which labels; ``TokenizerMetricsCollector.observe_one_finished_request``: the
  ``generation_tokens`` and ``spec_verify_calls`` counters),
- the logger prefix ``[time DP.. PP.. ATTN_CP.. MOE_DP.. TP.. EP..]``: ``configure_scheduler_process``
  (managers/scheduler.py) and ``configure_logger`` (utils/common.py), whose definitions are taken out of those
  files and executed (the files' own imports need torch and a GPU build),
- the rank layout (``derive_attn_tp_size``, ``derive_attention_ranks``, ``derive_spawn_ranks`` from
  runtime_context.py, taken out the same way),

and renders ``/metrics`` the way SGLang's HTTP server does (utils/common.py ``add_prometheus_middleware``:
``multiprocess.MultiProcessCollector`` over ``PROMETHEUS_MULTIPROC_DIR``, one process per scheduler rank).

Stubbed (they need torch, a GPU or the whole server): every other ``sglang.*`` module (a permissive stand-in
whose attributes are inert), the server-wide configuration accessors of runtime_context.py (answered from the
scenario), the scheduler and batch objects the reporter reads (fakes with the scenario's values), and the
clock (``time.perf_counter`` in metrics_reporter), so that intervals are exact. What the stubs feed in is the
scenario's input; every figure and every line of output is computed and formatted by SGLang's code.

What one decode step feeds the reporter is what ``BatchResultProcessor.process_batch_result_decode``
(managers/scheduler_components/batch_result_processor.py) does: ``num_generated_tokens =
result.get_num_generated_tokens(bs)`` (managers/utils.py: ``num_correct_drafts + bs * num_non_draft_tokens_per_req``,
one bonus token per request), ``update_spec_metrics(bs, num_correct_drafts, num_accept_tokens=...)``,
``forward_ct_decode += 1``, ``report_decode_stats(...)``.

Output: one JSON object on stdout: ``{"lines": [{"rank": i, "line": "..."}...], "metrics": "<exposition>",
"ranks": [{"labels": {...}, "logs": bool, "exports": bool}...], "meta_info": [...]}``.
"""

from __future__ import annotations
import __future__

import ast
import importlib.abc
import importlib.machinery
import json
import logging
import logging.config  # utils/common.py configure_logger: dictConfig of SGLANG_LOGGING_CONFIG_PATH
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

# --------------------------------------------------------------------------------------------- stand-ins


class Anything:
    """An inert stand-in: every attribute, call and item is another stand-in; false, empty, iterable."""

    def __init__(self, name: str = "stub") -> None:
        object.__setattr__(self, "_name", name)

    def __getattr__(self, name: str) -> Anything:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Anything(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Anything:
        return Anything(f"{self._name}()")

    def __getitem__(self, key: Any) -> Anything:
        return Anything(f"{self._name}[]")

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __len__(self) -> int:
        return 0

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)

    def __or__(self, other: Any) -> Anything:
        return self

    __ror__ = __or__

    def __repr__(self) -> str:
        return f"<stub {self._name}>"


class StubModule(types.ModuleType):
    real: frozenset[str] = frozenset()  # modules that must be imported, not stood in for

    def __getattr__(self, name: str) -> Any:
        full = f"{self.__name__}.{name}"
        if (name.startswith("__") and name.endswith("__")) or any(
            r == full or r.startswith(full + ".") for r in self.real
        ):
            raise AttributeError(name)  # so that `from package import module` imports the real module
        return Anything(full)


class _StubLoader(importlib.abc.Loader):
    def __init__(self, package_dir: str | None) -> None:
        self.package_dir = package_dir

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = StubModule(spec.name)
        if self.package_dir is not None:
            module.__path__ = [self.package_dir] if self.package_dir else []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class StubFinder(importlib.abc.MetaPathFinder):
    """``sglang.*`` modules: the ones in ``real`` load from SOURCES; their parent packages become stub
    modules with a real ``__path__`` (their ``__init__.py`` does not run); every other one is a stub."""

    def __init__(self, root: Path, real: set[str], third_party: set[str]) -> None:
        self.root, self.real, self.third_party = root, real, third_party

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        top = name.split(".")[0]
        if top in self.third_party:
            spec = importlib.machinery.ModuleSpec(name, _StubLoader(""), is_package=True)
            spec.submodule_search_locations = []
            return spec
        if top != "sglang" or name in self.real:
            return None
        # Every stand-in is a package, so that stand-ins can have submodules; a parent of real modules keeps
        # its real folder as its path.
        folder = self.root / Path(*name.split("."))
        where = str(folder) if folder.is_dir() else ""
        spec = importlib.machinery.ModuleSpec(name, _StubLoader(where), is_package=True)
        spec.submodule_search_locations = [where] if where else []
        return spec


def definitions(path: Path, names: set[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """Execute only the top-level definitions ``names`` of ``path`` (SGLang's own text) in ``namespace``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    kinds = (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)
    wanted = [node for node in tree.body if isinstance(node, kinds) and node.name in names]
    for dotted in (n for n in names if "." in n):  # "Class.method": the method, defined as a plain function
        owner, method = dotted.split(".", 1)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == owner:
                for item in node.body:
                    if isinstance(item, kinds) and item.name == method:
                        item.decorator_list = []
                        wanted.append(item)
                        names = (names - {dotted}) | {method}
    missing = names - {n.name for n in wanted}
    if missing:
        raise SystemExit(f"{path}: no top-level definition of {sorted(missing)}")
    code = compile(
        ast.Module(body=wanted, type_ignores=[]),
        str(path),
        "exec",
        flags=__future__.annotations.compiler_flag,
        dont_inherit=True,
    )
    exec(code, namespace)
    return namespace


# ----------------------------------------------------------------------------- the server-wide settings


class Settings(types.SimpleNamespace):
    """A configuration bag (runtime_context.py get_observability() etc.): unknown fields read as None."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


STATE: dict[str, Any] = {}


def field_defaults(srt: Path) -> dict[str, dict[str, Any]]:
    """The literal defaults of SGLang's configuration fields, per bag (``arg_groups/fields/<bag>.py``: class
    attributes ``name: A[type, "help"] = default``), so that the stand-in bags hold the real defaults."""
    bags: dict[str, dict[str, Any]] = {}
    folder = srt / "arg_groups" / "fields"
    for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
        found: dict[str, Any] = {}
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                try:
                    found[node.target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
        bags[path.stem.rstrip("_")] = found
    return bags


DEFAULTS: dict[str, dict[str, Any]] = {}


def bag(name: str, **values: Any) -> Settings:
    """A configuration bag: the scenario's values over SGLang's defaults for that bag."""
    return Settings(**{**DEFAULTS.get(name, {}), **values})


class FakeClock:
    """``time`` as metrics_reporter.py sees it: perf_counter is the scenario's clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def monotonic_ns(self) -> int:
        return int(self.now * 1e9)

    def perf_counter_ns(self) -> int:
        return int(self.now * 1e9)

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        import time

        return getattr(time, name)


def install(root: Path) -> dict[str, Any]:
    """Make SGLang's modules importable with stubs; return the helpers taken out of its files.

    Two layouts: ``managers/scheduler_components/metrics_reporter.py`` (sglang 0.5.13+, run with its
    collectors) and, before it, ``observability/scheduler_metrics_mixin.py`` (0.5.10-0.5.12: the Decode line
    only, ``legacy``)."""
    sys.path.insert(0, str(root))
    srt = root / "sglang" / "srt"
    legacy = not (srt / "managers" / "scheduler_components" / "metrics_reporter.py").exists()
    real = {"sglang.srt.environ"}
    if legacy:
        real |= {"sglang.srt.observability.scheduler_metrics_mixin"}
    else:
        real |= {
            "sglang.srt.observability.metrics_collector",
            "sglang.srt.observability.utils",
            "sglang.srt.observability.scheduler_stage_metrics",
            "sglang.srt.utils.gauge_histogram",
            "sglang.srt.managers.scheduler_components.metrics_reporter",
            "sglang.srt.managers.scheduler_components.pool_stats_observer",
        }
    third_party = {"torch", "triton", "setproctitle", "psutil", "zmq", "transformers"}
    StubModule.real = frozenset(real)
    sys.meta_path.insert(0, StubFinder(root, real, third_party))
    DEFAULTS.update(field_defaults(srt))

    # runtime_context.py (0.5.13+): the configuration accessors answer from the scenario; the rank layout is
    # SGLang's. Before it, the placement below uses the same formulas as 0.5.10's
    # entrypoints/engine.py _compute_parallelism_ranks and layers/dp_attention.py.
    import sglang.srt.runtime_context as rc  # a stub module

    layout: dict[str, Any] = {}
    if (srt / "runtime_context.py").exists():
        layout = definitions(
            srt / "runtime_context.py",
            {"derive_attn_tp_size", "derive_attention_ranks", "derive_spawn_ranks"},
            {"Any": Any},
        )
    for name in ("get_observability", "get_parallel", "get_disagg", "get_serving", "get_schedule", "get_spec"):
        setattr(rc, name, (lambda key: lambda: STATE[key])(name[4:]))
    rc.get_context = lambda: types.SimpleNamespace(is_config_namespace_published=lambda name: False)
    rc.exports_expert_balancedness_to_prometheus = lambda: False
    rc.logs_expert_balancedness_to_server_log = lambda: False

    # disaggregation/utils.py imports torch; its DisaggregationMode enum is SGLang's own text.
    import enum

    import sglang.srt.disaggregation.utils as disagg_utils  # a stub module

    disagg_utils.DisaggregationMode = definitions(
        srt / "disaggregation" / "utils.py", {"DisaggregationMode"}, {"Enum": enum.Enum}
    )["DisaggregationMode"]

    # The logger prefix: scheduler.py configure_scheduler_process (configure_scheduler before 0.5.13) and
    # utils/common.py configure_logger.
    from sglang.srt.environ import envs

    common = definitions(
        srt / "utils" / "common.py",
        {"configure_logger"},
        {
            "os": os,
            "logging": logging,
            "envs": envs,
            "configure_hf_hub_logger": lambda: None,
            # SGLANG_LOGGING_CONFIG_PATH's file is read with orjson.loads: the same JSON document as json.loads.
            "orjson": types.SimpleNamespace(loads=json.loads),
            "parent_process": lambda: None,
            "is_flashinfer_available": lambda: False,
        },
    )
    configure = "configure_scheduler" if legacy else "configure_scheduler_process"
    scheduler = definitions(
        srt / "managers" / "scheduler.py",
        {configure},
        {
            "get_parallel": lambda: STATE["parallel"],
            "kill_itself_when_parent_died": lambda: None,
            "setproctitle": Anything("setproctitle"),
            "faulthandler": Anything("faulthandler"),
            "configure_logger": common["configure_logger"],
            "suppress_other_loggers": lambda: None,
            "envs": envs,
            "set_gpu_proc_affinity": lambda *a, **k: None,
            "get_numa_node_if_available": lambda *a, **k: None,
            "numa_bind_to_node": lambda *a, **k: None,
            "logger": logging.getLogger("sglang.srt.managers.scheduler"),
            "Optional": Any,
            "os": os,
        },
    )
    return {"layout": layout, "legacy": legacy, "configure": scheduler[configure]}


# ------------------------------------------------------------------------------------------- a scheduler


def parallel_for(spec: dict[str, Any], layout: dict[str, Any]) -> Settings:
    """The runtime parallel bag of one scheduler rank, placed by SGLang's own rank-layout functions."""
    tp_size, tp_rank = spec.get("tp_size", 1), spec.get("tp_rank", 0)
    dp_size = spec.get("dp_size", 1)
    attn_dp_size = dp_size if spec.get("enable_dp_attention") else 1
    attn_cp_size, moe_dp_size, ep_size = spec.get("attn_cp_size", 1), spec.get("moe_dp_size", 1), spec.get("ep_size", 1)
    pp_size, pp_rank = spec.get("pp_size", 1), spec.get("pp_rank", 0)
    attn_tp_size = layout["derive_attn_tp_size"](tp_size=tp_size, attn_cp_size=attn_cp_size, attn_dp_size=attn_dp_size)
    placement = layout["derive_spawn_ranks"](
        world_rank=tp_size * pp_rank + tp_rank,
        tp_size=tp_size,
        ep_join_rank_offset=0,
        attn_cp_size=attn_cp_size,
        attn_tp_size=attn_tp_size,
        moe_dp_size=moe_dp_size,
        moe_ep_size=ep_size,
    )
    if moe_dp_size < attn_cp_size:  # runtime_context.py publish(): MoE-DP aliases the attention-CP group
        placement["moe_dp_rank"] = placement["attn_cp_rank"]
    attn_tp_rank, attn_dp_rank = layout["derive_attention_ranks"](
        tp_rank=tp_rank, attn_tp_size=attn_tp_size, attn_cp_size=attn_cp_size
    )
    dp_rank = spec.get("dp_rank")
    if dp_rank is None and attn_dp_size > 1:
        dp_rank = attn_dp_rank
    return Settings(
        tp_size=tp_size,
        pp_size=pp_size,
        dp_size=dp_size,
        dp_rank=dp_rank,
        attn_dp_enabled=attn_dp_size > 1,
        attn_dp_size=attn_dp_size,
        attn_dp_rank=attn_dp_rank,
        attn_tp_size=attn_tp_size,
        attn_tp_rank=attn_tp_rank,
        attn_cp_size=attn_cp_size,
        moe_dp_size=moe_dp_size,
        ep_size=ep_size,
        moe_ep_size=ep_size,
        **placement,
    )


def settings(scenario: dict[str, Any], parallel: Settings) -> None:
    STATE.update(
        parallel=parallel,
        observability=bag(
            "observability",
            enable_metrics=True,
            decode_log_interval=scenario.get(
                "decode_log_interval", DEFAULTS.get("observability", {}).get("decode_log_interval", 40)
            ),
            enable_metrics_for_all_schedulers=scenario.get("enable_metrics_for_all_schedulers", False),
        ),
        disagg=bag("disagg", disaggregation_mode="null"),
        serving=bag("serving", served_model_name=scenario.get("model_name", "m")),
        schedule=bag("schedule", enable_priority_scheduling=False),
        spec=bag(
            "spec",
            speculative_algorithm=scenario.get("algorithm", "EAGLE"),
            speculative_num_draft_tokens=scenario["num_draft_tokens"],
            speculative_num_steps=scenario.get("num_steps", scenario["num_draft_tokens"] - 1),
        ),
    )


class FakeReq:
    routing_key = None
    seqlen = 100


def run_rank(scenario: dict[str, Any], rank: dict[str, Any], helpers: dict[str, Any], out: Path) -> None:
    """One scheduler process: its logger prefix, its collector (labels, gating) and its decode steps."""
    parallel = parallel_for(rank["parallel"], helpers["layout"])
    settings(scenario, parallel)
    helpers["configure"](Settings(log_level="info"), gpu_id=0)
    lines = capture_log()

    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.managers.scheduler_components import metrics_reporter as mr
    from sglang.srt.managers.scheduler_components.pool_stats_observer import PoolStats
    from sglang.srt.observability.metrics_collector import SchedulerMetricsCollector

    clock = FakeClock()
    mr.time = clock  # type: ignore[assignment]
    context = SchedulerMetricsCollector.init_new(
        server_args=Settings(),
        enable_priority_scheduling=False,
        enable_lora=False,
        enable_hierarchical_cache=False,
    )
    pool = PoolStats(
        full_num_used=rank.get("tokens", 1234), full_token_usage=0.05, full_available_size=1, full_evictable_size=0
    )
    waiting: list[Any] = []
    algorithm = types.SimpleNamespace(is_none=lambda: False, is_dspark=lambda: False)
    scheduler = Settings(
        spec_algorithm=algorithm,
        # A scenario with "draft_worker": the worker's own speculative_num_draft_tokens, which
        # _active_spec_config_snapshot exports as sglang:spec_num_draft_tokens (as NGRAMWorker has it); else 0.
        draft_worker=(
            types.SimpleNamespace(
                speculative_num_steps=scenario["num_draft_tokens"] - 1,
                speculative_num_draft_tokens=scenario["num_draft_tokens"],
            )
            if scenario.get("draft_worker")
            else None
        ),
        waiting_queue=waiting,
        disaggregation_mode=DisaggregationMode.NULL,
        enable_priority_scheduling=False,
        enable_lora=False,
        enable_hierarchical_cache=False,
        grammar_manager=[],
        pool_stats_observer=types.SimpleNamespace(
            get_pool_stats=lambda: pool, streaming_session_count=lambda: 0, session_held_tokens=lambda: 0
        ),
        kv_events_publisher=Anything("kv_events_publisher"),
        forward_ct=0,
        device="cuda",
        running_batch=None,
        enable_fpm=False,
    )
    reporter = mr.SchedulerMetricsReporter(
        scheduler=scheduler, metrics_collector_context=context, metrics_collector=context.collector
    )
    clock.now += rank.get("idle_before", 0.0)
    for step in rank["steps"]:
        bs, correct = step["bs"], step["correct_drafts"]
        clock.now += step["dt"]
        if "num_draft_tokens" in step and scheduler.draft_worker is not None:
            # --speculative-adaptive: speculative/adaptive_runtime_state.py activate_step_by_batch switches the
            # draft worker's step count (and draft tokens) before a batch's draft round.
            scheduler.draft_worker.speculative_num_draft_tokens = step["num_draft_tokens"]
            scheduler.draft_worker.speculative_num_steps = step["num_draft_tokens"] - 1
        batch = Settings(reqs=[FakeReq() for _ in range(bs)], forward_iter=None, seq_lens_cpu=None)
        scheduler.forward_ct += 1
        # batch_result_processor.py process_batch_result_decode: get_num_generated_tokens(bs) is
        # num_correct_drafts + bs * num_non_draft_tokens_per_req (managers/utils.py), one bonus per request.
        generated = correct + bs * 1
        reporter.num_generated_tokens += generated
        reporter.update_spec_metrics(bs, correct, num_accept_tokens=generated)
        reporter.forward_ct_decode = (reporter.forward_ct_decode + 1) % (1 << 30)
        reporter.report_decode_stats(True, running_batch=batch, num_generated_tokens=generated)
        clock.now += step.get("idle_after", 0.0)
    collector = context.collector
    result = {
        "lines": lines,
        "logs": context.is_stats_logging_rank,
        "exports": context.current_scheduler_metrics_enabled,
        "labels": {k: str(v) for k, v in (collector.labels if collector is not None else {}).items()},
    }
    out.write_text(json.dumps(result))


def capture_log() -> list[str]:
    """Keep what the root logger prints, in the format SGLang's configure_logger gave it."""
    formatter = logging.getLogger().handlers[0].formatter
    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    capture = Capture()
    capture.setFormatter(formatter)
    logging.getLogger().handlers = [capture]
    return lines


def run_legacy_rank(scenario: dict[str, Any], rank: dict[str, Any], helpers: dict[str, Any], out: Path) -> None:
    """sglang 0.5.10-0.5.12: ``SchedulerMetricsMixin.report_decode_stats`` (observability/
    scheduler_metrics_mixin.py) on a stand-in Scheduler, one rank without parallelism, the Decode line only.
    What a decode step feeds it is managers/scheduler_output_processor_mixin.py process_batch_result_decode:
    ``num_generated_tokens += len(batch.reqs)`` (the bonus tokens), ``update_spec_metrics(bs,
    num_accepted_tokens)``, ``forward_ct_decode += 1``, ``report_decode_stats(..., num_accepted_tokens=...)``."""
    settings(scenario, Settings())
    k = scenario["num_draft_tokens"]
    server_args = Settings(
        log_level="info",
        tp_size=1,
        pp_size=1,
        attn_cp_size=1,
        moe_dp_size=1,
        ep_size=1,
        decode_log_interval=scenario.get("decode_log_interval", 40),
        speculative_num_draft_tokens=k,
        speculative_num_steps=scenario.get("num_steps", k - 1),
        language_only=False,
    )
    helpers["configure"](server_args, 0, 0, 0, 0, 0, None)
    lines = capture_log()
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.observability import scheduler_metrics_mixin as mm

    clock = FakeClock()
    mm.time = clock  # type: ignore[assignment]
    mixin = mm.SchedulerMetricsMixin
    scheduler = Settings(
        server_args=server_args,
        forward_ct_decode=0,
        forward_ct=0,
        is_stats_logging_rank=True,
        current_scheduler_metrics_enabled=False,
        enable_metrics=False,
        enable_mfu_metrics=False,
        last_decode_stats_tic=clock.now,
        num_generated_tokens=0,
        is_hybrid_swa=False,
        is_hybrid_ssm=False,
        _get_token_info=lambda: (rank.get("tokens", 1234), 0.05, 0, 0),
        spec_algorithm=types.SimpleNamespace(is_none=lambda: False),
        spec_num_accepted_tokens=0,
        spec_num_forward_ct=0,
        spec_total_num_accepted_tokens=0,
        spec_total_num_forward_ct=0,
        disaggregation_mode=DisaggregationMode.NULL,
        device="cuda",
        waiting_queue=[],
        _publish_kv_events=lambda: None,  # KV-cache events for routers: not part of the line
    )
    clock.now += rank.get("idle_before", 0.0)
    for step in rank["steps"]:
        bs, correct = step["bs"], step["correct_drafts"]
        clock.now += step["dt"]
        if "num_draft_tokens" in step and scheduler.draft_worker is not None:
            # --speculative-adaptive: speculative/adaptive_runtime_state.py activate_step_by_batch switches the
            # draft worker's step count (and draft tokens) before a batch's draft round.
            scheduler.draft_worker.speculative_num_draft_tokens = step["num_draft_tokens"]
            scheduler.draft_worker.speculative_num_steps = step["num_draft_tokens"] - 1
        batch = Settings(reqs=[FakeReq() for _ in range(bs)], batch_size=lambda bs=bs: bs)
        scheduler.forward_ct += 1
        scheduler.num_generated_tokens += bs
        mixin.update_spec_metrics(scheduler, bs, correct)
        scheduler.forward_ct_decode = (scheduler.forward_ct_decode + 1) % (1 << 30)
        mixin.report_decode_stats(scheduler, True, running_batch=batch, num_accepted_tokens=correct)
    out.write_text(json.dumps({"lines": lines, "logs": True, "exports": False, "labels": {}}))


def run_tokenizer(scenario: dict[str, Any], out: Path) -> None:
    """The tokenizer process: TokenizerMetricsCollector counters for the scenario's finished requests, and
    the per-request meta_info of tokenizer_manager.py _calculate_spec_decoding_metrics."""
    settings(scenario, Settings())
    from sglang.srt.observability.metrics_collector import TokenizerMetricsCollector, tokenizer_metric_labels

    labels = tokenizer_metric_labels()
    collector = TokenizerMetricsCollector(server_args=Settings(), labels=labels)
    for request in scenario.get("requests", []):
        collector.observe_one_finished_request(
            dict(labels),
            request.get("prompt_tokens", 10),
            request["completion_tokens"],
            0,
            1.0,
            False,
            None,
            spec_verify_ct=request["spec_verify_ct"],
            is_streaming=request.get("stream", False),
        )
    out.write_text(json.dumps({"labels": labels}))


def meta_infos(root: Path, scenario: dict[str, Any]) -> list[dict[str, Any]]:
    """tokenizer_manager.py ``TokenizerManager._calculate_spec_decoding_metrics`` (SGLang's own text) on the
    scenario's requests: the spec fields of a finished ``/generate`` response's meta_info."""
    namespace = definitions(
        root / "sglang" / "srt" / "managers" / "tokenizer_manager.py",
        {"TokenizerManager._calculate_spec_decoding_metrics"},
        {"get_spec": lambda: STATE["spec"], "_ragged_verify_cap_accept": lambda: False, "Any": Any},
    )
    method = namespace["_calculate_spec_decoding_metrics"]
    settings(scenario, Settings())
    infos = []
    for request in scenario.get("requests", []):
        recv = types.SimpleNamespace(
            spec_verify_ct=[request["spec_verify_ct"]],
            spec_num_correct_drafts=[request["correct_drafts"]],
            completion_tokens=[request["completion_tokens"]],
            spec_correct_drafts_histogram=[request.get("histogram", [])],
        )
        meta: dict[str, Any] = {}
        method(None, meta, recv, 0)
        infos.append(meta)
    return infos


# ---------------------------------------------------------------------------------------------- main


def main() -> None:
    root, scenario = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    work = Path(tempfile.mkdtemp(prefix="sglang-oracle-"))
    if scenario.get("logging_config"):  # a user's dictConfig: configure_logger applies it instead of its format
        config_path = work / "logging.json"
        config_path.write_text(json.dumps(scenario["logging_config"]))
        os.environ["SGLANG_LOGGING_CONFIG_PATH"] = str(config_path)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(work / "prom")  # before prometheus_client is imported
    (work / "prom").mkdir()
    helpers = install(root)
    outputs: list[Path] = []
    jobs = [("rank", i, rank) for i, rank in enumerate(scenario.get("ranks", []))]
    with_requests = bool(scenario.get("requests")) and not helpers["legacy"]  # requests: 0.5.13+ only
    if with_requests:
        jobs.append(("tokenizer", len(jobs), None))
    for kind, index, rank in jobs:  # one process per scheduler rank, as the server runs them
        out = work / f"out-{index}.json"
        pid = os.fork()
        if pid == 0:
            try:
                if kind == "rank" and helpers["legacy"]:
                    run_legacy_rank(scenario, rank, helpers, out)  # type: ignore[arg-type]
                elif kind == "rank":
                    run_rank(scenario, rank, helpers, out)  # type: ignore[arg-type]
                else:
                    run_tokenizer(scenario, out)
            except BaseException:
                import traceback

                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise SystemExit(f"oracle child {kind} {index} failed")
        outputs.append(out)
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess

    registry = CollectorRegistry()  # utils/common.py add_prometheus_middleware
    multiprocess.MultiProcessCollector(registry)
    results = [json.loads(p.read_text()) for p in outputs]
    report = {
        "ranks": [r for r, (kind, _, _) in zip(results, jobs, strict=True) if kind == "rank"],
        "tokenizer": [r for r, (kind, _, _) in zip(results, jobs, strict=True) if kind == "tokenizer"],
        "metrics": generate_latest(registry).decode(),
        "meta_info": meta_infos(root, scenario) if with_requests else [],
    }
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
