"""Measuring one load point on a running server: window, load, scrape, parse, classify, record.

    flush the prefix cache (load.flush_cache)  what the server answered goes into the record
    cursor = server.logs.journal_cursor()      the window opens (after the engine's next stats tick when it logs
                                               per interval: orchestrator/sweep/closing.py), /metrics is scraped,
                                               then sampled; GPU telemetry starts where the host has nvidia-smi
    client = load(point settings)              the load generator; a stop request cancels it promptly
    text   = server.logs.journal_since(cursor) the window closes (and /metrics is scraped again); an engine that
                                               logs per stats interval is waited for until its next tick is in
                                               the text (orchestrator/sweep/closing.py), else its log figures are
                                               marked partial ('open_interval')
    server metrics = parse(text) + the /metrics delta + every source compared (a window the server restarted in
                                               gives the journal's since-restart part only, and no /metrics
                                               figure: :func:`window_restart` says so, and the runner measures
                                               the point again once)
    intervals = bootstrap over the requests    (orchestrator/load/uncertainty.py); the requests themselves go
                                               to requests/<point>.jsonl
    classify_point(client, alive, stopped)     ok | failed (server_died, all_requests_failed) | skipped
    -> a Record (the caller appends it to the store and does the sweep's bookkeeping)

:func:`classify_point` and :func:`server_metrics` are pure; :class:`PointMeasurer` does the I/O through the
:class:`Tools` it is given (the load generator, the scrapes, the clock), so tests drive it with fakes. It
knows a :class:`~orchestrator.launchers.base.RunningServer` and nothing of how it was launched, of the
store, or of the sweep loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from orchestrator.engines.cache import flush_prefix_cache
from orchestrator.engines.ddtreeintervals import flag_window
from orchestrator.engines.info import read_engine_info
from orchestrator.engines.integrity import Integrity
from orchestrator.engines.registry import get_engine, is_engine
from orchestrator.hosts.telemetry import GpuTelemetry, has_nvidia_smi
from orchestrator.load import LoadSettings, run_load
from orchestrator.load.settings import engine_request_extras
from orchestrator.metrics import compare_sources, parse_window, scrape_delta
from orchestrator.metrics.scrape import GaugeSampler, get, scrape
from orchestrator.metrics.window import mark_open_end
from orchestrator.runs.plausible import impossible_figure
from orchestrator.runs.store import Record, utc_now_iso
from orchestrator.sweep.closing import close_window, open_window, ticking
from orchestrator.sweep.corpus import point_corpus
from orchestrator.sweep.golden import point_golden, point_shape

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.launchers.base import RunningServer
    from orchestrator.plan.deployments import Deployment, LoadPoint, Plan

__all__ = [
    "REQUEST_RECORDS",
    "Classification",
    "Measured",
    "PointMeasurer",
    "Tools",
    "classify_point",
    "interval_block",
    "new_record",
    "point_settings",
    "run_load_until_stopped",
    "server_metrics",
    "window_restart",
]

PointStatus = Literal["ok", "failed", "skipped"]
#: The key under which ``Tools.load`` hands the measured requests (``RequestRecord`` list) to the measurer; it
#: never reaches the stored record.
REQUEST_RECORDS = "_request_records"


# -- what a point is measured with -----------------------------------------------------------------------


def point_settings(experiment: Experiment, url: str, point: LoadPoint | None, **overrides: Any) -> LoadSettings:
    """The load generator's settings for ``point`` at ``url`` (no point: one request at a time, the warm-up's
    shape); ``overrides`` win. A prompts file is found beside the experiment file when its path is relative. With
    ``load.workloads`` a point sends its own workload (its output-length cap as ``max_tokens``); the warm-up and
    the lossless probe send the first workload."""
    load = experiment.load
    settings: dict[str, Any] = {
        "url": url,
        "model": experiment.server.model or "default",
        "api": experiment.server.api,
        "concurrency": point.concurrency if point else 1,
        "rate": point.rate if point else None,
        "max_in_flight": point.max_in_flight if point else None,
        "requests": point.requests if point else None,
        "duration_s": point.duration_s if point else None,
        "warmup": 0,
        "max_tokens": load.max_tokens,
        "temperature": load.temperature,
        "prompts": load.prompts,
        "prompt_max_tokens": load.prompt_max_tokens,
        "ignore_eos": load.ignore_eos,
        "seed": point.seed if point is not None and point.seed is not None else load.seed,
        "connect_timeout": load.timeouts.connect,
        "first_token_timeout": load.timeouts.first_token,
        "total_timeout": load.timeouts.total,
        "api_key": experiment.server.api_key_value,
        "stream": load.stream,
        # Ask the engine for its per-response speculative figures where its API offers them (load/settings.py).
        "extra_body": engine_request_extras(experiment.engine, experiment.server.api),
    }
    if point is not None and point.until:
        settings["until_rel_ci"] = point.until.get("rel_ci")
        settings["until_figure"] = point.until.get("figure", "output_tok_s")
        settings["until_min_requests"] = point.until.get("min_requests", 16)
        settings["until_level"] = experiment.checks.confidence
    if experiment.load.prompts and not experiment.load.prompts.startswith(("builtin:", "synthetic:")):
        source = experiment.source
        path = Path(experiment.load.prompts).expanduser()
        if not path.is_absolute() and source is not None:
            settings["prompts"] = str((source.parent / path).resolve())
    if experiment.load.workloads:
        from orchestrator.experiment.workloads import workload_sources

        sources = workload_sources(experiment)
        chosen = sources.get(point.workload) if point is not None and point.workload else None
        chosen = chosen or next(iter(sources.values()))
        settings["prompts"] = chosen
        settings["max_tokens"] = chosen.max_tokens or load.max_tokens
    settings.update(overrides)
    return LoadSettings(**settings)


def run_load_until_stopped(settings: LoadSettings, stop: threading.Event, progress: Any) -> Any:
    """Run one load in this thread's own event loop, cancelling it promptly once ``stop`` is set; the
    ``LoadResult``."""

    async def main() -> Any:
        stop_event = asyncio.Event()

        async def watch() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.1)
            stop_event.set()

        watcher = asyncio.create_task(watch())
        try:
            return await run_load(settings, progress=progress, stop=stop_event)
        finally:
            watcher.cancel()

    return asyncio.run(main())


# -- the pure parts ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Classification:
    """What a measured point is: its status and, when it is not ``ok``, why.

    ``server_died`` points need the server's log as evidence (:meth:`error` takes it); the others carry what
    the client saw.
    """

    status: PointStatus
    kind: str | None = None
    message: str | None = None
    evidence: tuple[str, ...] = ()

    @property
    def server_died(self) -> bool:
        return self.kind == "server_died"

    def error(self, server_log: list[str] | None = None) -> dict[str, Any] | None:
        """The record's ``error`` field (None for ``ok``), with ``server_log`` as evidence of a death."""
        if self.kind is None:
            return None
        error: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.status == "failed":
            error["evidence"] = list(server_log or []) if self.server_died else list(self.evidence)
        return error


def classify_point(client: Mapping[str, Any], *, alive: bool, stopped: bool) -> Classification:
    """The status of one measured point from what the client saw (``LoadResult.to_dict()``), whether the
    server still runs, and whether a stop was requested. In order:

    - stopped and the load ended early (``partial``): ``skipped`` (interrupted; not stored, measured again
      on resume);
    - the server is not running: ``failed``, ``server_died``;
    - every request failed: ``failed``, ``all_requests_failed``, with the error counts by kind;
    - otherwise ``ok`` (some failed requests are counted in the client figures, not a failed point).
    """
    if stopped and client.get("partial", False):
        return Classification("skipped", "interrupted", "stopped by the user mid-point")
    if not alive:
        return Classification("failed", "server_died", "the server stopped during the point")
    requests = int(client.get("requests") or 0)
    errors = int(client.get("errors") or 0)
    if requests and errors >= requests:
        by_kind = client.get("errors_by_kind") or {}
        return Classification(
            "failed",
            "all_requests_failed",
            f"all {requests} requests failed",
            tuple(f"{k}: {v}" for k, v in by_kind.items()),
        )
    return Classification("ok")


def server_metrics(
    experiment: Experiment,
    text: str,
    client: Mapping[str, Any],
    *,
    before: str | None,
    after: str | None,
    during: list[str],
    elapsed_s: float,
    version: str | None,
    open_end: str | None = None,
    aligned: bool = False,
    closed: bool = False,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The record's ``server`` field: the window's log ``text`` parsed by the experiment's engine (and its
    own parsers), the ``/metrics`` delta between ``before`` and ``after`` (gauges sampled ``during``), and
    every source of the speculative figures compared (``sources``: journal, prometheus, responses, client).
    ``open_end``: why the window ended before the engine's last stats tick (its log figures are then withheld:
    :func:`orchestrator.metrics.window.mark_open_end`). ``aligned``: the window opened on the engine's stats
    tick (orchestrator/sweep/closing.py), so no edge line is left out. ``closed``: a tick after the load closed it
    and the lines printed with that tick were waited for (``Closed.closed``), so its end cut no pair.
    ``settings``: the server's reported settings (engine_info), for the DDTree interval check."""
    window = parse_window(
        experiment.engine,
        text,
        [(p.name, p.regex) for p in experiment.parsers],
        cut=True,
        version=version,
        lost=getattr(text, "lost", None),  # a LogChunk whose journal removed the window's start
        aligned=aligned,
        closed=closed,
    )
    if open_end is not None:
        mark_open_end(window, open_end)
    spec = client.get("spec") or {}
    if is_engine(experiment.engine):
        get_engine(experiment.engine).reconcile_log(window, spec)  # what the log counts that was not committed
    flag_window(window, client, settings)  # each DDTree interval against what length caps explain
    server = window.to_dict()
    sources: dict[str, Any] = {"journal": window}
    if before is not None and after is not None:
        prom = scrape_delta(
            before, after, experiment.engine, during=during, elapsed_s=elapsed_s, version=version, settings=settings
        )
        _restart_spans_scrapes(window.integrity, prom)
        server["prometheus"] = prom.to_dict()
        sources["prometheus"] = prom
    if any(v is not None for v in spec.values()):
        sources["responses"] = spec
    if client.get("output_tok_s"):
        sources["client"] = {"gen_throughput": client["output_tok_s"]}
    server["sources"] = compare_sources(sources)
    return server


def _restart_spans_scrapes(journal: Integrity, prom: Any) -> None:
    """A process start in the journal window lies between the two scrapes too: their difference spans two
    processes (counters restart at zero, ``process_start_time_seconds`` changes), so ``prom`` gives no figure."""
    if "restart" not in journal.names() or "restart" in prom.integrity.names():
        return
    prom.integrity.broken(
        "restart",
        "the journal window shows the server starting again between the two scrapes: their difference spans two "
        "processes",
    )
    prom.integrity.part = None
    prom.accept_len = prom.acceptance_rate = prom.gen_throughput = None
    prom.per_position = None


def window_restart(server: Mapping[str, Any] | None) -> str | None:
    """Why a record's window was broken by a process restart (the ``restart`` reason of its journal or its
    ``/metrics`` source, as :meth:`Integrity.describe` says it), or None when no source saw one."""
    for source in (server or {}, (server or {}).get("prometheus") or {}):
        found = source.get("integrity") if isinstance(source, Mapping) else None
        if not isinstance(found, Mapping):
            continue
        reasons = [r for r in found.get("reasons") or () if isinstance(r, Mapping)]
        if any(r.get("reason") == "restart" for r in reasons):
            integrity = Integrity([{"reason": str(r.get("reason")), "detail": str(r.get("detail"))} for r in reasons])
            integrity.part = found.get("part") if isinstance(found.get("part"), str) else None
            return integrity.describe()
    return None


def interval_block(
    records: list[Any], client: Mapping[str, Any], *, level: float, seed: int = 0
) -> dict[str, Any] | None:
    """The record's ``intervals``: every figure's ``level`` interval from a bootstrap over the window's requests
    (:func:`orchestrator.load.uncertainty.window_intervals`), with the method named."""
    from orchestrator.load.uncertainty import DEFAULT_RESAMPLES, window_intervals

    intervals = window_intervals(
        records,
        output_tok_s=client.get("output_tok_s"),
        open_loop=client.get("loop") == "open",
        concurrency=client.get("concurrency"),
        level=level,
        seed=seed,
    )
    if not intervals:
        return None
    return {
        "level": level,
        "method": "bootstrap over requests",
        "resamples": DEFAULT_RESAMPLES,
        "requests": sum(1 for r in records if r.ok),
        "figures": {name: interval.to_dict() for name, interval in intervals.items()},
    }


def new_record(
    run_id: str,
    experiment: str,
    host: str,
    deployment: Deployment,
    point: LoadPoint,
    status: PointStatus,
    started_at: str,
    **fields: Any,
) -> Record:
    """A record of ``point`` of ``deployment`` on ``host``, finished now (``workload`` only when the point has one,
    so records of runs without workloads stay as they were)."""
    if point.workload is not None:
        fields["workload"] = point.workload
    figures = {"client": fields.get("client"), "server": fields.get("server"), "intervals": fields.get("intervals")}
    if status == "ok" and (why := impossible_figure(figures)):
        # What the server or the client claimed is no measurement (orchestrator/runs/plausible.py): the point
        # failed, its impossible figures left out of the record, the figure named.
        status = "failed"
        fields.update(client=None, server=None, intervals=None)
        fields["error"] = {"kind": "implausible_figures", "message": f"not a measurement: {why}", "evidence": []}
    return Record(
        run_id=run_id,
        experiment=experiment,
        deployment_id=deployment.id,
        point_id=point.id,
        config_hash=deployment.config_hash,
        host=host,
        variant=deployment.variant,
        params=dict(deployment.params),
        aliases=[a.model_dump() for a in deployment.aliases],
        baseline=deployment.baseline,
        mode=point.mode,
        concurrency=point.concurrency,
        rate=point.rate,
        repeat=point.repeat,
        restart=point.restart,
        status=status,
        started_at=started_at,
        finished_at=utc_now_iso(),
        **fields,
    )


# -- the I/O -------------------------------------------------------------------------------------------


class Sampler(Protocol):
    def finish(self) -> list[str]: ...


def _client_dict(settings: LoadSettings, stop: threading.Event, progress: Any) -> dict[str, Any]:
    result = run_load_until_stopped(settings, stop, progress)
    client = dict(result.to_dict())
    client[REQUEST_RECORDS] = result.records
    return client


def _probe(settings: LoadSettings, prompts: int, **kwargs: Any) -> list[Any]:
    from orchestrator.sweep.lossless import probe

    return probe(settings, prompts, **kwargs)


class _TelemetryStarter:
    """Starts GPU telemetry on a running server's host, once it knows the host has nvidia-smi (asked once per
    host); None for a server without a host (a scheduler's job) or a host without nvidia-smi."""

    def __init__(self) -> None:
        self._known: dict[int, bool] = {}
        self._lock = threading.Lock()

    def __call__(self, server: RunningServer, interval_ms: int) -> GpuTelemetry | None:
        host = server.host  # None: a server without a host (the RunningServer protocol's default)
        if host is None:
            return None
        with self._lock:
            present = self._known.get(id(host))
        if present is None:
            present = has_nvidia_smi(host)
            with self._lock:
                self._known[id(host)] = present
        gpus = (server.placement or {}).get("gpus")  # a GPU slot samples its own GPUs only
        return GpuTelemetry.start(host, interval_ms, gpus=gpus) if present else None


@dataclass(frozen=True)
class Tools:
    """What :class:`PointMeasurer` does its I/O with; tests pass fakes."""

    #: ``load(settings, stop, progress) -> LoadResult.to_dict()``
    load: Callable[[LoadSettings, threading.Event, Any], dict[str, Any]] = _client_dict
    #: ``scrape(url, path, api_key) -> text or None`` (``/metrics``)
    scrape: Callable[[str, str | None, str | None], str | None] = scrape
    #: ``get(url, path, api_key) -> (status, body)`` (engine information)
    get: Callable[[str, str, str | None], tuple[int | None, str | None]] = get
    #: ``sampler(url, path, api_key)``: scrapes ``/metrics`` through the point until ``finish()``
    sampler: Callable[[str, str | None, str | None], Sampler] = GaugeSampler
    clock: Callable[[], float] = time.monotonic
    #: ``flush(url, engine, api_key) -> what the server answered`` (``load.flush_cache``, orchestrator/engines/cache.py)
    flush: Callable[[str, str, str | None], dict[str, Any]] = flush_prefix_cache
    #: ``telemetry(server, interval_ms) -> sampler with finish() -> summary``, or None (orchestrator/hosts/telemetry.py)
    telemetry: Callable[[Any, int], Any] = field(default_factory=_TelemetryStarter)
    #: ``probe(settings, prompts, runs=, stop=) -> answers`` (the lossless check, orchestrator/sweep/lossless.py)
    probe: Callable[..., list[Any]] = field(default_factory=lambda: _probe)


@dataclass
class Measured:
    """One measured point: its record, whether the server died during it, and how long it took."""

    record: Record
    server_died: bool
    seconds: float
    classification: Classification = field(default_factory=lambda: Classification("ok"))


class PointMeasurer:
    """Measures load points of one experiment on running servers (see the module docstring)."""

    def __init__(self, experiment: Experiment, tools: Tools | None = None) -> None:
        self.experiment = experiment
        self.tools = tools or Tools()
        #: The golden probe's answers across this sweep's points (sweep/golden.py): each prompt is run once.
        self.golden_cache: dict[str, Any] = {}

    def engine_info(self, url: str) -> dict[str, Any]:
        """What the server at ``url`` says about itself (:mod:`orchestrator.engines.info`)."""
        api_key = self.experiment.server.api_key_value
        return read_engine_info(self.experiment.engine, lambda path: self.tools.get(url, path, api_key))

    def lossless_probe(
        self,
        url: str,
        *,
        runs: int,
        stop: threading.Event,
        batched: Plan | None = None,
        logprobs: int = 0,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[Any]:
        """The lossless check's answers of the server at ``url`` (``orchestrator/sweep/lossless.py``): the load's
        request shape, at temperature 0, with ``lossless.max_tokens`` or the load's; one request at a time
        ``runs`` times, then (``batched``: the sweep's plan) with each of
        :func:`~orchestrator.sweep.lossless.probe_batches` in flight; ``logprobs``: how many likeliest alternatives
        of each token to ask for too (the baseline's); ``progress(done, total)``: answers so far."""
        from orchestrator.sweep.lossless import plan_chains, probe_batches

        exp = self.experiment
        settings = point_settings(
            exp,
            url,
            None,
            concurrency=1,
            requests=1,
            temperature=0.0,
            stream=True,
            max_tokens=exp.lossless.max_tokens or exp.load.max_tokens,
        )
        prompts = exp.lossless.prompts
        batches = probe_batches(exp.load.concurrency, prompts, plan_chains(batched)) if batched is not None else []
        extra = {"progress": progress} if progress is not None else {}  # a test's probe may not take it
        return self.tools.probe(
            settings, exp.lossless.prompts, runs=runs, batches=batches, stop=stop, logprobs=logprobs, **extra
        )

    def wait_serving(self, url: str, stop: threading.Event, *, timeout: float, poll: float = 1.0) -> bool:
        """Wait until every health path of the experiment answers 2xx at ``url`` (a server systemd restarted
        is loading again); False when ``timeout`` seconds passed first or ``stop`` was set."""
        api_key = self.experiment.server.api_key_value
        paths = self.experiment.health_paths
        deadline = self.tools.clock() + timeout
        delay = min(0.05, poll)
        while not stop.is_set():
            answers = [self.tools.get(url, path, api_key)[0] for path in paths]
            if all(status is not None and 200 <= status < 300 for status in answers):
                return True
            if self.tools.clock() >= deadline:
                return False
            stop.wait(delay)
            delay = min(delay * 2, poll)
        return False

    def warm_up(
        self, url: str, stop: threading.Event, progress: Callable[[Any], None] | None = None
    ) -> dict[str, Any] | None:
        """The experiment's warm-up requests, one at a time; the client figures, or None when there are none.
        ``progress``: the load generator's reports (requests done of the warm-up's)."""
        warmup = self.experiment.load.warmup
        if warmup <= 0 or stop.is_set():
            return None
        # The warm-up prompts, not the points' (a drafter that keeps a corpus would have their answers).
        settings = point_settings(self.experiment, url, None, concurrency=1, requests=warmup, warmup_prompts=True)
        return self.tools.load(settings, stop, progress)

    def measure(
        self,
        server: RunningServer,
        deployment: Deployment,
        point: LoadPoint,
        *,
        run_id: str,
        host: str,
        attempt: int,
        stop: threading.Event,
        write_window: Callable[[str], str | None],
        engine_info: dict[str, Any] | None = None,
        progress: Callable[[Any], None] | None = None,
        write_requests: Callable[[list[dict[str, Any]]], str | None] | None = None,
    ) -> Measured:
        """Measure ``point`` on ``server``: its window's raw text goes to ``write_window`` and its requests to
        ``write_requests`` (each returns the file it wrote, relative to the run directory), its record comes
        back (not stored)."""
        exp, tools = self.experiment, self.tools
        started_at = utc_now_iso()
        t0 = tools.clock()
        api_key = exp.server.api_key_value
        metrics_path = exp.server.metrics_path
        if engine_info is not None and engine_info.get("version") is None and engine_info.get("error") == "no answer":
            # Asked right after /health, SGLang's /server_info waits for a scheduler busy with its own warm-up
            # (a CPU takes seconds): ask again now, so the version that gives its figures' meaning is known.
            engine_info = self.engine_info(server.url)
        cache_flush = tools.flush(server.url, exp.engine, api_key) if exp.load.flush_cache else None
        opened = open_window(
            exp.engine, server.logs, command=deployment.command, environment=deployment.environment, stop=stop
        )
        cursor = opened.cursor
        before = tools.scrape(server.url, metrics_path, api_key)
        scraped_at = tools.clock()
        sampler = tools.sampler(server.url, metrics_path, api_key) if before is not None else None
        gpu = tools.telemetry(server, exp.telemetry.interval_ms) if exp.telemetry.gpu else None
        try:
            client = tools.load(point_settings(exp, server.url, point), stop, progress)
            # An engine that ticks: the window as the load left it, read before anything else, so that a stats
            # tick after this text is one after the load's end (orchestrator/sweep/closing.py close_window). One
            # that does not is read after the scrape below, which gives the journal time for the lines of the
            # load's last requests (llama.cpp prints them just before it answers).
            at_end = server.logs.journal_since(cursor) if ticking(exp.engine) else None
        finally:
            during = sampler.finish() if sampler is not None else []
            telemetry = gpu.finish() if gpu is not None else None
        requests = client.pop(REQUEST_RECORDS, None)
        intervals: dict[str, Any] | None = None
        requests_file: str | None = None
        if requests is not None:
            intervals = interval_block(
                requests, client, level=exp.checks.confidence, seed=int(point.id.split("-")[-1], 16) % 2**32
            )
            if write_requests is not None:
                origin = min((r.dispatched for r in requests), default=0.0)
                from orchestrator.load.records import request_row

                requests_file = write_requests([request_row(r, origin) for r in requests])
        if telemetry is not None and telemetry.get("energy_j"):
            telemetry["tokens_per_joule"] = round(float(client.get("output_tokens") or 0) / telemetry["energy_j"], 5)
        after = tools.scrape(server.url, metrics_path, api_key)
        elapsed = tools.clock() - scraped_at
        closed = close_window(
            exp.engine,
            server.logs.journal_since(cursor) if at_end is None else at_end,
            lambda: server.logs.journal_since(cursor),
            command=deployment.command,
            environment=deployment.environment,
            stop=stop,
            expect_tick=opened.tick_seen,
        )
        text = closed.text
        window_file = write_window(text)
        version = (engine_info or {}).get("version")
        server_fields = server_metrics(
            exp,
            text,
            client,
            before=before,
            after=after,
            during=during,
            elapsed_s=elapsed,
            version=version,
            open_end=closed.open_detail(),
            aligned=opened.aligned and closed.closed is not False,
            closed=closed.closed is True,
            settings=(engine_info or {}).get("settings"),
        )
        if closed.closed is not None or opened.aligned:
            server_fields["window_ticks"] = {
                "opened_after_tick": opened.tick_seen,
                "open_wait_s": round(opened.waited_s, 3),
                "closed_by_tick": closed.closed,
                "closed_by_idle_ticks": closed.idle,
                "close_wait_s": round(closed.waited_s, 3),
                "interval_s": closed.interval_s,
            }
        settings = point_settings(exp, server.url, point)
        corpus = point_corpus(
            exp.engine, engine_info, deployment.command or "", cache_flush, client, settings, warmup=exp.load.warmup
        )
        if corpus is not None:
            server_fields["drafter_corpus"] = corpus  # did the drafter's corpus already know these prompts
        served = (engine_info or {}).get("settings")
        shape = point_shape(exp.engine, deployment.command or "", served)
        if shape is not None:
            server_fields["spec_shape"] = shape  # the tree asked for and the tree the server runs
        if requests is not None and not stop.is_set():
            golden = point_golden(
                exp.engine,
                deployment.command or "",
                served,
                requests,
                settings,
                exp.checks.golden_python,
                self.golden_cache,
            )
            if golden is not None:
                server_fields["golden"] = golden  # what the model itself predicts for this point
        alive = server.alive()
        verdict = classify_point(client, alive=alive, stopped=stop.is_set())
        record = new_record(
            run_id,
            exp.name,
            host,
            deployment,
            point,
            verdict.status,
            started_at,
            client=client,
            server=server_fields,
            error=verdict.error(server.evidence() if verdict.server_died else None),
            window_file=window_file,
            attempt=attempt,
            engine_info=engine_info,
            intervals=intervals,
            requests_file=requests_file,
            cache_flush=cache_flush,
            telemetry=telemetry,
        )
        return Measured(record, verdict.server_died, tools.clock() - t0, verdict)
