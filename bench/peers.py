"""specsweep beside SGLang's own client on one real grid, the server's counters as referee (issue 60).

A user who does not run specsweep scripts ``python -m sglang.bench_serving`` around server restarts. This runs a
shipped sweep file (sweeps/sglang-cpu.yaml by default, or a part of it) both ways, alternately (A, B, A, B), on the
same machine:

- **A, specsweep**: ``python -m orchestrator sweep FILE`` on a copy of the file trimmed to the chosen variants and
  loads (its lossless probe, warm-up, decide step and report included).
- **B, the peer**: what a user's script does. For each configuration the server command the sweep file renders
  (the plan's ``Deployment.command``, same environment) is started as a subprocess in its own session and
  polled on ``/health`` until it answers; the file's warm-up requests (``load.warmup``, C = 1, the prompts
  specsweep warms up with) are sent once; then per concurrency one ``$SGLANG_PYTHON -m sglang.bench_serving``
  with the flags that make it send specsweep's requests: ``--backend sglang-oai-chat`` (the chat endpoint
  specsweep uses), ``--dataset-name openai`` with the point's prompts in specsweep's order written as chat
  requests (the ``openai`` loader keeps the file's order; ``custom`` shuffles), ``max_tokens`` =
  ``load.max_tokens``, temperature 0, ``--disable-ignore-eos`` (its default is to ignore EOS),
  ``--flush-cache`` (the file's ``flush_cache``), ``--warmup-requests 0`` (the script warmed up already, and a
  warm-up inside the window would count in the counters), ``--max-concurrency C``, ``--num-prompts`` = the
  point's requests, ``--output-file``. The server is stopped (SIGTERM to its process group) after its points.

The referee: ``/metrics`` counters read before and after each measured window (specsweep's own scrapes, stored
raw in each record's ``server.prometheus.counters``; the peer's by this script, just before and after each
bench_serving process). From them: output tokens ``d(sglang:generation_tokens_total)``, requests, verify steps,
accept length in both definitions (SGLang's completion tokens / verify steps, which ``meta_info`` and
``/server_info`` use; specsweep's with each completion's prefill token left out), mean TTFT
``d(sglang:time_to_first_token_seconds_sum) / d(_count)`` and mean TPOT from
``sglang:request_time_per_output_token_seconds`` (SGLang 0.5.23 observability/metrics_collector.py, observed per
finished request by managers/tokenizer_manager.py; TPOT = decode latency / (completion tokens - 1),
observability/req_time_stats.py ``get_time_per_output_token``). tok/s by the counters is their tokens over the
tool's own measured duration (the counters carry no clock of the window).

Client cost: the peer's bench_serving processes are timed by ``wait4`` (CPU and peak RSS, exact); specsweep's CPU
by ``wait4`` too (its servers are not its children: the process service leaves them to init, in sessions of their
own), and its peak memory is the sum over every process of its tree in its own session, sampled from ``/proc``
every 0.2 s (which also gives a sampled CPU figure, ``client_cpu_sampled_s``, as a cross-check).

    eval "$(bash scripts/get-sglang-cpu.sh)"; export SGLANG_PYTHON SGLANG_MODEL
    python bench/peers.py --loads 1,4 --variants ar,ngram4 --repeats 1     # reduced grid
    python bench/peers.py                                                     # the whole file, twice each
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator.engines.exposition import parse_exposition  # noqa: E402

# The counters the referee reads (sglang/srt/observability/metrics_collector.py, SGLang 0.5.23).
TOKENS = "sglang:generation_tokens_total"
REQUESTS = "sglang:num_requests_total"
VERIFY = "sglang:spec_verify_calls_total"
TTFT_SUM, TTFT_COUNT = "sglang:time_to_first_token_seconds_sum", "sglang:time_to_first_token_seconds_count"
TPOT_SUM = "sglang:request_time_per_output_token_seconds_sum"
TPOT_COUNT = "sglang:request_time_per_output_token_seconds_count"
FIGURES = ("requests", "output_tokens", "tok_s", "accept_len", "ttft_ms", "tpot_ms")
ALIASES = {"ar": "autoregressive"}


# ---- pure parts (tests/unit/test_bench_peers.py) ----------------------------------------------------------------


def pick_variants(variants: dict[str, Any], wanted: list[str]) -> dict[str, Any]:
    """The sweep file's ``variants`` cut to ``wanted``: a name (``ar`` is ``autoregressive``), or a name and a
    value of its one matrix key (``ngram4``: ``ngram`` with ``k: [4]``). Raises ValueError naming an unknown one."""
    out: dict[str, Any] = {}
    for token in wanted:
        name = ALIASES.get(token, token)
        if name in variants:
            out[name] = variants[name]
            continue
        stem = name.rstrip("0123456789")
        digits = name[len(stem) :]
        spec = variants.get(stem)
        matrix = (spec or {}).get("matrix") or {}
        if spec is None or not digits or len(matrix) != 1:
            raise ValueError(f"--variants: no variant {token!r} in the sweep file (it has {', '.join(variants)})")
        key, values = next(iter(matrix.items()))
        if int(digits) not in values:
            raise ValueError(f"--variants: {stem} has no {key} = {digits} (it has {values})")
        kept = out.get(stem, {**spec, "matrix": {key: []}})
        kept["matrix"][key].append(int(digits))
        out[stem] = kept
    return out


def trim_experiment(doc: dict[str, Any], loads: list[int] | None, variants: list[str] | None) -> dict[str, Any]:
    """A copy of a sweep file's document with only ``loads`` (concurrencies) and ``variants`` (baselines that are
    left out dropped)."""
    out = json.loads(json.dumps(doc))
    if loads:
        out["load"]["concurrency"] = list(loads)
    if variants:
        out["variants"] = pick_variants(out["variants"], variants)
        out["baselines"] = [b for b in out.get("baselines", []) if b in out["variants"]]
    return out


def counter_deltas(before_text: str, after_text: str) -> dict[str, float]:
    """Per metric name (series summed), how much each SGLang counter rose between two ``/metrics`` texts."""
    before, after = parse_exposition(before_text, "sglang:"), parse_exposition(after_text, "sglang:")
    out: dict[str, float] = {}
    for key, value in after.values.items():
        name = after.names[key]
        if after.kind(name) != "counter":
            continue
        out[name] = out.get(name, 0.0) + value - before.values.get(key, 0.0)
    return out


def by_name(series_deltas: dict[str, float]) -> dict[str, float]:
    """A record's ``counters`` (series -> increase) summed per metric name."""
    out: dict[str, float] = {}
    for key, value in series_deltas.items():
        name = key.split("{", 1)[0]
        out[name] = out.get(name, 0.0) + value
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def referee(deltas: dict[str, float], duration_s: float | None) -> dict[str, Any]:
    """The window's figures from counter increases by name (see the module docstring). ``accept_len`` is
    SGLang's definition (completion tokens / verify steps), ``accept_len_excl_prefill`` specsweep's."""
    tokens, requests, verify = deltas.get(TOKENS), deltas.get(REQUESTS), deltas.get(VERIFY)
    ttft = _ratio(deltas.get(TTFT_SUM), deltas.get(TTFT_COUNT))
    tpot = _ratio(deltas.get(TPOT_SUM), deltas.get(TPOT_COUNT))
    return {
        "requests": requests,
        "output_tokens": tokens,
        "tok_s": _ratio(tokens, duration_s),
        "accept_len": _ratio(tokens, verify) if verify else None,
        "accept_len_excl_prefill": _ratio((tokens or 0) - (requests or 0), verify) if verify else None,
        "verify_steps": verify,
        "ttft_ms": None if ttft is None else ttft * 1000,
        "tpot_ms": None if tpot is None else tpot * 1000,
    }


def bench_serving_figures(result: dict[str, Any]) -> dict[str, Any]:
    """The common figures of one ``sglang.bench_serving --output-file`` line (benchmark/serving.py ``result``):
    ``accept_length`` is ``/server_info``'s ``avg_spec_accept_length``, SGLang's definition."""
    return {
        "requests": result.get("completed"),
        "output_tokens": result.get("total_output_tokens"),
        "tok_s": result.get("output_throughput"),
        "accept_len": result.get("accept_length"),
        "ttft_ms": result.get("mean_ttft_ms"),
        "tpot_ms": result.get("mean_tpot_ms"),
        "duration_s": result.get("duration"),
    }


def specsweep_figures(record: dict[str, Any]) -> dict[str, Any]:
    """The common figures of one specsweep record (client figures; accept length from the responses, specsweep's
    definition, prefill token excluded)."""
    client = record.get("client") or {}
    spec = client.get("spec") or {}
    duration = None
    if client.get("ended_at") and client.get("started_at"):
        duration = client["ended_at"] - client["started_at"]
    return {
        "requests": client.get("requests"),
        "output_tokens": client.get("output_tokens"),
        "tok_s": client.get("output_tok_s"),
        "accept_len": spec.get("accept_len"),
        "ttft_ms": (client.get("ttft_ms") or {}).get("mean"),
        "tpot_ms": (client.get("tpot_ms") or {}).get("mean"),
        "duration_s": client.get("duration_s", duration),
    }


def agrees(figure: str, tool: float | None, counters: float | None) -> bool | None:
    """Whether a tool's figure is the counters' (None when either is missing): counts exactly, accept length within
    5e-4, tok/s within 0.5 %; TTFT and TPOT are the client's and the server's clocks and are not judged (None)."""
    if tool is None or counters is None or figure in ("ttft_ms", "tpot_ms"):
        return None
    if figure in ("requests", "output_tokens"):
        return round(tool) == round(counters)
    if figure == "accept_len":
        return abs(tool - counters) < 5e-4
    return abs(tool - counters) <= 0.005 * abs(counters)


# ---- measuring ----------------------------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int, float, int] | None:
    """(ppid, session, CPU seconds, RSS bytes) of a process from /proc, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2 :].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(rest[1]), int(rest[3]), (int(rest[11]) + int(rest[12])) / tick, int(rest[21]) * os.sysconf("SC_PAGESIZE")


class TreeSampler(threading.Thread):
    """CPU and peak RSS of a process and its descendants in its session (not the servers it starts in sessions of
    their own), sampled from /proc."""

    def __init__(self, pid: int, every: float = 0.2):
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.cpu: dict[int, float] = {}
        self.peak_rss = 0
        self.stop = threading.Event()

    def run(self) -> None:
        root = _stat(self.pid)
        if root is None:
            return
        session = root[1]
        while not self.stop.is_set():
            stats = {}
            for entry in os.listdir("/proc"):
                if entry.isdigit() and (s := _stat(int(entry))) is not None:
                    stats[int(entry)] = s
            tree, frontier = {self.pid}, [self.pid]
            while frontier:
                parent = frontier.pop()
                for pid, s in stats.items():
                    if s[0] == parent and pid not in tree and s[1] == session:
                        tree.add(pid)
                        frontier.append(pid)
            rss = 0
            for pid in tree:
                if pid in stats:
                    self.cpu[pid] = stats[pid][2]
                    rss += stats[pid][3]
            self.peak_rss = max(self.peak_rss, rss)
            self.stop.wait(self.every)

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu.values())


def _get(url: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return str(r.read().decode())


def _post_json(url: str, body: dict[str, Any], timeout: float = 600.0) -> dict[str, Any]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return dict(json.loads(r.read()))


@dataclass
class ToolRun:
    tool: str
    round: int
    wall_s: float = 0.0
    first_point_start_s: float | None = None
    first_point_end_s: float | None = None
    restarts: int = 0
    client_cpu_s: float = 0.0
    client_peak_mib: float = 0.0
    client_cpu_sampled_s: float | None = None
    points: list[dict[str, Any]] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    load_avg: list[float] = field(default_factory=list)
    exit: int = 0
    note: str = ""


def run_specsweep(doc: dict[str, Any], work: Path, round_: int) -> ToolRun:
    run = ToolRun("specsweep", round_)
    exp = work / f"specsweep-{round_}.yaml"
    results = work / f"specsweep-results-{round_}"
    exp.write_text(yaml.safe_dump({**doc, "results_dir": str(results)}, sort_keys=False))
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "160", "PYTHONPATH": str(ROOT)}
    log = (work / f"specsweep-{round_}.log").open("w")
    loads = [os.getloadavg()[0]]
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "sweep", str(exp)], stdout=log, stderr=log, env=env)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(1)
        loads.append(os.getloadavg()[0])
    run.wall_s = time.time() - t0
    sampler.stop.set()
    sampler.join()
    proc.returncode = run.exit = os.waitstatus_to_exitcode(status)
    # wait4: specsweep and the children it reaped. Its servers are not among them: the process service starts each
    # through a shell that leaves it to init, in a session of its own. The sampled figure is the cross-check.
    run.client_cpu_s, run.client_cpu_sampled_s = usage.ru_utime + usage.ru_stime, sampler.cpu_s
    run.client_peak_mib = sampler.peak_rss / 2**20
    run.load_avg = [min(loads), max(loads)]
    run_dirs = sorted(results.glob("*/*/records.jsonl"))
    if not run_dirs:
        run.note = f"no run directory under {results}; see {log.name}"
        return run
    run_dir = run_dirs[-1].parent
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines() if line.strip()]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    run.restarts = sum(1 for e in events if e.get("kind") == "deploy")
    starts = []
    for record in records:
        client = record.get("client") or {}
        prom = (record.get("server") or {}).get("prometheus") or {}
        figures = specsweep_figures(record)
        window = referee(by_name(prom.get("counters") or {}), figures["duration_s"])
        window["accept_len_tool_definition"] = window["accept_len_excl_prefill"]
        run.points.append(
            {
                "config": _config_label(record),
                "concurrency": client.get("concurrency"),
                "tool": figures,
                "counters": window,
            }
        )
        if client.get("started_at"):
            starts.append((client["started_at"], client.get("ended_at") or client["started_at"]))
    run.phases = phases(events, t0, starts)
    if starts:
        first = min(starts)
        run.first_point_start_s, run.first_point_end_s = first[0] - t0, first[1] - t0
        run.phases["measured windows"] = sum(end - start for start, end in starts)
        # after the last event too (the report, the ending): the run's end is its process's
        run.phases["after the last point"] = run.phases.get("after the last point", 0.0) + max(
            0.0, t0 + run.wall_s - max(max(end for _, end in starts), _event_time(events[-1]) if events else 0.0)
        )
    return run


def _event_time(event: dict[str, Any]) -> float:
    """An event's time (events.jsonl's ``time``, UTC with ``Z``) in seconds since the epoch."""
    from datetime import datetime

    return datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()


def _config_label(record: dict[str, Any]) -> str:
    params = record.get("params") or {}
    inside = ", ".join(f"{k}={v}" for k, v in params.items())
    return str(record.get("variant")) + (f"({inside})" if inside else "")


def phases(
    events: list[dict[str, Any]], t0: float, windows: list[tuple[float, float]] | tuple[()] = ()
) -> dict[str, float]:
    """Seconds spent per phase of a specsweep run, from its events: server start (deploy to healthy), warm-up,
    lossless probe; each phase ends at the next event, less the measured ``windows`` (start, end) inside it (the
    probe's event comes after a deployment's points, so its span holds them: issue 59)."""
    at = _event_time

    def outside(start: float, end: float) -> float:
        inside = sum(max(0.0, min(end, w_end) - max(start, w_start)) for w_start, w_end in windows)
        return end - start - inside

    out: dict[str, float] = {}
    for e, nxt in itertools.pairwise(events):
        kind = {"healthy": "server start", "warmup": "warm-up", "lossless_probe": "lossless probe"}.get(nxt["kind"])
        if kind:
            out[kind] = out.get(kind, 0.0) + outside(at(e), at(nxt))
    if events:
        out["before first event"] = at(events[0]) - t0
    if windows and events:  # what follows the last window and no phase above holds (the restore, the report)
        last = max(end for _, end in windows)
        named = sum(
            max(0.0, at(nxt) - max(at(e), last))
            for e, nxt in itertools.pairwise(events)
            if nxt["kind"] in ("healthy", "warmup", "lossless_probe")
        )
        out["after the last point"] = max(0.0, at(events[-1]) - last - named)
    return out


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}) before it was healthy")
        try:
            _get(url + "/health", 5)
            _get(url + "/v1/models", 5)
            return
        except OSError:
            time.sleep(1)
    raise RuntimeError(f"the server was not healthy after {timeout:g} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_peer(doc: dict[str, Any], work: Path, round_: int) -> ToolRun:
    from orchestrator.experiment.schema import load_experiment
    from orchestrator.load.workloads import load_workload
    from orchestrator.plan.deployments import build_plan
    from orchestrator.quoting import split_command

    run = ToolRun("bench_serving", round_)
    exp_path = work / f"peer-{round_}.yaml"
    exp_path.write_text(yaml.safe_dump({**doc, "results_dir": str(work / "unused")}, sort_keys=False))
    experiment = load_experiment(exp_path)
    plan = build_plan(experiment)
    url = str(experiment.server.url).rstrip("/")
    model = experiment.server.model or ""
    load = experiment.load
    python, tokenizer = os.environ["SGLANG_PYTHON"], os.environ["SGLANG_MODEL"]
    loads = [os.getloadavg()[0]]
    t0 = time.time()
    for deployment in plan.deployments:
        argv = split_command(deployment.command or "", what="the process command")
        log = (work / f"peer-{round_}-{deployment.id}.server.log").open("w")
        started = time.time()
        server = subprocess.Popen(
            argv, env={**os.environ, **deployment.environment}, stdout=log, stderr=log, start_new_session=True
        )
        run.restarts += 1
        try:
            _wait_healthy(url, server, float(experiment.server.ready_timeout))
            run.phases["server start"] = run.phases.get("server start", 0.0) + time.time() - started
            started = time.time()
            workload = load_workload(load.prompts, load.seed)
            for i in range(load.warmup):
                body = {"model": model, "messages": workload.warmup_prompt(i).as_messages()}
                _post_json(url + "/v1/chat/completions", {**body, "max_tokens": load.max_tokens, "temperature": 0})
            run.phases["warm-up"] = run.phases.get("warm-up", 0.0) + time.time() - started
            for point in deployment.load_points:
                run.points.append(_peer_point(point, deployment, work, round_, url, model, python, tokenizer, load))
                loads.append(os.getloadavg()[0])
                t = run.points[-1]
                run.client_cpu_s += t["client_cpu_s"]
                measured = t["tool"]["duration_s"] or 0.0
                run.phases["measured windows"] = run.phases.get("measured windows", 0.0) + measured
                outside = t["process_wall_s"] - measured
                run.phases["bench_serving outside its window"] = (
                    run.phases.get("bench_serving outside its window", 0.0) + outside
                )
                run.exit = run.exit or t["exit"]
                run.client_peak_mib = max(run.client_peak_mib, t["client_peak_mib"])
                if run.first_point_end_s is None:
                    run.first_point_end_s = t["ended"] - t0
                    run.first_point_start_s = t["ended"] - t0 - (t["tool"]["duration_s"] or 0)
        finally:
            _stop(server)
    run.wall_s = time.time() - t0
    run.load_avg = [min(loads), max(loads)]
    return run


def _peer_point(
    point: Any, deployment: Any, work: Path, round_: int, url: str, model: str, python: str, tokenizer: str, load: Any
) -> dict[str, Any]:
    from orchestrator.load.workloads import load_workload

    requests = point.requests or 0
    workload = load_workload(load.prompts, point.seed if point.seed is not None else load.seed)
    dataset = work / f"peer-{round_}-{point.id}.prompts.jsonl"
    rows = [
        {"messages": workload.prompt(i).as_messages(), "max_tokens": load.max_tokens, "temperature": load.temperature}
        for i in range(requests)
    ]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = work / f"peer-{round_}-{point.id}.result.jsonl"
    argv = [
        python, "-m", "sglang.bench_serving", "--backend", "sglang-oai-chat", "--base-url", url,
        "--model", model, "--tokenizer", tokenizer, "--dataset-name", "openai", "--dataset-path", str(dataset),
        "--num-prompts", str(requests), "--max-concurrency", str(point.concurrency), "--disable-ignore-eos",
        "--flush-cache", "--warmup-requests", "0", "--disable-tqdm", "--output-file", str(out),
    ]  # fmt: skip
    log = (work / f"peer-{round_}-{point.id}.client.log").open("w")
    before = _get(url + "/metrics")
    started = time.time()
    proc = subprocess.Popen(argv, stdout=log, stderr=log, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    ended = time.time()
    after = _get(url + "/metrics")
    result = json.loads(out.read_text().splitlines()[-1]) if out.exists() and out.read_text().strip() else {}
    figures = bench_serving_figures(result)
    window = referee(counter_deltas(before, after), figures["duration_s"])
    window["accept_len_tool_definition"] = window["accept_len"]
    return {
        "config": deployment.config_label,
        "concurrency": point.concurrency,
        "tool": figures,
        "counters": window,
        "client_cpu_s": usage.ru_utime + usage.ru_stime,
        "client_peak_mib": usage.ru_maxrss / 1024,
        "exit": proc.returncode,
        "ended": ended,
        "process_wall_s": ended - started,
    }


# ---- report -------------------------------------------------------------------------------------------------------


def _cell(value: Any, digits: int = 2) -> str:
    return "-" if value is None else (f"{value:.{digits}f}" if isinstance(value, float) else str(value))


def report(runs: list[ToolRun]) -> str:
    lines = [
        "| round | tool | exit | wall s | first point starts s | ends s | restarts | points | client CPU s "
        "| CPU s / point | peak MiB | load avg (min-max) | phases s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in runs:
        n = max(len(r.points), 1)
        ph = ", ".join(f"{k} {v:.0f}" for k, v in r.phases.items())
        lines.append(
            f"| {r.round} | {r.tool} | {r.exit} | {r.wall_s:.0f} | {_cell(r.first_point_start_s, 0)} | "
            f"{_cell(r.first_point_end_s, 0)} | {r.restarts} | {len(r.points)} | {r.client_cpu_s:.1f} | "
            f"{r.client_cpu_s / n:.2f} | {r.client_peak_mib:.0f} | "
            f"{r.load_avg[0]:.1f}-{r.load_avg[1]:.1f} | {ph} |"
        )
    lines += [
        "",
        "Per point, tool / counters (accept length: the tool's own definition; tok/s by the counters: their tokens "
        "over the tool's duration):",
        "",
        "| round | tool | configuration | C | requests | output tokens | tok/s | accept len | TTFT ms | TPOT ms |",
        "|---:|---|---|---:|---|---|---|---|---|---|",
    ]
    for r in runs:
        for p in r.points:
            t, c = p["tool"], dict(p["counters"], accept_len=p["counters"]["accept_len_tool_definition"])
            cells = []
            for f in FIGURES:
                digits = {"requests": 0, "output_tokens": 0, "accept_len": 4, "tok_s": 2}.get(f, 1)
                mark = {True: "", False: " ✗", None: ""}[agrees(f, t.get(f), c.get(f))]
                cells.append(f"{_cell(_num(t.get(f)), digits)} / {_cell(_num(c.get(f)), digits)}{mark}")
            lines.append(f"| {r.round} | {r.tool} | {p['config']} | {p['concurrency']} | " + " | ".join(cells) + " |")
    lines += ["", *verdict(runs)]
    return "\n".join(lines)


def _num(value: Any) -> Any:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def verdict(runs: list[ToolRun]) -> list[str]:
    def mean(tool: str, f: Any) -> float | None:
        vals = [f(r) for r in runs if r.tool == tool and f(r) is not None]
        return sum(vals) / len(vals) if vals else None

    out = ["Verdict (means over rounds; specsweep / bench_serving):"]
    for name, f in (
        ("client CPU s per point", lambda r: r.client_cpu_s / max(len(r.points), 1)),
        ("whole-grid wall s", lambda r: r.wall_s),
        ("time to the first measured point s (its start)", lambda r: r.first_point_start_s),
        ("time to the first measured point s (its end)", lambda r: r.first_point_end_s),
        ("client peak MiB", lambda r: r.client_peak_mib),
    ):
        a, b = mean("specsweep", f), mean("bench_serving", f)
        ratio = _cell(_ratio(a, b), 2)
        out.append(f"- {name}: specsweep {_cell(a, 1)}, bench_serving {_cell(b, 1)}, ratio {ratio}")
    for tool in ("specsweep", "bench_serving"):
        for figure in ("output_tokens", "tok_s", "accept_len"):
            verdicts = []
            for r in runs:
                if r.tool != tool:
                    continue
                for p in r.points:
                    c = dict(p["counters"], accept_len=p["counters"]["accept_len_tool_definition"])
                    verdicts.append(agrees(figure, p["tool"].get(figure), c.get(figure)))
            judged = [v for v in verdicts if v is not None]
            out.append(f"- {tool} {figure}: equals the counters in {sum(judged)} of {len(judged)} windows")
    out.append("Where the wall time went (per run: outside the measured windows, and what it held):")
    for r in runs:
        windows = sum(p["tool"].get("duration_s") or 0.0 for p in r.points)
        held = ", ".join(f"{k} {v:.0f}" for k, v in r.phases.items() if k != "measured windows")
        out.append(
            f"- round {r.round} {r.tool}: {r.wall_s:.0f} s = measured windows {windows:.0f} + outside them "
            f"{r.wall_s - windows:.0f} ({held})"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", default=str(ROOT / "sweeps" / "sglang-cpu.yaml"), help="the shipped sweep file")
    parser.add_argument("--loads", default="", help="concurrencies, joined by commas (default: the file's)")
    parser.add_argument("--variants", default="", help="e.g. ar,ngram4 (default: the file's)")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of A then B")
    parser.add_argument("--order", default="AB", choices=["AB", "BA"], help="which tool runs first in a round")
    parser.add_argument("--out", default="", help="keep the work files here (default: a temporary directory)")
    parser.add_argument("--report", default="", help="only print the tables of a finished run's runs.json")
    options = parser.parse_args()
    if options.report:
        print(report([ToolRun(**r) for r in json.loads(Path(options.report).read_text())]))
        return
    if not os.environ.get("SGLANG_PYTHON") or not os.environ.get("SGLANG_MODEL"):
        parser.error('SGLANG_PYTHON and SGLANG_MODEL must be set: eval "$(bash scripts/get-sglang-cpu.sh)"; export ...')
    doc = yaml.safe_load(Path(options.sweep).read_text())
    try:
        loads = [int(x) for x in options.loads.split(",") if x]
        doc = trim_experiment(doc, loads, [v for v in options.variants.split(",") if v])
    except ValueError as exc:
        parser.error(str(exc))
    work = Path(options.out or tempfile.mkdtemp(prefix="specsweep-peers-"))
    work.mkdir(parents=True, exist_ok=True)
    runs: list[ToolRun] = []
    for round_ in range(1, options.repeats + 1):
        for which in options.order:
            run = run_specsweep(doc, work, round_) if which == "A" else run_peer(doc, work, round_)
            runs.append(run)
            print(f"round {round_} {run.tool}: {run.wall_s:.0f} s, exit {run.exit} {run.note}", flush=True)
            (work / "runs.json").write_text(json.dumps([r.__dict__ for r in runs], indent=1, default=str))
    print(report(runs))
    print(f"\nwork files: {work}")


if __name__ == "__main__":
    main()
