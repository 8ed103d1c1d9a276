"""Capacity of the load generator against peer clients, all against the same firehose, in one run.

The server is bench/firehose.py (a server that only writes pre-rendered SSE chunks; the simulator's own
cost per token is as large as a fast client's), pinned to core 0; each client runs as its own command
pinned to core 1, with every one of its processes (GuideLLM and AIPerf start workers; they share the one
core as our single process does). ``--modes`` runs the whole comparison once per firehose mode: ``16``
writes sixteen tokens per ``send`` as fast as it can (as the simulator's firehose does: a client finds many
tokens per read), ``1x8`` every token as its own HTTP chunk, eight chunks per ``send`` (framed as a real
engine frames them, at an eighth of the server's cost per token, so that the server is not the limit), ``1``
every token as its own HTTP chunk with its own ``send`` (as a real engine's server writes them; unpaced, the
server's cost per write, about 4 µs here, can be the limit: then tokens/s is the server's and tokens per
CPU-second the client's figure), ``1@5`` one token per stream every 5 ms (a client that keeps up reads one
token per read, as from a real engine: there the figure is CPU per token, not tokens/s, which the pace
sets), ``outside`` what an outside harness's server wrote (issue 31: an asyncio-protocol server on asyncio's own
loop, plain vLLM-style chunks of one short word, usage only at the end, every token its own HTTP chunk and its
own ``send``, 16 sends per stream per turn before the next stream's; so a read finds as many one-token TCP
segments as arrived since the last one, and a stream's first read often the headers with all or most of the
body). A mode is ``E[xK][/W][@T]``: E events per HTTP chunk, K chunks per write, W writes per stream per turn
(each its own ``send``; then the firehose runs on asyncio's loop, since uvloop joins a turn's writes to one
socket into one), one turn every T ms. ``--tree DIR`` adds the client ``specsweep.tree``: specsweep from
another checkout (``git worktree add DIR COMMIT``), so that a change is measured against its parent in one
run. For each mode, concurrency and client there is a small and a big run (``--small`` and ``--big`` or
``--big-unpaced`` requests per stream), and:

- server tok/s: tokens the server counted as read by the client in the big run, over the time the client
  had a response to read (bench/firehose.py ``Stats``: a response counts once the client asks for its next
  request on that connection, or closes a connection that carried only that one), so that every client is
  timed by the same clock and neither its start-up nor its pauses count;
- the client's own tok/s: its headline output throughput of the big run (specsweep ``output_tok_s``,
  GuideLLM ``output_tokens_per_second`` mean, AIPerf ``output_token_throughput``, SGLang and vLLM
  ``output_throughput``);
- CPU microseconds per token: (CPU(big) - CPU(small)) / (tokens(big) - tokens(small)), CPU being user +
  system time of the client and every process it started, tokens those the server wrote (start-up costs,
  such as importing torch, cancel out and only the cost of streaming remains);
- CPU microseconds per token, steady: the client's CPU (``/proc`` schedstat of all its processes and threads,
  read every 100 ms) between the moments the server had written 25% and 75% of the big run's tokens (the
  server's timeline of tokens written, on the same clock), over the tokens written in between: the cost of
  ingest at full concurrency, with no start-up, ramp or drain in it; tokens per CPU-second is its inverse,
  what one core ingests. The marginal figure also holds the extra requests' start and end and the client's
  reckoning after the run, and for a client that imports torch, the variance of seconds of start-up CPU
  between its two runs; the steady one holds neither. On a machine shared with other work the CPU figures
  are the robust ones: the wall-clock tokens/s of a pinned client is what is left to it of its core.

Peers run from their own virtualenvs, never the project's: ``--peer-venv`` holds ``guidellm``, ``aiperf`` and
``sglang``; ``--vllm-venv`` holds what vLLM's benchmark module imports (vLLM itself is not installed: its
``vllm/benchmarks/serve.py`` runs from the files of the 0.33.0 wheel, unpacked by tests/contract/wheels.py,
the way ``vllm bench serve`` calls it: ``add_cli_args`` then ``main``). All run fully offline
(``HF_HUB_OFFLINE=1``), with a tiny word-level tokenizer this script writes to a temporary directory, since
they insist on one. Run from the repository root:

    .venv/bin/python bench/load_capacity.py --peer-venv PEER_VENV --vllm-venv VLLM_VENV \
        [--levels 32,128] [--modes 16,1x8,1,1@5,outside] [--tokens 256] [--input-tokens 32] [--repeat 3]

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
from load_common import (
    ROOT,
    crossing,
    http_json,
    mode_firehose,
    parse_mode,
    pinned,
    process_cpu_seconds,
    tree_cpu_ns,
    value_at,
)

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


# How vLLM's `vllm bench serve` runs its module (vllm/entrypoints/cli/benchmark/serve.py, 0.33.0).
_VLLM_DRIVER = """
import sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.benchmarks.serve import add_cli_args, main
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""
VLLM_VERSION = "0.33.0"


@dataclass
class Run:
    client: str
    concurrency: int
    requests: int
    tokens: int  # output tokens the server wrote (measured, warm-up and test requests)
    cpu_s: float
    wall_s: float
    tok_s: float | None  # the client's own headline figure
    server_tok_s: float | None = None  # what the server counted the client read, over the server's clock
    server_tokens: int = 0
    errors: str = ""
    round: int = 0
    server_cpu_s: float = 0.0
    mode: str = ""  # events per write, @ the pace in ms
    steady_us: float | None = None  # client CPU µs per token written, in the middle of the run (steady_window)
    steady_s: float = 0.0  # that window's length


@dataclass
class Context:
    url: str
    control: str
    server_pid: int
    python: str  # the project's interpreter
    peer_bin: Path | None
    vllm_bin: Path | None
    vllm_src: Path | None
    tokenizer: str
    workdir: Path
    tokens: int
    input_tokens: int = 32
    tree: Path | None = None  # another checkout of the project, for the client "specsweep.tree"


Client = tuple[list[str], Callable[[str], float], int, dict[str, str]]


def specsweep(ctx: Context, c: int, n: int) -> Client:
    command = [
        ctx.python, "-m", "orchestrator", "load", "--url", ctx.url, "--model", "sim", "--concurrency", str(c),
        "--requests", str(n), "--max-tokens", str(ctx.tokens),
        "--prompts", f"synthetic:in={ctx.input_tokens},out={ctx.tokens}", "--warmup", str(c), "--json",
    ]  # fmt: skip

    def parse(stdout: str) -> float:
        data = json.loads(stdout.strip().splitlines()[-1])
        if data["errors"]:
            raise RuntimeError(f"errors: {data['errors_by_kind']}")
        return float(data["output_tok_s"])

    return command, parse, c, OFFLINE


# ``python -m orchestrator`` from another checkout (its directory first on sys.path, before this one's).
_TREE_DRIVER = (
    "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); runpy.run_module('orchestrator', run_name='__main__')"
)


def specsweep_tree(ctx: Context, c: int, n: int) -> Client:
    """specsweep from ``--tree`` (another checkout, e.g. ``git worktree add DIR COMMIT``): the same command, so
    that a change is measured against what it changed in one run."""
    if ctx.tree is None:
        raise SystemExit("specsweep.tree needs --tree")
    command, parse, warmup, env = specsweep(ctx, c, n)
    return [command[0], "-c", _TREE_DRIVER, str(ctx.tree), *command[3:]], parse, warmup, env


def _peer(ctx: Context, name: str) -> Path:
    if ctx.peer_bin is None:
        raise SystemExit(f"{name} needs --peer-venv")
    return ctx.peer_bin


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
            "data": [{"kind": "synthetic_text", "prompt_tokens": ctx.input_tokens, "output_tokens": ctx.tokens}],
            "constraints": [{"kind": "max_requests", "count": n}],
        },
    }
    scenario.write_text(json.dumps(spec))
    command = [
        str(_peer(ctx, "guidellm") / "guidellm"), "run", "--scenario", str(scenario),
        "--output", f"kind=json,path={output}", "--disable-console",
    ]  # fmt: skip

    def parse(stdout: str) -> float:
        data = json.loads(output.read_text())
        return float(data["benchmarks"][0]["metrics"]["output_tokens_per_second"]["successful"]["mean"])

    return command, parse, 0, OFFLINE


def aiperf(ctx: Context, c: int, n: int) -> Client:
    out = ctx.workdir / f"aiperf-{c}-{n}"
    command = [
        str(_peer(ctx, "aiperf") / "aiperf"), "profile", "--model", "sim", "--url", ctx.url, "--endpoint-type",
        "chat", "--streaming", "--concurrency", str(c), "--request-count", str(n), "--warmup-request-count", str(c),
        "--prompt-input-tokens-mean", str(ctx.input_tokens), "--prompt-output-tokens-mean", str(ctx.tokens),
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
        str(_peer(ctx, "sglang") / "python"), "-m", "sglang.bench_serving", "--backend", "sglang-oai-chat",
        "--base-url", ctx.url, "--model", "sim", "--tokenizer", ctx.tokenizer, "--dataset-name", "random-ids",
        "--random-input-len", str(ctx.input_tokens), "--random-output-len", str(ctx.tokens),
        "--random-range-ratio", "1",
        "--num-prompts", str(n), "--max-concurrency", str(c), "--disable-tqdm", "--output-file", str(out),
    ]  # fmt: skip

    def parse(stdout: str) -> float:
        return float(json.loads(out.read_text().strip().splitlines()[-1])["output_throughput"])

    return command, parse, 1, OFFLINE


def vllm(ctx: Context, c: int, n: int) -> Client:
    """``vllm bench serve`` 0.33.0 from the wheel's files: the OpenAI chat backend, random prompts of 32 tokens,
    ``--ignore-eos``, ``--max-concurrency C``, all requests at once (``--request-rate inf``, the default), C
    warm-up requests (``--num-warmups``) as specsweep and AIPerf have."""
    if ctx.vllm_bin is None or ctx.vllm_src is None:
        raise SystemExit("vllm needs --vllm-venv")
    name = f"vllm-{c}-{n}.json"
    command = [
        str(ctx.vllm_bin / "python"), "-c", _VLLM_DRIVER, "--backend", "openai-chat",
        "--endpoint", "/v1/chat/completions", "--base-url", ctx.url, "--model", "sim", "--tokenizer", ctx.tokenizer,
        "--dataset-name", "random", "--random-input-len", str(ctx.input_tokens), "--random-output-len", str(ctx.tokens),
        "--num-prompts", str(n), "--max-concurrency", str(c), "--num-warmups", str(c), "--ignore-eos",
        "--disable-tqdm", "--save-result", "--result-dir", str(ctx.workdir), "--result-filename", name,
    ]  # fmt: skip

    def parse(stdout: str) -> float:
        data = json.loads((ctx.workdir / name).read_text())
        if data.get("completed") != n:
            raise RuntimeError(f"completed {data.get('completed')} of {n}")
        return float(data["output_throughput"])

    return command, parse, c, {**OFFLINE, "PYTHONPATH": str(ctx.vllm_src)}


CLIENTS = {
    "specsweep": specsweep,
    "specsweep.tree": specsweep_tree,
    "vllm.bench_serve": vllm,
    "sglang.bench_serving": sglang,
    "guidellm": guidellm,
    "aiperf": aiperf,
}


SAMPLE_S = 0.1  # how often the client's CPU is read during a run (steady_window)
STEADY = (0.25, 0.75)  # the steady window: from the time the server had written this share of the run's tokens


def steady_window(cpu: list[tuple[float, float]], written: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(client CPU µs per token, window s) between the moments the server had written 25% and 75% of the run's
    tokens: streaming at full concurrency, without the client's start-up (importing torch takes a peer
    seconds of CPU, and varies by tenths), its warm-up's ramp, the drain at the end or its reckoning after it.
    ``cpu``: (time, CPU ns of the client's processes), sampled every SAMPLE_S; ``written``: the firehose's
    timeline (time, tokens written), on the same clock. The tokens are those written in the window; a client
    that keeps up reads them in it, one that does not lags by about the same at both ends."""
    if len(written) < 2 or written[-1][1] <= 0:
        return None
    total = written[-1][1]
    start, end = crossing(written, STEADY[0] * total), crossing(written, STEADY[1] * total)
    if start is None or end is None or end <= start:
        return None
    cpu_start, cpu_end = value_at(cpu, start), value_at(cpu, end)
    if cpu_start is None or cpu_end is None:
        return None
    return (cpu_end - cpu_start) / 1e3 / ((STEADY[1] - STEADY[0]) * total), end - start


def run_client(ctx: Context, name: str, c: int, n: int) -> Run:
    command, parse, warmup, extra_env = CLIENTS[name](ctx, c, n)
    env = {**os.environ, **extra_env}
    http_json(ctx.control + "/reset", "POST")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = process_cpu_seconds(ctx.server_pid)
    started = time.perf_counter()
    samples: list[tuple[float, float]] = []
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(pinned(command, 1), cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
        try:
            while process.poll() is None:
                samples.append((time.perf_counter(), float(tree_cpu_ns(process.pid))))
                if time.perf_counter() - started > 1800:
                    raise TimeoutError(f"{name} ran for more than 1800 s")
                time.sleep(SAMPLE_S)
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(command, process.returncode, out.read(), err.read())
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run = Run(name, c, n, (n + warmup) * ctx.tokens, cpu, wall, None)
    run.server_cpu_s = process_cpu_seconds(ctx.server_pid) - server_before
    stats = http_json(ctx.control + "/stats")
    run.server_tokens = int(stats["tokens"])
    steady = steady_window(samples, [(float(t), float(w)) for t, w in stats["timeline"]])
    if steady is not None:
        run.steady_us, run.steady_s = steady
    if stats["busy_s"] > 0:
        run.server_tok_s = stats["taken_tokens"] / stats["busy_s"]
    if done.returncode != 0:
        run.errors = f"exit {done.returncode}: {(done.stderr or done.stdout)[-400:]}"
        return run
    if run.server_tokens < n * ctx.tokens:
        run.errors = f"the server wrote {run.server_tokens} tokens, fewer than {n} requests of {ctx.tokens}"
    run.tokens = run.server_tokens  # what was streamed, warm-up and test requests included
    try:
        run.tok_s = parse(done.stdout)
    except Exception as exc:  # a peer's output format changed: say so in the table, keep going
        run.errors = f"{type(exc).__name__}: {exc}"
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-venv", type=Path, help="virtualenv with guidellm, aiperf, sglang")
    parser.add_argument("--vllm-venv", type=Path, help="virtualenv with what vllm/benchmarks/serve.py imports")
    parser.add_argument("--levels", default="32,128")
    parser.add_argument(
        "--modes",
        default="16,1x8,1,1@5",
        help="firehose modes, one comparison each: E (E events per write, as fast as it can), ExK (E events per "
        "HTTP chunk, K chunks per write), E@T (paced: one write per stream every T ms)",
    )
    parser.add_argument("--tokens", type=int, default=256, help="output tokens per request")
    parser.add_argument("--input-tokens", type=int, default=32, help="synthetic prompt tokens per request")
    parser.add_argument("--tree", type=Path, help="another checkout of the project, run as client specsweep.tree")
    parser.add_argument("--small", type=float, default=2.0, help="small run: this many requests per stream")
    parser.add_argument("--big", type=float, default=8.0, help="big run, paced modes: this many requests per stream")
    parser.add_argument("--big-unpaced", type=float, default=32.0, help="big run, unpaced modes: requests per stream")
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the table shows medians over rounds")
    parser.add_argument("--json", type=Path, help="also write every run here")
    args = parser.parse_args()
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})  # this script's sampling shares the server's core, never the client's
    clients = args.clients.split(",")
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        parser.error(f"unknown clients {unknown}; choose from {', '.join(CLIENTS)}")
    vllm_src = None
    if "vllm.bench_serve" in clients:
        if args.vllm_venv is None:
            parser.error("vllm.bench_serve needs --vllm-venv")
        sys.path.insert(0, str(ROOT))
        from tests.contract.wheels import engine_sources

        vllm_src = engine_sources("vllm", VLLM_VERSION, members=("vllm/",))
    tokenizer_python = next((v / "bin" / "python" for v in (args.peer_venv, args.vllm_venv) if v is not None), None)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="specsweep-capacity-") as tmp:
        workdir = Path(tmp)
        tokenizer = workdir / "tokenizer"
        words = "the of and to in is was for on that with as by at from it are this which or had not but have"
        if tokenizer_python is not None:
            subprocess.run(
                [str(tokenizer_python), "-c", _TOKENIZER, str(tokenizer), words],
                env={**os.environ, **OFFLINE},
                check=True,
                capture_output=True,
            )
        for mode in args.modes.split(","):
            spec = parse_mode(mode)
            itl = spec.itl_ms
            with mode_firehose(spec, core=0) as server:
                ctx = Context(
                    server.url,
                    server.control,
                    server.pid,
                    sys.executable,
                    args.peer_venv / "bin" if args.peer_venv else None,
                    args.vllm_venv / "bin" if args.vllm_venv else None,
                    vllm_src,
                    str(tokenizer),
                    workdir,
                    args.tokens,
                    args.input_tokens,
                    args.tree.resolve() if args.tree else None,
                )
                for round_ in range(args.repeat):
                    for c in (int(x) for x in args.levels.split(",")):
                        # Rotate the order each round, so no client always runs first (or last) on a busy machine.
                        order = clients[round_ % len(clients) :] + clients[: round_ % len(clients)]
                        big = args.big if itl else args.big_unpaced
                        for name, per_stream in ((n, p) for n in order for p in (args.small, big)):
                            run = run_client(ctx, name, c, int(c * per_stream))
                            run.round = round_
                            run.mode = mode
                            runs.append(run)
                            print(
                                f"mode {mode:<5s} {name:22s} C={c:<4d} n={run.requests:<5d} "
                                f"cpu {run.cpu_s:7.2f} s wall {run.wall_s:6.1f} s server cpu {run.server_cpu_s:6.2f} s "
                                f"server tok/s {run.server_tok_s or 0:9.0f} own tok/s {run.tok_s or 0:9.0f} "
                                f"steady {run.steady_us or 0:6.2f} µs/token over {run.steady_s:5.1f} s "
                                f"{run.errors[:200]}",
                                file=sys.stderr,
                                flush=True,
                            )
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in runs], indent=1))
    print(report(runs, clients))
    return 0


def report(runs: list[Run], clients: list[str]) -> str:
    """Medians over rounds of each client's big-run tok/s (server-counted and its own), marginal CPU per token and
    steady-window CPU per token, and our ratios to each."""
    lines = [
        "| mode | C | client | server tok/s (big run) | own tok/s (big run) | CPU µs per token (marginal) "
        "| CPU µs per token (steady) | tokens per CPU-second (steady) | server tok/s: specsweep / client "
        "| CPU per token: client / specsweep (marginal) | (steady) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for mode in dict.fromkeys(r.mode for r in runs):
        for c in sorted({r.concurrency for r in runs if r.mode == mode}):
            figures: dict[str, tuple[float, float, float, float | None] | str] = {}
            for name in clients:
                mine = [r for r in runs if r.client == name and r.concurrency == c and r.mode == mode]
                server: list[float] = []
                own: list[float] = []
                cpu_us: list[float] = []
                steady: list[float] = []
                for round_ in sorted({r.round for r in mine}):
                    pair = sorted((r for r in mine if r.round == round_), key=lambda r: r.tokens)
                    if len(pair) != 2 or any(r.errors or r.tok_s is None or r.server_tok_s is None for r in pair):
                        continue
                    small, big = pair
                    assert big.tok_s is not None and big.server_tok_s is not None
                    server.append(big.server_tok_s)
                    own.append(big.tok_s)
                    cpu_us.append((big.cpu_s - small.cpu_s) / (big.tokens - small.tokens) * 1e6)
                    if big.steady_us is not None:
                        steady.append(big.steady_us)
                if server:
                    figures[name] = (
                        statistics.median(server),
                        statistics.median(own),
                        statistics.median(cpu_us),
                        statistics.median(steady) if steady else None,
                    )
                else:
                    figures[name] = "; ".join(r.errors for r in mine if r.errors)[:120] or "no runs"
            ours = figures.get("specsweep")
            for name in clients:
                fig = figures[name]
                if isinstance(fig, str):
                    lines.append(f"| {mode} | {c} | {name} | failed: {fig} | | | | | | | |")
                    continue
                server_tok, own_tok, us, steady_us = fig
                ratio = cpu_ratio = steady_ratio = "-"
                if isinstance(ours, tuple) and name != "specsweep":
                    ratio = f"{ours[0] / server_tok:.2f}x"
                    cpu_ratio = f"{us / ours[2]:.2f}x"
                    if steady_us is not None and ours[3]:
                        steady_ratio = f"{steady_us / ours[3]:.2f}x"
                label = f"**{name}**" if name == "specsweep" else name
                cells = [
                    str(mode),
                    str(c),
                    label,
                    f"{server_tok:,.0f}",
                    f"{own_tok:,.0f}",
                    f"{us:.2f}",
                    f"{steady_us:.2f}" if steady_us is not None else "-",
                    f"{1e6 / steady_us:,.0f}" if steady_us else "-",
                    ratio,
                    cpu_ratio,
                    steady_ratio,
                ]
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
