"""Writes the hand-made run directories under tests/data/runs/ (run it again after changing a number here).

    python tests/data/runs/make_fixtures.py

Both runs are the motivating sweep of DOMAIN.md (Kimi K2.6 on SGLang: AR and linear DFlash baselines, DDTree
budget x topk, C = 1, 8, 32, 128), planned by the real planner so ids and commands are what a sweep writes.

- ``field-report/``: the field report's numbers. Every tree commits at most 2 tokens a step although its
  walk reaches deeper (the commit-path bug): DDTree budget=7 topk=1 prints
  ``avg_accepted_depth=5.00`` with ``avg_commit_len=2.00`` and runs at 109.7 tok/s (1.12x AR) at C=1;
  budget=32 topk=8 accepts about 1.5 tokens and runs at about 50 tok/s at C=1. One point died (CUDA OOM)
  and one had request timeouts.
- ``clean/``: the same sweep with well-formed numbers: every tree commits what it accepts, top-k=1 trees
  match the linear chain, wider trees accept more than it, client and server agree, nothing failed.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deployments import Deployment, LoadPoint, build_plan
from orchestrator.runs.store import RUN_SCHEMA_VERSION, Record, RunInfo

HERE = Path(__file__).resolve().parent

EXPERIMENT = """\
name: k26-ddtree
description: DDTree budget x topk against AR and linear DFlash on Kimi K2.6 (SGLang, TP 8)
host: {ssh: root@gpu-box}
service:
  kind: systemd
  unit: sglang-k26.service
  exec_start: >-
    /opt/venv/bin/python -m sglang.launch_server --model-path /models/Kimi-K2.6 --tp 8
    --port 30001 {spec_args}
server:
  url: "http://gpu-box:30001"
  model: /models/Kimi-K2.6
  ready_timeout: 900s
  expected_load_time: 8m
  expected_tokens_per_second: 90
engine: sglang
variants:
  autoregressive: {spec_args: ""}
  linear: {spec_args: "--speculative-algorithm DFLASH --speculative-num-draft-tokens 16"}
  ddtree:
    spec_args: "--speculative-algorithm DDTREE --speculative-ddtree-budget {budget} --speculative-ddtree-topk {topk}"
    matrix: {budget: [7, 16, 32], topk: [1, 4, 8]}
baselines: [autoregressive, linear]
load: {concurrency: [1, 8, 32, 128], warmup: 3, requests: 64, max_tokens: 256, temperature: 0}
checks: {chain_tolerance: 0.10}
"""

HOST = "root@gpu-box"
MAX_TOKENS = 256
REQUESTS = 64
LOADS = (1, 8, 32, 128)

AR_TPS = {1: 98.0, 8: 610.0, 32: 1540.0, 128: 2900.0}
LINEAR_TPS = {1: 86.0, 8: 655.0, 32: 2050.0, 128: 4400.0}
LINEAR_ACCEPT = {1: 3.78, 8: 3.71, 32: 3.66, 128: 3.60}

# clean: (budget, topk) -> (accept length at C=1, tok/s per C); accept drifts down 1% per level of C.
CLEAN_TREES: dict[tuple[int, int], tuple[float, tuple[float, ...]]] = {
    (7, 1): (3.47, (104.0, 690.0, 2010.0, 4100.0)),
    (7, 4): (3.22, (112.0, 700.0, 1900.0, 3500.0)),
    (7, 8): (3.05, (108.0, 650.0, 1750.0, 3100.0)),
    (16, 1): (3.77, (90.0, 660.0, 2040.0, 4350.0)),
    (16, 4): (4.05, (118.0, 760.0, 2150.0, 3900.0)),
    (16, 8): (3.98, (114.0, 730.0, 2000.0, 3500.0)),
    (32, 1): (3.79, (84.0, 640.0, 1990.0, 4200.0)),
    (32, 4): (4.31, (121.0, 720.0, 1950.0, 3300.0)),
    (32, 8): (4.46, (123.0, 700.0, 1800.0, 2900.0)),
}
# field report: committed tokens per step (at most 2) and the depth the walk reported.
FIELD_TREES: dict[tuple[int, int], tuple[float, float]] = {
    (7, 1): (2.00, 5.00),
    (7, 4): (1.82, 3.10),
    (7, 8): (1.70, 2.90),
    (16, 1): (1.96, 6.20),
    (16, 4): (1.76, 3.60),
    (16, 8): (1.63, 3.40),
    (32, 1): (1.93, 6.90),
    (32, 4): (1.68, 3.90),
    (32, 8): (1.52, 3.70),
}


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _latency(p50: float, *, p90: float = 1.5, p99: float = 2.4, mean: float = 1.15) -> dict[str, float]:
    return {"mean": round(p50 * mean, 2), "p50": round(p50, 2), "p90": round(p50 * p90, 2), "p99": round(p50 * p99, 2)}


def _client(c: int, tps: float, accept: float | None, budget: int, errors: int = 0) -> dict[str, Any]:
    done = REQUESTS - errors
    tokens = done * MAX_TOKENS
    duration = tokens / tps
    per_user = tps / c * 1.03
    ttft = 120.0 + 9.0 * c + 2.0 * budget
    itl = 1000.0 / per_user
    return {
        "mode": "concurrency",
        "concurrency": c,
        "requests": REQUESTS,
        "errors": errors,
        "errors_by_kind": {"timeout": errors} if errors else {},
        "output_tokens": tokens,
        "duration_s": round(duration, 3),
        "output_tok_s": round(tps, 2),
        "steady_output_tok_s": round(tps * 1.02, 2),
        "per_user_tok_s": round(per_user, 2),
        "requests_per_s": round(done / duration, 3),
        "ttft_ms": _latency(ttft),
        "itl_ms": _latency(itl, p90=1.3, p99=2.6, mean=1.0),
        "tpot_ms": _latency(itl * 1.01, p90=1.2, p99=1.6, mean=1.0),
        "e2e_ms": _latency(ttft + MAX_TOKENS * itl, p90=1.2, p99=1.5, mean=1.02),
        "spec": None
        if accept is None
        else {
            "accept_len": round(accept * 0.99, 3),
            "verify_steps": int(tokens / (accept * 0.99)),
            "draft_n": None,
            "draft_n_accepted": None,
        },
    }


def _server(
    tps: float, accept: float | None, drafts: int, ddtree: dict[str, float] | None, prometheus: bool
) -> dict[str, Any]:
    rate = None if accept is None else round((accept - 1) / drafts, 3)
    tree = {"avg_actual_nodes": None, "avg_accepted_drafts": None, "avg_commit_len": None, "avg_accepted_depth": None}
    out: dict[str, Any] = {
        "engine": "sglang",
        "lines_total": 40,
        "lines_matched": 24 if ddtree else 12,
        "lines_skipped": 0,
        "lines_duplicate": 0,
        "accept_len": accept,
        "acceptance_rate": rate,
        "gen_throughput": round(tps * 1.04, 2),
        **tree,
        **(ddtree or {}),
        "ddtree_lines": 12 if ddtree else 0,
        "details": {"decode_lines": 12, "lines_with_accept_len": 0 if accept is None else 12},
        "user_parsers": {},
        "samples": [],
        "skipped_examples": [],
    }
    if prometheus:
        out["prometheus"] = {
            "engine": "sglang",
            "source": "prometheus",
            "accept_len": None if accept is None else round(accept * 1.01, 3),
            "acceptance_rate": rate,
            "gen_throughput": round(tps * 0.98, 2),
            "per_position_acceptance": None,
            "elapsed_s": round(REQUESTS * MAX_TOKENS / tps, 3),
            "counters": {},
            "gauges": {},
            "resets": [],
            "lines_skipped": 0,
            "details": {},
        }
    return out


def _window(t: datetime, c: int, tps: float, accept: float | None, drafts: int, ddtree: str | None) -> str:
    lines = []
    for i in range(12):
        stamp = (t + timedelta(seconds=4 * (i + 1))).strftime("%Y-%m-%d %H:%M:%S")
        head = f"[{stamp} TP0] Decode batch, #running-req: {c}, #token: {c * 900}, token usage: {c / 400:.2f}, "
        spec = "" if accept is None else f"accept len: {accept:.2f}, accept rate: {(accept - 1) / drafts:.2f}, "
        lines.append(f"{head}{spec}cuda graph: True, gen throughput (token/s): {tps * 1.04:.2f}, #queue-req: 0,")
        if ddtree:
            lines.append(f"[{stamp} TP0] {ddtree}")
    return "\n".join(lines) + "\n"


OOM_EVIDENCE = [
    "May 30 03:12:44 gpu-box python[4121]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
    "2.50 GiB. GPU 3 has a total capacity of 79.10 GiB of which 1.21 GiB is free.",
    "May 30 03:12:44 gpu-box python[4121]: [2026-05-30 03:12:44 TP3] Scheduler hit an exception",
    "May 30 03:12:46 gpu-box systemd[1]: sglang-k26.service: Main process exited, code=exited, status=1/FAILURE",
    "May 30 03:12:46 gpu-box systemd[1]: sglang-k26.service: Failed with result 'exit-code'.",
]


def _figures(
    kind: str, deployment: Deployment, point: LoadPoint
) -> tuple[float, float | None, int, dict[str, float] | None, str | None]:
    """(tok/s, accept length, drafts per step, ddtree averages, ddtree line) of one point."""
    c = point.concurrency or 1
    index = LOADS.index(c)
    if deployment.variant == "autoregressive":
        return AR_TPS[c], None, 1, None, None
    if deployment.variant == "linear":
        return LINEAR_TPS[c], LINEAR_ACCEPT[c], 15, None, None
    budget, topk = int(deployment.params["budget"]), int(deployment.params["topk"])
    if kind == "clean":
        accept0, tps_by_load = CLEAN_TREES[(budget, topk)]
        accept = round(accept0 * (1 - 0.01 * index), 3)
        tps = tps_by_load[index]
        depth = accept - 1
    else:
        accept, depth = FIELD_TREES[(budget, topk)]
        cost = 1.507 + 0.03 * budget + 0.07 * topk  # 109.7 tok/s for budget=7 topk=1 at C=1
        tps = round(AR_TPS[c] * accept / cost * (1 - 0.04 * index * budget / 32), 1)
    nodes = budget + 1
    averages = {
        "avg_bs": float(c),
        "avg_budget": float(budget),
        "avg_actual_nodes": float(nodes),
        "avg_accepted_drafts": round(accept if kind != "clean" else accept - 1, 2),
        "avg_commit_len": round(accept, 2),
        "avg_accepted_depth": round(depth, 2),
    }
    line = (
        f"DDTREE metrics: bs={c} budget={budget} avg_actual_nodes={nodes:.2f} "
        f"avg_accepted_drafts={averages['avg_accepted_drafts']:.2f} avg_commit_len={accept:.2f} "
        f"avg_accepted_depth={depth:.2f}"
    )
    return tps, accept, budget, averages, line


def write_run(kind: str, run_id: str, start: datetime, out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "k26-ddtree.yaml"
        source.write_text(EXPERIMENT)
        experiment = load_experiment(source)
    plan = build_plan(experiment)
    if out.exists():
        shutil.rmtree(out)
    (out / "windows").mkdir(parents=True)
    (out / "experiment.yaml").write_text(
        yaml.safe_dump(experiment.model_dump(mode="json", exclude_none=True), sort_keys=False)
    )
    (out / "plan.json").write_text(json.dumps(plan.to_json_dict(), indent=2) + "\n")
    records: list[str] = []
    events: list[dict[str, Any]] = []
    t = start
    for deployment in plan.deployments:
        events.append({"time": _iso(t), "kind": "deploy", "host": HOST, "deployment": deployment.id, "attempt": 1})
        t += timedelta(seconds=480)
        events.append({"time": _iso(t), "kind": "healthy", "host": HOST, "deployment": deployment.id, "seconds": 480.0})
        for point in deployment.load_points:
            c = point.concurrency or 1
            tps, accept, drafts, averages, ddtree_line = _figures(kind, deployment, point)
            budget = int(deployment.params.get("budget", 0))
            failed = kind == "field" and deployment.params == {"budget": 16, "topk": 8} and c == 128
            errors = 3 if kind == "field" and deployment.params == {"budget": 32, "topk": 4} and c == 128 else 0
            begin = t
            t += timedelta(seconds=REQUESTS * MAX_TOKENS / tps + 4)
            window = _window(begin, c, tps, accept, drafts, ddtree_line)
            if failed:
                window = window.splitlines()[0] + "\n" + "\n".join(OOM_EVIDENCE) + "\n"
            rel = f"windows/{point.id}.log"
            (out / rel).write_text(window)
            record = Record(
                run_id=run_id,
                experiment=experiment.name,
                deployment_id=deployment.id,
                point_id=point.id,
                config_hash=deployment.config_hash,
                host=HOST,
                variant=deployment.variant,
                params=dict(deployment.params),
                aliases=[a.model_dump() for a in deployment.aliases],
                baseline=deployment.baseline,
                mode=point.mode,
                concurrency=point.concurrency,
                rate=point.rate,
                status="failed" if failed else "ok",
                started_at=_iso(begin),
                finished_at=_iso(t),
                client=None if failed else _client(c, tps, accept, budget, errors),
                server=None if failed else _server(tps, accept, drafts, averages, prometheus=kind == "clean"),
                error={
                    "kind": "server_died",
                    "message": "the server stopped during the point",
                    "evidence": OOM_EVIDENCE,
                }
                if failed
                else None,
                window_file=rel,
            )
            records.append(record.model_dump_json())
        events.append({"time": _iso(t), "kind": "restore", "host": HOST})
    (out / "records.jsonl").write_text("\n".join(records) + "\n")
    (out / "events.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    info = RunInfo(
        schema_version=RUN_SCHEMA_VERSION,
        specsweep_version="0.1.0",
        run_id=run_id,
        experiment=experiment.name,
        controller={"hostname": "laptop", "user": "engineer"},  # type: ignore[arg-type]
        started_at=_iso(start),
        ended_at=_iso(t),
        state="done",
    )
    (out / "run.json").write_text(info.model_dump_json(indent=2) + "\n")


def main() -> None:
    write_run("field", "20260530T003000Z-f1e1d5", datetime(2026, 5, 30, 0, 30, tzinfo=UTC), HERE / "field-report")
    write_run("clean", "20260601T090000Z-c1ea45", datetime(2026, 6, 1, 9, 0, tzinfo=UTC), HERE / "clean")


if __name__ == "__main__":
    main()
