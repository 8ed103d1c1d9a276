"""Run vLLM's own speculative-decoding metrics code on known counts; print what it logged and exported.

Run as a script in a subprocess, with the unpacked Python files of a vLLM wheel (``tests/contract/wheels.py``) as
the first argument, the scenario as JSON on stdin, the result as JSON on stdout::

    {"k": 3, "engines": [0], "model": "m", "events": [
        {"op": "step", "engine": 0, "drafts": [[3, 2], [3, 0]]},   # one scheduler step: (drafted, accepted) per request
        {"op": "advance", "s": 10.0},                                 # the clock moves on
        {"op": "log"},                                                # LoggingStatLogger.log(): one interval ends
        {"op": "scrape", "name": "before"},                           # GET /metrics now
        {"op": "start"}]}                                             # the API server's start-up banner

The code run is vLLM's, unchanged: ``SpecDecodingStats.new/observe_draft``, ``SpecDecodingLogging.observe/log``
and ``SpecDecodingProm.observe`` from ``vllm/v1/spec_decode/metrics.py`` (0.8.3/0.8.4:
``SpecDecodingStats.observe`` and ``SpecDecodingMetrics.observe/log``, no Prometheus class), logging through
vLLM's own logger (``vllm/logger.py``: its handler, format and date format), exposition by
``prometheus_client.generate_latest``.
Stubbed, because importing them needs torch, transformers and the rest of a GPU install while the metrics code
uses nothing of them: ``vllm.config`` (only ``SpeculativeConfig.num_speculative_tokens`` is read),
``vllm.env_override`` (environment tweaks for torch), and the ``vllm`` package ``__init__`` (the package is
set up by path, so its submodules load from the wheel's files; releases up to 0.8.x import the whole engine
there; its ``EngineArgs`` is a bare class: ``vllm/entrypoints/common/startup.py`` imports it for the non-default
arguments, which ``log_version_and_model`` never reads). ``start`` runs that function as
``entrypoints/launchers/launcher.py`` ``setup_server`` calls it (0.33.0), so the banner a process prints once per
start is vLLM's own. ``time.monotonic`` of the metrics module is a
controlled clock, so the throughput fields are deterministic.

What vLLM does around these classes is imitated as ``vllm/v1/metrics/loggers.py`` does it: one
``SpecDecodingLogging`` per engine (``LoggingStatLogger``, one per engine under DP), one ``SpecDecodingProm``
for all engines with labels ``model_name`` and ``engine`` (``PrometheusStatLogger``), and the
``vllm:generation_tokens`` counter declared with the same name, help text and labels as there, increased by
the tokens each step emitted (accepted + 1 per request). ``loggers.py`` itself cannot be imported without torch and
the engine, so its ``Engine NNN:`` line is printed here from its format parts (copied, ``ENGINE_PARTS``) before
each engine's spec line, as ``LoggingStatLogger.log`` orders them; ``"engine_lines": false`` leaves it out.
"""

from __future__ import annotations

import inspect
import io
import json
import logging
import os
import re
import sys
import types
from pathlib import Path


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now


# vllm/v1/metrics/loggers.py (0.33.0) LoggingStatLogger.log: the parts always present, joined with ", ".
ENGINE_PARTS = (
    "Avg prompt throughput: %.1f tokens/s",
    "Avg generation throughput: %.1f tokens/s",
    "Running: %d reqs",
    "Waiting: %d reqs",
    "%s KV cache usage: %.1f%%",
)


def _stub_modules(root: Path) -> None:
    package = types.ModuleType("vllm")
    package.__path__ = [str(root / "vllm")]  # type: ignore[attr-defined]
    sys.modules["vllm"] = package
    config = types.ModuleType("vllm.config")

    class SpeculativeConfig:  # the one attribute SpecDecodingProm reads
        def __init__(self, num_speculative_tokens: int) -> None:
            self.num_speculative_tokens = num_speculative_tokens

    config.SpeculativeConfig = SpeculativeConfig  # type: ignore[attr-defined]
    sys.modules["vllm.config"] = config
    sys.modules["vllm.env_override"] = types.ModuleType("vllm.env_override")
    package.EngineArgs = type("EngineArgs", (), {})  # type: ignore[attr-defined]  # see the module docstring


def _version(root: Path) -> str | None:
    for name in ("_version.py", "version.py"):
        path = root / "vllm" / name
        if path.exists():
            match = re.search(r"^__version__\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]", path.read_text(), re.M)
            if match:
                return match.group(1)
    return None


def main() -> int:
    root = Path(sys.argv[1])
    scenario = json.load(sys.stdin)
    _stub_modules(root)
    import prometheus_client
    import vllm.logger as vllm_logger
    import vllm.v1.spec_decode.metrics as spec_metrics
    from vllm.logger import init_logger

    clock = _Clock()
    spec_metrics.time = clock  # type: ignore[attr-defined,assignment]

    # vLLM's logger writes to stdout through its own handler and formatter (configured at start-up as the API
    # server does, process named as entry.py's decorate_logs("APIServer") names it); capture that stream.
    # "log_format": "color" is a terminal's output (VLLM_LOGGING_COLOR=1 picks ColoredFormatter, as a tty does:
    # logger.py _use_color), "json" the --logging-config formatter json (a LoggingConfig with formatter "json":
    # pythonjsonlogger's JsonFormatter with logging_utils/formatter.py JSON_FORMAT); "text" (default) vLLM's own.
    log_format = scenario.get("log_format", "text")
    if log_format == "color":
        os.environ["VLLM_LOGGING_COLOR"] = "1"
    if log_format == "json":
        config = types.SimpleNamespace(
            configure_logging=True, log_level="INFO", pylogging_config_file=None, formatter="json"
        )
        vllm_logger._configure_vllm_root_logger(config)
    else:
        vllm_logger._configure_vllm_root_logger()  # older releases ran it at import; running it again is harmless
    if hasattr(vllm_logger, "set_vllm_process_name"):
        vllm_logger.set_vllm_process_name("APIServer")
    captured = io.StringIO()
    vllm_root = logging.getLogger("vllm")
    for handler in vllm_root.handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(captured)  # type: ignore[arg-type]
    logger = init_logger("vllm.v1.metrics.loggers")

    k = int(scenario["k"])
    engines = [int(e) for e in scenario.get("engines", [0])]
    model = str(scenario.get("model", "m"))
    config = sys.modules["vllm.config"].SpeculativeConfig(k)  # type: ignore[attr-defined]
    labelnames = ["model_name", "engine"]
    per_engine = {idx: [model, str(idx)] for idx in engines}
    first_form = not hasattr(spec_metrics, "SpecDecodingLogging")  # 0.8.3 / 0.8.4: SpecDecodingMetrics, no Prom
    if first_form:

        def prom_observe(stats: object, idx: int) -> None:
            return None

    elif "per_engine_labelvalues" in inspect.signature(spec_metrics.SpecDecodingProm).parameters:
        prom = spec_metrics.SpecDecodingProm(config, labelnames, per_engine)
        prom_observe = prom.observe
    else:  # up to 0.10.x: one SpecDecodingProm per engine's PrometheusStatLogger, one engine here
        if len(engines) != 1:
            raise SystemExit("this vLLM's SpecDecodingProm takes one engine's label values")
        prom = spec_metrics.SpecDecodingProm(config, labelnames, per_engine[engines[0]])

        def prom_observe(stats: object, idx: int) -> None:
            prom.observe(stats)

    generation_tokens = prometheus_client.Counter(
        name="vllm:generation_tokens", documentation="Number of generation tokens processed.", labelnames=labelnames
    )
    gen_children = {idx: generation_tokens.labels(*lv) for idx, lv in per_engine.items()}
    logging_cls = spec_metrics.SpecDecodingMetrics if first_form else spec_metrics.SpecDecodingLogging
    loggers = {idx: logging_cls() for idx in engines}
    drafted_in_interval = dict.fromkeys(engines, False)

    gen_interval = dict.fromkeys(engines, 0)
    last_engine_log = dict.fromkeys(engines, clock.now)
    last_throughput = dict.fromkeys(engines, 0.0)
    messages: list[dict[str, object]] = []
    scrapes: dict[str, str] = {}
    for event in scenario["events"]:
        op = event["op"]
        if op == "step":
            idx = int(event.get("engine", 0))
            if first_form:
                stats = spec_metrics.SpecDecodingStats()
                for drafted, accepted in event["drafts"]:
                    stats.observe(num_draft_tokens=int(drafted), num_accepted_tokens=int(accepted))
            else:
                stats = spec_metrics.SpecDecodingStats.new(k)
                for drafted, accepted in event["drafts"]:
                    stats.observe_draft(num_draft_tokens=int(drafted), num_accepted_tokens=int(accepted))
            drafted_in_interval[idx] = True
            loggers[idx].observe(stats)
            prom_observe(stats, idx)
            emitted = sum(int(a) + 1 for _, a in event["drafts"])
            gen_children[idx].inc(emitted)
            gen_interval[idx] += emitted
        elif op == "advance":
            clock.now += float(event["s"])
        elif op == "log":
            for idx in engines:  # PerEngineStatLoggerAdapter.log: each engine's LoggingStatLogger in turn
                start = captured.tell()
                elapsed = clock.now - last_engine_log[idx]
                throughput = gen_interval[idx] / elapsed if elapsed > 0 else 0.0
                # LoggingStatLogger._update_stats / log: idle (this and the last interval produced nothing) -> debug.
                idle = not (throughput or last_throughput[idx])
                last_throughput[idx] = throughput
                log_fn = logger.debug if idle else logger.info
                if scenario.get("engine_lines", True):
                    # LoggingStatLogger.log's own line, its parts as loggers.py joins them (imitated, see above).
                    log_fn("Engine %03d: " + ", ".join(ENGINE_PARTS), idx, 0.0, throughput, 1, 0, "GPU", 1.5)
                if not first_form:
                    loggers[idx].log(log_fn=log_fn)  # vLLM's call, as LoggingStatLogger.log makes it
                elif drafted_in_interval[idx]:  # 0.8.3 loggers.py: when the last scheduler stats had spec stats
                    loggers[idx].log()
                drafted_in_interval[idx] = False
                lines = captured.getvalue()[start:].splitlines()
                messages.append({"engine": idx, "lines": lines})
                gen_interval[idx] = 0
                last_engine_log[idx] = clock.now
        elif op == "scrape":
            scrapes[str(event["name"])] = prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()
        elif op == "start":
            from vllm.entrypoints.common.startup import log_version_and_model

            launcher_logger = init_logger("vllm.entrypoints.launchers.launcher")
            log_version_and_model(launcher_logger, str(_version(root)), model)
        else:
            raise SystemExit(f"unknown op {op!r}")
    json.dump(
        {
            "version": _version(root),
            "messages": messages,
            "log_text": captured.getvalue(),
            "scrapes": scrapes,
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
