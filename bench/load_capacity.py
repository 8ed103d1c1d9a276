"""Capacity of the load generator against peer clients, all against one ``firehose`` simulator.

The firehose spends no time computing, so a client that streams from it is measured, not the server. Each
client runs as its own command, pinned to core 1 (the simulator to core 0), with every one of its processes
on that core: GuideLLM and AIPerf start worker processes, and they all share the one core as our single
process does. For each concurrency every client runs twice, with a small and a big request count, and:

- tokens/s is the client's own headline output throughput of the big run;
- CPU microseconds per token is (CPU(big) - CPU(small)) / (tokens(big) - tokens(small)), CPU being user +
  system time of the client and every process it started (so start-up costs, such as importing torch,
  cancel out and only the cost of streaming remains).

Peers run from their own virtualenv (``--peer-venv``, holding ``guidellm``, ``aiperf`` and ``sglang``; never the
project's), fully offline (``HF_HUB_OFFLINE=1``), with a tiny word-level tokenizer this script writes to a
temporary directory, since they insist on one. Run from the repository root:

    .venv/bin/python bench/load_capacity.py --peer-venv PEER_VENV [--levels 128,512] [--tokens 256]

Everything talks to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_common import ROOT, pinned, process_cpu_seconds, simulator

# No peer may reach past loopback: the Hugging Face hub is pointed at a closed loopback port, and offline mode
# is set for the tools that honour it. (AIPerf cannot load a tokenizer from a local path in offline mode, so
# it gets the loopback hub alone.)
LOOPBACK_HUB = {"HF_ENDPOINT": "http://127.0.0.1:9", "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"}
OFFLINE = {**LOOPBACK_HUB, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}

_TOKENIZER = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
from transformers import PreTrainedTokenizerFast
words = sys.argv[2].split()
vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2}
for w in words:
    vocab.setdefault(w, len(vocab))
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.decoder = decoders.WordPiece(prefix="##")
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>", eos_token="</s>").save_pretrained(
    sys.argv[1]
)
"""


@dataclass
class Run:
    client: str
    concurrency: int
    requests: int
    tokens: int  # output tokens the client asked for in total (measured + warm-up)
    cpu_s: float
    wall_s: float
    tok_s: float | None
    errors: str = ""
    round: int = 0
    server_cpu_s: float = 0.0


@dataclass
class Context:
    url: str
    server_pid: int
    python: str  # the project's interpreter
    peer_bin: Path
    tokenizer: str
    workdir: Path
    tokens: int


Client = tuple[list[str], Callable[[str], float], int, dict[str, str]]


def specsweep(ctx: Context, c: int, n: int) -> Client:
    command = [
        ctx.python, "-m", "orchestrator", "load", "--url", ctx.url, "--model", "sim", "--concurrency", str(c),
        "--requests", str(n), "--max-tokens", str(ctx.tokens), "--prompts", f"synthetic:in=32,out={ctx.tokens}",
        "--warmup", str(c), "--json",
    ]  # fmt: skip

    def parse(stdout: str) -> float:
        data = json.loads(stdout.strip().splitlines()[-1])
        if data["errors"]:
            raise RuntimeError(f"errors: {data['errors_by_kind']}")
        return float(data["output_tok_s"])

    return command, parse, c, OFFLINE


def guidellm(ctx: Context, c: int, n: int) -> Client:
    scenario = ctx.workdir / f"guidellm-{c}-{n}.json"
    output = ctx.workdir / f"guidellm-{c}-{n}-out.json"
    spec = {
        "metadata": {"name": f"firehose-{c}", "description": "capacity"},
        "spec": {
            "backend": {
                "kind": "openai_http",
                "target": ctx.url,
                "model": "sim",
                "request_format": "/v1/chat/completions",
            },
            "profile": {"kind": "concurrent", "streams": c},
            "tokenizer": {"kind": "huggingface_auto", "model": ctx.tokenizer},
            "data": [{"kind": "synthetic_text", "prompt_tokens": 32, "output_tokens": ctx.tokens}],
            "constraints": [{"kind": "max_requests", "count": n}],
        },
    }
    scenario.write_text(json.dumps(spec))
    command = [
        str(ctx.peer_bin / "guidellm"), "run", "--scenario", str(scenario),
        "--output", f"kind=json,path={output}", "--disable-console",
    ]  # fmt: skip

    def parse(stdout: str) -> float:
        data = json.loads(output.read_text())
        return float(data["benchmarks"][0]["metrics"]["output_tokens_per_second"]["successful"]["mean"])

    return command, parse, 0, OFFLINE


def aiperf(ctx: Context, c: int, n: int) -> Client:
    out = ctx.workdir / f"aiperf-{c}-{n}"
    command = [
        str(ctx.peer_bin / "aiperf"), "profile", "--model", "sim", "--url", ctx.url, "--endpoint-type", "chat",
        "--streaming", "--concurrency", str(c), "--request-count", str(n), "--warmup-request-count", str(c),
        "--prompt-input-tokens-mean", "32", "--prompt-output-tokens-mean", str(ctx.tokens),
        "--extra-inputs", "ignore_eos:true", "--tokenizer", ctx.tokenizer, "--use-server-token-count",
        "--output-artifact-dir", str(out), "--no-auto-plot",
    ]  # fmt: skip

    def parse(stdout: str) -> float:
        data = json.loads((out / "profile_export_aiperf.json").read_text())
        return float(data["output_token_throughput"]["avg"])

    return command, parse, c, LOOPBACK_HUB


def sglang(ctx: Context, c: int, n: int) -> Client:
    out = ctx.workdir / f"sglang-{c}-{n}.jsonl"
    command = [
        str(ctx.peer_bin / "python"), "-m", "sglang.bench_serving", "--backend", "sglang-oai-chat",
        "--base-url", ctx.url, "--model", "sim", "--tokenizer", ctx.tokenizer, "--dataset-name", "random-ids",
        "--random-input-len", "32", "--random-output-len", str(ctx.tokens), "--random-range-ratio", "1",
        "--num-prompts", str(n), "--max-concurrency", str(c), "--disable-tqdm", "--output-file", str(out),
    ]  # fmt: skip

    def parse(stdout: str) -> float:
        return float(json.loads(out.read_text().strip().splitlines()[-1])["output_throughput"])

    return command, parse, 1, OFFLINE


CLIENTS = {"specsweep": specsweep, "guidellm": guidellm, "aiperf": aiperf, "sglang.bench_serving": sglang}


def run_client(ctx: Context, name: str, c: int, n: int) -> Run:
    command, parse, warmup, extra_env = CLIENTS[name](ctx, c, n)
    env = {**os.environ, **extra_env}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = process_cpu_seconds(ctx.server_pid)
    started = time.perf_counter()
    done = subprocess.run(
        pinned(command, 1), cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run = Run(name, c, n, (n + warmup) * ctx.tokens, cpu, wall, None)
    run.server_cpu_s = process_cpu_seconds(ctx.server_pid) - server_before
    if done.returncode != 0:
        run.errors = f"exit {done.returncode}: {(done.stderr or done.stdout)[-400:]}"
        return run
    try:
        run.tok_s = parse(done.stdout)
    except Exception as exc:  # a peer's output format changed: say so in the table, keep going
        run.errors = f"{type(exc).__name__}: {exc}"
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-venv", type=Path, required=True, help="virtualenv with guidellm, aiperf, sglang")
    parser.add_argument("--levels", default="128,512")
    parser.add_argument("--tokens", type=int, default=256, help="output tokens per request")
    parser.add_argument("--small", type=float, default=2.0, help="small run: this many requests per stream")
    parser.add_argument("--big", type=float, default=8.0, help="big run: this many requests per stream")
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the table shows medians over rounds")
    parser.add_argument("--json", type=Path, help="also write every run here")
    args = parser.parse_args()
    clients = args.clients.split(",")
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="specsweep-capacity-") as tmp:
        workdir = Path(tmp)
        tokenizer = workdir / "tokenizer"
        words = "the of and to in is was for on that with as by at from it are this which or had not but have"
        subprocess.run(
            [str(args.peer_venv / "bin" / "python"), "-c", _TOKENIZER, str(tokenizer), words],
            env={**os.environ, **OFFLINE},
            check=True,
            capture_output=True,
        )
        with simulator("--profile", "firehose", "--algorithm", "ar", core=0) as sim:
            ctx = Context(
                sim.url, sim.pid, sys.executable, args.peer_venv / "bin", str(tokenizer), workdir, args.tokens
            )
            for round_ in range(args.repeat):
                for c in (int(x) for x in args.levels.split(",")):
                    # Rotate the order each round, so no client always runs first (or last) on a busy machine.
                    order = clients[round_ % len(clients) :] + clients[: round_ % len(clients)]
                    for name, per_stream in ((n, p) for n in order for p in (args.small, args.big)):
                        run = run_client(ctx, name, c, int(c * per_stream))
                        run.round = round_
                        runs.append(run)
                        print(
                            f"{name:22s} C={c:<4d} n={run.requests:<5d} cpu {run.cpu_s:7.2f} s "
                            f"wall {run.wall_s:6.1f} s server cpu {run.server_cpu_s:6.2f} s "
                            f"tok/s {run.tok_s or 0:9.0f} {run.errors[:200]}",
                            file=sys.stderr,
                            flush=True,
                        )
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in runs], indent=1))
    print(report(runs, clients))
    return 0


def report(runs: list[Run], clients: list[str]) -> str:
    """Medians over rounds of each client's big-run tok/s and marginal CPU per token, and ratios to ours."""
    lines = [
        "| C | client | output tok/s (big run) | CPU µs per token (marginal) | tok/s ratio: specsweep / client "
        "| CPU ratio: client / specsweep |",
        "|---|---|---|---|---|---|",
    ]
    for c in sorted({r.concurrency for r in runs}):
        figures: dict[str, tuple[float | None, float | None, str]] = {}
        for name in clients:
            mine = [r for r in runs if r.client == name and r.concurrency == c]
            errors = "; ".join(r.errors for r in mine if r.errors)[:120]
            tok_s: list[float] = []
            cpu_us: list[float] = []
            for round_ in sorted({r.round for r in mine}):
                pair = sorted((r for r in mine if r.round == round_), key=lambda r: r.tokens)
                if len(pair) != 2 or any(r.errors for r in pair):
                    continue
                small, big = pair
                assert big.tok_s is not None
                tok_s.append(big.tok_s)
                cpu_us.append((big.cpu_s - small.cpu_s) / (big.tokens - small.tokens) * 1e6)
            figures[name] = (
                statistics.median(tok_s) if tok_s else None,
                statistics.median(cpu_us) if cpu_us else None,
                errors,
            )
        ours_tok, ours_us, _ = figures.get("specsweep", (None, None, ""))
        for name in clients:
            tok, us, error = figures[name]
            if tok is None or us is None:
                lines.append(f"| {c} | {name} | failed: {error} | | | |")
                continue
            ratio = f"{ours_tok / tok:.2f}x" if ours_tok and name != "specsweep" else "-"
            cpu_ratio = f"{us / ours_us:.2f}x" if ours_us and name != "specsweep" else "-"
            lines.append(f"| {c} | {name} | {tok:,.0f} | {us:.1f} | {ratio} | {cpu_ratio} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
