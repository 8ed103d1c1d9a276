"""Issue 17's acceptance figures: do the intervals cover the truth, and what adaptive stopping saves.

    .venv/bin/python bench/trust.py coverage [--windows 25]     accept-length coverage of >= 200 seeded windows
    .venv/bin/python bench/trust.py adaptive [--rel-ci 0.02]    measuring time: adaptive against a fixed count
    .venv/bin/python bench/trust.py demo                        the demo sweep's wall time, winners, lossless

Every sweep is ``specsweep sweep`` on the simulator (a local process, ``tiny`` profile) through the Python API,
into a temporary results directory.

**coverage**: eight speculative configurations (linear 2, 3, 5 and 7 drafts; DDTree budget/top-k 7/1, 8/2, 16/4,
32/8), each its own server seed, at C=2, ``--windows`` repeats each (8 x 25 = 200 windows; every window's
requests are new draws: its own workload seed, so its own prompts),
``synthetic:in=32,out=64`` prompts (fresh words per request, ``ignore_eos``: every answer 64 tokens) at
temperature 0, 32 requests a window. The simulator's acceptance is its only noise here, at a level the profile
sets; its truth is ``SimConfig.expected_accept_length(max_tokens=64, ignore_eos=True)``. A window's 95% interval
(bootstrap over its requests) covers the truth or not; the share that does is the coverage, with its binomial
standard error. Both the interval the record keeps (the per-response figures) and the one the frame shows
(carried over to the server's log-window accept length) are counted.

**adaptive**: six points of very different noise (AR, linear 7 and DDTree 16/4 at C=1 and C=8, each decode
step's time jittered by ``--step-jitter 0.3``), throughput as the headline figure. First every point runs with
``until: {rel_ci, min_requests: 16, max_requests: 4000}``; then the fixed count a user would have to pick so
that even the worst point reaches the target is that point's count, and every point runs with it. The
measuring time is the sum of the points' load durations (the client's ``duration_s``: warm-up, restarts and
the lossless probe excluded, which are the same in both).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.analysis import analyse  # noqa: E402
from orchestrator.experiment.schema import load_experiment  # noqa: E402
from orchestrator.runs.store import RunStore  # noqa: E402
from orchestrator.sim.config import parse_args  # noqa: E402
from orchestrator.sweep.runner import SweepOptions, run_sweep  # noqa: E402

PORT = 18431


def _experiment(name: str, variants: dict[str, str], load: dict[str, Any], extra: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "host": "local",
        "service": {
            "kind": "process",
            "command": f"{{python}} -m orchestrator.sim --host 127.0.0.1 --port {PORT} --profile tiny "
            f"--load-seconds 0 --decode-log-interval 4 {extra}{{spec_args}}",
        },
        "server": {
            "url": f"http://127.0.0.1:{PORT}",
            "model": "sim",
            "ready_timeout": "30s",
            "expected_load_time": "1s",
        },
        "engine": "sim",
        "variants": {k: {"spec_args": v} for k, v in variants.items()},
        "baselines": [next(iter(variants))],
        "load": load,
        "lossless": {"enabled": False},
    }


def _sweep(doc: dict[str, Any], root: Path) -> Path:
    path = root / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = run_sweep(load_experiment(path), SweepOptions(results_root=root / "results"))
    return result.run_dir


def coverage(windows: int) -> dict[str, Any]:
    shapes = {
        "linear2": "--algorithm linear --draft-tokens 2",
        "linear3": "--algorithm linear --draft-tokens 3",
        "linear5": "--algorithm linear --draft-tokens 5",
        "linear7": "--algorithm linear --draft-tokens 7",
        "tree7x1": "--algorithm ddtree --budget 7 --topk 1",
        "tree8x2": "--algorithm ddtree --budget 8 --topk 2",
        "tree16x4": "--algorithm ddtree --budget 16 --topk 4",
        "tree32x8": "--algorithm ddtree --budget 32 --topk 8",
    }
    # Each configuration its own server seed: the acceptance draws of one never repeat another's.
    configs = {name: f"{args} --seed {100 + i}" for i, (name, args) in enumerate(shapes.items())}
    truth = {
        name: parse_args([*args.split(), "--profile", "tiny"]).expected_accept_length(max_tokens=64, ignore_eos=True)
        for name, args in configs.items()
    }
    load = {
        "concurrency": [2],
        "warmup": 1,
        "requests": 32,
        "max_tokens": 64,
        "temperature": 0,
        "prompts": "synthetic:in=32,out=64",
        "repeats": windows,
    }
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        run = _sweep(_experiment("coverage", configs, load), Path(tmp))
        records = RunStore.open(run).records()
        frame = analyse(run).run.windows
    assert frame is not None
    seconds = time.monotonic() - started
    rows = []
    for record in records:
        interval = ((record.intervals or {}).get("figures") or {}).get("accept_len")
        if record.status != "ok" or not interval:
            continue
        t = truth[record.variant]
        rows.append((record.variant, record.concurrency, interval["lo"] <= t <= interval["hi"], interval))
    shown = frame[frame["status"] == "ok"]
    shown_hits = [
        lo <= truth[v] <= hi
        for v, lo, hi in zip(shown["variant"], shown["accept_len_lo"], shown["accept_len_hi"], strict=True)
        if lo == lo and hi == hi
    ]
    n = len(rows)
    hits = sum(r[2] for r in rows)
    by_config: dict[str, list[bool]] = {}
    for variant, concurrency, hit, _interval in rows:
        by_config.setdefault(f"{variant} C={concurrency}", []).append(hit)
    widths = [(r[3]["hi"] - r[3]["lo"]) / 2 / truth[r[0]] for r in rows]
    return {
        "windows": n,
        "covered": hits,
        "coverage": hits / n if n else math.nan,
        "coverage_se": math.sqrt(hits / n * (1 - hits / n) / n) if n else math.nan,
        "shown_windows": len(shown_hits),
        "shown_coverage": sum(shown_hits) / len(shown_hits) if shown_hits else math.nan,
        "truth": {k: round(v, 4) for k, v in truth.items()},
        "by_config": {k: f"{sum(v)}/{len(v)}" for k, v in by_config.items()},
        "mean_rel_halfwidth": sum(widths) / len(widths) if widths else math.nan,
        "seconds": round(seconds, 1),
    }


def adaptive(rel_ci: float) -> dict[str, Any]:
    configs = {
        "ar": "--algorithm ar",
        "linear7": "--algorithm linear --draft-tokens 7",
        "tree16x4": "--algorithm ddtree --budget 16 --topk 4",
    }
    base = {"concurrency": [1, 8], "warmup": 2, "max_tokens": 64, "temperature": 0}
    jitter = "--step-jitter 0.3 --itl-ms 0.4 "
    out: dict[str, Any] = {"rel_ci": rel_ci}
    with tempfile.TemporaryDirectory() as tmp:
        until = {**base, "until": {"rel_ci": rel_ci, "min_requests": 16, "max_requests": 4000}}
        run = _sweep(_experiment("adaptive", configs, until, jitter), Path(tmp))
        points = _points(run)
        worst = max(p["requests"] for p in points)
        out["adaptive"] = points
        fixed = {**base, "requests": worst}
        run = _sweep(_experiment("fixed", configs, fixed, jitter), Path(tmp))
        out["fixed"] = _points(run)
    a = sum(p["seconds"] for p in out["adaptive"])
    f = sum(p["seconds"] for p in out["fixed"])
    out["fixed_count"] = worst
    out["adaptive_seconds"] = round(a, 2)
    out["fixed_seconds"] = round(f, 2)
    out["saved"] = 1 - a / f if f else math.nan
    out["adaptive_requests"] = sum(p["requests"] for p in out["adaptive"])
    out["fixed_requests"] = sum(p["requests"] for p in out["fixed"])
    return out


def _points(run: Path) -> list[dict[str, Any]]:
    out = []
    for record in RunStore.open(run).records():
        client = record.client or {}
        interval = ((record.intervals or {}).get("figures") or {}).get("output_tok_s") or {}
        value = interval.get("value") or 0
        out.append(
            {
                "point": f"{record.variant} C={record.concurrency}",
                "requests": client.get("requests"),
                "seconds": client.get("duration_s") or 0.0,
                "stopped_by": client.get("stopped_by"),
                "rel_halfwidth": round((interval["hi"] - interval["lo"]) / 2 / value, 4) if value else None,
            }
        )
    return out


def demo(fault: bool = False) -> dict[str, Any]:
    """The demo sweep as shipped; with ``fault``, its DDTree configurations accept wrong drafts
    (``--fault wrong-token``), the baselines untouched."""
    from orchestrator.analysis.answer import answer_of
    from orchestrator.report import tables

    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        path = ROOT / "sweeps" / "demo.yaml"
        if fault:
            doc = yaml.safe_load(path.read_text())
            doc["variants"]["ddtree"]["spec_args"] += " --fault wrong-token"
            doc["name"] = "demo-wrong-token"
            doc.pop("results_dir", None)
            path = Path(tmp) / "demo-wrong-token.yaml"
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
        experiment = load_experiment(path)
        result = run_sweep(experiment, SweepOptions(results_root=Path(tmp)))
        seconds = time.monotonic() - started
        analysis = analyse(result.run_dir)
        lossless = [
            f"{f.severity}: {f.config or 'run'}: {f.message}" for f in analysis.findings if f.check == "lossless"
        ]
        return {"seconds": round(seconds, 1), "headline": tables.headline(answer_of(analysis)), "lossless": lossless}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    cov = sub.add_parser("coverage")
    cov.add_argument("--windows", type=int, default=25, help="repeats per configuration (25: 200 windows)")
    ada = sub.add_parser("adaptive")
    ada.add_argument("--rel-ci", type=float, default=0.02)
    dem = sub.add_parser("demo")
    dem.add_argument("--fault", action="store_true", help="the DDTree configurations accept wrong drafts")
    args = parser.parse_args()
    if args.what == "coverage":
        result = coverage(args.windows)
    elif args.what == "adaptive":
        result = adaptive(args.rel_ci)
    else:
        result = demo(args.fault)
    print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
