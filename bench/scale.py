"""The controller at scale: ``report``, ``compare``, ``recommend``, ``ls`` and a resume's planning of synthesised
run directories of 100 to 20,000 points, each command's wall time, CPU time and peak memory (its process's
maximum resident set and CPU seconds, from ``wait4``).

A run directory is written with the store's own API (``RunStore.create``/``append``) from the experiment's own
plan (``build_plan``): the autoregressive baseline and a grid of ``ddtree`` configurations (budget x topk) at eight
concurrencies with three repeats, one host, every point's record with its plan's point and deployment ids,
client figures and their standard errors (so the significance rules and the Pareto front with intervals do
their real work) and a server accept length. The commands, each its own process:

- ``report RUN`` (into the run, as a user runs it; it also keeps the run's ``answer.json``);
- ``compare RUN COPY`` (two runs of that size: the run and a hard-linked copy of it);
- ``recommend RUN``;
- ``sweep EXPERIMENT --resume RUN --dry-run``: a resume's reading of the records and planning of what is left
  (nothing: every point is final), without a host;
- ``ls --results ROOT -n 0`` of a results root holding the run 100 times (hard links, so each copy's
  ``answer.json`` is current, as a sweep's ending leaves it, when ``report`` ran before);
- ``ls-bare``: the same without ``answer.json`` (runs killed before their ending, or never reported).

``--loads 25`` gives each configuration 25 concurrencies (issue 49 measured at 25 loads, one latency chart
each); ``--heavy`` makes each record the size of a real sweep's (about 16 KB a line: the client's percentiles,
token sources and spec figures and the server's window, from tests/data/runs/sim-demo), which is what memory
per record is measured on; ``--template RUN`` makes each record one of a real run's, whole (a run of
sweeps/demo.yaml: about 33 KB a line, its server samples, Prometheus series and intervals), with its requests
file (every request's timings, which the report reads for its latency CDFs) and its server window, as a sweep
writes them (issue 58, N16); ``--commands`` picks which commands to time.

    python bench/scale.py                          # 100, 500, 1000, 2000, 5000, 10000, 20000 points
    python bench/scale.py --sizes 100,1000         # other sizes
    python bench/scale.py --profile 2000           # cProfile of the report at 2,000 points: the top costs
    python bench/scale.py --loads 25 --heavy --sizes 5000 --commands report,recommend,ls-bare
    specsweep sweep sweeps/demo.yaml --results /tmp/demo     # a real run to copy records from, then:
    python bench/scale.py --loads 25 --template /tmp/demo/demo/<run id> --sizes 1000,5000 --commands report

Results and the exact command lines: bench/RESULTS-scale.md.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.experiment.schema import parse_experiment  # noqa: E402
from orchestrator.plan.deployments import build_plan  # noqa: E402
from orchestrator.redaction import redact_json_line  # noqa: E402
from orchestrator.runs.recordindex import build_index  # noqa: E402
from orchestrator.runs.store import Record, RunStore  # noqa: E402

LOADS = [1, 2, 4, 8, 16, 32, 64, 128]
#: ``--loads 25``: this many concurrencies, 1 to 200 (issue 49 measured report at 25 loads, one latency chart each).
MANY_LOADS = 25
REPEATS = 3
LS_RUNS = 100


def loads_of(count: int) -> list[int]:
    """``count`` concurrencies: the bench's eight, or ``count`` distinct ones spread from 1 to about 200."""
    if count == len(LOADS):
        return list(LOADS)
    return sorted({max(1, round(200 ** (i / (count - 1)))) + i for i in range(count)})


def experiment_of(points: int, loads: list[int] | None = None) -> dict[str, Any]:
    """An experiment of about ``points`` points: AR and a budget x top-k grid of ddtree configurations (top-k
    1 to 4), every configuration at every load with every repeat."""
    loads = loads or LOADS
    per_config = len(loads) * REPEATS
    budgets = max(1, (points // per_config - 1) // 4)
    return {
        "name": "scale",
        "host": {"ssh": "root@gpu-box"},
        "service": {
            "kind": "systemd",
            "unit": "sglang.service",
            "exec_start": "python -m sglang.launch_server --port 30001 {spec_args}",
        },
        "server": {"url": "http://gpu-box:30001"},
        "engine": "sglang",
        "variants": {
            "autoregressive": {"spec_args": ""},
            "ddtree": {
                "spec_args": "--budget {budget} --topk {topk}",
                "matrix": {"budget": list(range(4, 4 + budgets)), "topk": [1, 2, 3, 4]},
            },
        },
        "baselines": ["autoregressive"],
        "load": {"concurrency": loads, "requests": 64, "repeats": REPEATS},
    }


#: ``--heavy``: each record's client and server as a real sweep's (tests/data/runs/sim-demo: about 16 KB a line,
#: its latency percentiles, token sources, spec figures and server window), its figures then set as below.
HEAVY_RUN = ROOT / "tests" / "data" / "runs" / "sim-demo" / "records.jsonl"


def _heavy_parts() -> dict[bool, tuple[dict[str, Any], dict[str, Any] | None]]:
    """(client, server) of a real baseline record and of a real speculative one, by ``baseline``."""
    import json

    out: dict[bool, tuple[dict[str, Any], dict[str, Any] | None]] = {}
    for line in HEAVY_RUN.read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        out.setdefault(bool(raw.get("baseline")), (raw.get("client") or {}, raw.get("server")))
    return out


class Template:
    """The records of a real run (``--template RUN``, e.g. a run of sweeps/demo.yaml) with each one's requests
    file and server window, by ``baseline``: each synthesised record is one of them in turn (its whole line:
    client, server with its samples and metrics, intervals, engine info, cache flush, machine), its identity,
    load and headline figures replaced, its requests file and window written beside it as the sweep writes
    them (the report reads every point's requests for its latency CDFs and goodput)."""

    def __init__(self, run_dir: Path) -> None:
        import json

        self.by_baseline: dict[bool, list[tuple[dict[str, Any], bytes | None, bytes | None]]] = {}
        for line in (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines():
            raw = json.loads(line)
            if raw.get("status") != "ok":
                continue
            files = []
            for key in ("requests_file", "window_file"):
                rel = raw.get(key)
                files.append((run_dir / rel).read_bytes() if rel and (run_dir / rel).is_file() else None)
            self.by_baseline.setdefault(bool(raw.get("baseline")), []).append((raw, files[0], files[1]))
        if set(self.by_baseline) != {False, True}:
            raise SystemExit(f"{run_dir}: the template needs a baseline and a speculative record that are ok")
        self.used = dict.fromkeys(self.by_baseline, 0)

    def record(self, store: RunStore, baseline: bool, fields: dict[str, Any]) -> Record:
        """The next template record of ``baseline``'s kind with ``fields`` set, its files written."""
        import copy

        choices = self.by_baseline[baseline]
        raw, requests, window = choices[self.used[baseline] % len(choices)]
        self.used[baseline] += 1
        raw = copy.deepcopy(raw)
        client, server = raw.get("client") or {}, raw.get("server")
        # The template's intervals scaled with the figures set (lo/hi/se about the new value).
        figures = (raw.get("intervals") or {}).get("figures") or {}
        for name, value in fields["client"].items():
            entry = figures.get(name)
            old = client.get(name)
            if isinstance(entry, dict) and isinstance(old, int | float) and old > 0:
                for key in ("value", "lo", "hi", "se"):
                    if isinstance(entry.get(key), int | float):
                        entry[key] = entry[key] * value / old
        client.update(fields.pop("client"))
        client["concurrency"] = fields["concurrency"]
        if server is not None and not baseline:
            server["accept_len"] = fields.pop("accept_len")
        fields.pop("accept_len", None)
        point = fields["point_id"]
        for key, data, folder, suffix in (
            ("requests_file", requests, "requests", ".jsonl"),
            ("window_file", window, "windows", ".log"),
        ):
            raw[key] = None
            if data is not None:
                (store.path / folder).mkdir(exist_ok=True)
                (store.path / folder / f"{point}{suffix}").write_bytes(data)
                raw[key] = f"{folder}/{point}{suffix}"
        raw.update(fields, client=client, server=server, aliases=[], baseline_source=None, attempt=1, restart=1)
        return Record.model_validate(raw)


def synthesise(
    root: Path,
    points: int,
    seed: int = 0,
    loads: int = len(LOADS),
    heavy: bool = False,
    template: Path | None = None,
) -> tuple[Path, Path]:
    """(run directory, experiment file) of about ``points`` points under ``root`` (see the module docstring) at
    ``loads`` concurrencies: every point of the plan recorded, so the run is complete. ``heavy``: each record
    the size of a real sweep's (:data:`HEAVY_RUN`); ``template``: each record one of that run's, with its
    requests file and window (:class:`Template`)."""
    rng = random.Random(seed)
    parts = _heavy_parts() if heavy else {}
    real = Template(template) if template else None
    raw = experiment_of(points, loads_of(loads))
    experiment_file = root / "scale.yaml"
    root.mkdir(parents=True, exist_ok=True)
    experiment_file.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    plan = build_plan(parse_experiment(raw, {}, str(experiment_file), read_secrets=False))
    store = RunStore.create(root, "scale", raw, plan.to_json_dict(), experiment_file=str(experiment_file))
    lines: list[str] = []
    for deployment in plan.deployments:
        baseline = deployment.variant == "autoregressive"
        gain = 1.0 if baseline else rng.uniform(0.8, 2.2)
        for point in deployment.load_points:
            load = point.concurrency or 1
            tok_s = 100.0 * load**0.7 * gain * rng.uniform(0.97, 1.03)
            if real is not None:
                fields = {
                    "run_id": store.run_id,
                    "experiment": "scale",
                    "deployment_id": deployment.id,
                    "point_id": point.id,
                    "config_hash": deployment.config_hash,
                    "host": "gpu-box",
                    "variant": deployment.variant,
                    "params": dict(deployment.params),
                    "mode": "concurrency",
                    "concurrency": load,
                    "repeat": point.repeat,
                    "baseline": baseline,
                    "accept_len": rng.uniform(1.5, 4.5),
                    # The latencies stay the template record's (its requests file holds them in full).
                    "client": {"output_tok_s": tok_s, "per_user_tok_s": tok_s / load},
                }
                # The line ``RunStore.append`` writes, written with the others at the end (not fsynced one by one:
                # 20,000 records of 33 KB took minutes to write).
                lines.append(redact_json_line(real.record(store, baseline, fields).model_dump_json()) + "\n")
                continue
            store.append(
                Record(
                    run_id=store.run_id,
                    experiment="scale",
                    deployment_id=deployment.id,
                    point_id=point.id,
                    config_hash=deployment.config_hash,
                    host="gpu-box",
                    variant=deployment.variant,
                    params=dict(deployment.params),
                    mode="concurrency",
                    concurrency=load,
                    repeat=point.repeat,
                    status="ok",
                    started_at="2026-01-01T00:00:00Z",
                    finished_at="2026-01-01T00:00:10Z",
                    baseline=baseline,
                    client={
                        **(parts[baseline][0] if heavy else {}),
                        "requests": 64,
                        "output_tok_s": tok_s,
                        "output_tok_s_se": tok_s * 0.01,
                        "per_user_tok_s": tok_s / load,
                        "per_user_tok_s_se": tok_s / load * 0.01,
                        "ttft_ms_p50": 20.0 * load**0.5,
                        "tpot_ms_p50": 1000.0 / max(tok_s / load, 1e-9),
                    },
                    server=(
                        {**(parts[baseline][1] or {}), "accept_len": rng.uniform(1.5, 4.5)}
                        if heavy and not baseline
                        else (None if baseline else {"engine": "sglang", "accept_len": rng.uniform(1.5, 4.5)})
                    ),
                )
            )
    if lines:
        with (store.path / "records.jsonl").open("a", encoding="utf-8") as out:
            out.writelines(lines)
        build_index(store.path)  # as the store's append writes it line by line (runs/recordindex.py)
    store.set_state("done")
    store.release()
    return store.path, experiment_file


def _measure(
    args: list[str], env: dict[str, str], timeout: float, cwd: Path = ROOT
) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, peak resident MiB, exit code) of one CLI command run in the tree ``cwd``
    (exit -9: timed out)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - started > timeout:
            proc.kill()
            _pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code


def profile_report(run_dir: Path, top: int = 15) -> str:
    """The top cumulative costs of building the report of ``run_dir`` (in this process)."""
    from orchestrator.report import build_report

    profiler = cProfile.Profile()
    profiler.enable()
    build_report(run_dir, out_dir=run_dir.parent / "profiled-report")
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


COMMANDS = ("report", "compare", "recommend", "resume", "ls", "ls-bare")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,500,1000,2000,5000,10000,20000")
    parser.add_argument("--loads", type=int, default=len(LOADS), help="concurrencies per configuration (25: issue 49)")
    parser.add_argument("--heavy", action="store_true", help="records the size of a real sweep's (16 KB a line)")
    parser.add_argument(
        "--template", type=Path, default=None, help="each record one of this run's (e.g. a run of sweeps/demo.yaml)"
    )
    parser.add_argument("--commands", default=",".join(COMMANDS), help="which commands to time, joined by commas")
    parser.add_argument("--profile", type=int, default=0, help="profile report at this many points instead")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one command may take")
    options = parser.parse_args()
    commands = [c for c in options.commands.split(",") if c]
    unknown = sorted(set(commands) - set(COMMANDS))
    if unknown:
        parser.error(f"unknown command(s) {', '.join(unknown)}; known: {', '.join(COMMANDS)}")
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "160"}
    with tempfile.TemporaryDirectory(prefix="specsweep-scale-") as tmp:
        if options.profile:
            run_dir, _file = synthesise(
                Path(tmp) / "results",
                options.profile,
                loads=options.loads,
                heavy=options.heavy,
                template=options.template,
            )
            print(profile_report(run_dir))
            return
        kind = f", records of {options.template}" if options.template else ", heavy records" if options.heavy else ""
        print(f"{options.loads} loads{kind}. Each cell: wall s / CPU s / peak MiB.", flush=True)
        print("| points | KB a line | " + " | ".join(commands) + " |")
        print("|---:|---:|" + "---:|" * len(commands), flush=True)
        for size in (int(s) for s in options.sizes.split(",")):
            root = Path(tmp) / f"results-{size}"
            run_dir, experiment_file = synthesise(
                root, size, loads=options.loads, heavy=options.heavy, template=options.template
            )
            points = sum(1 for _ in (run_dir / "records.jsonl").open("rb"))
            results: dict[str, tuple[float, float, float, int]] = {}
            for name in commands:
                results[name] = _run(name, run_dir, experiment_file, Path(tmp), env, options.timeout)
            line_kb = (run_dir / "records.jsonl").stat().st_size / max(points, 1) / 1024
            cells = [str(points), f"{line_kb:.1f}"]
            for name in commands:
                wall, cpu, mib, code = results[name]
                note = "" if code == 0 else (" (timed out)" if code == -9 else f" (exit {code})")
                cells.append(f"{wall:.1f} / {cpu:.1f} / {mib:.0f}{note}")
            print("| " + " | ".join(cells) + " |", flush=True)
            shutil.rmtree(root)


def _run(
    name: str, run_dir: Path, experiment_file: Path, tmp: Path, env: dict[str, str], timeout: float
) -> tuple[float, float, float, int]:
    """Time one of :data:`COMMANDS` on ``run_dir``. ``report`` keeps the run's ``answer.json``, so ``ls`` (which
    copies the run with it) reads current counts when ``report`` ran first; ``ls-bare`` copies it without
    ``answer.json`` (a run killed before its ending, or never reported)."""
    if name == "report":
        return _measure(["report", str(run_dir), "-q"], env, timeout)
    if name == "compare":
        copy = run_dir.with_name(f"{run_dir.name}-copy")
        if not copy.exists():
            shutil.copytree(run_dir, copy, copy_function=os.link)
        return _measure(["compare", str(run_dir), str(copy)], env, timeout)
    if name == "recommend":
        return _measure(["recommend", str(run_dir)], env, timeout)
    if name == "resume":
        return _measure(["sweep", str(experiment_file), "--resume", str(run_dir), "--dry-run"], env, timeout)
    listing = tmp / f"{name}-{run_dir.name}"
    ignore = shutil.ignore_patterns("answer.json")
    for index in range(LS_RUNS):
        target = listing / "scale" / f"20260101T{index:06d}Z-copy"
        shutil.copytree(run_dir, target, copy_function=os.link, ignore=ignore if name == "ls-bare" else None)
    try:
        return _measure(["ls", "--results", str(listing), "-n", "0"], env, timeout)
    finally:
        shutil.rmtree(listing)


if __name__ == "__main__":
    main()
