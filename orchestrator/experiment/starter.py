"""``specsweep init``: a commented experiment file to start from, for an engine and a kind of host.

:func:`starter_experiment` returns the text; every combination of ``ENGINES`` and ``HOST_KINDS`` validates
(``tests/integration/test_init_cli.py`` checks each with ``specsweep validate``). The engines' flags come from
their own sources:

- SGLang 0.5.23: ``--model-path`` (``sglang/srt/arg_groups/fields/model.py``), ``--port`` (default 30000,
  ``fields/serving.py``), ``--tp-size`` (``fields/parallel.py``), ``--enable-metrics``
  (``fields/observability.py``), ``--speculative-algorithm`` (EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH,
  ...), ``--speculative-draft-model-path``, ``--speculative-num-steps``, ``--speculative-eagle-topk`` and
  ``--speculative-num-draft-tokens`` (``fields/spec.py``); each flag is its field's name with ``-`` for ``_``
  (``arg_groups/arg_utils.py``).
- vLLM 0.33.0: ``vllm serve MODEL --port`` (default 8000), ``--speculative-config`` a JSON object
  (``vllm/engine/arg_utils.py``) with ``method`` (``eagle``, ``eagle3``, ``ngram``, ``draft_model``, ...),
  ``model`` and ``num_speculative_tokens`` (``vllm/config/speculative.py``).
- llama.cpp's ``llama-server`` (the build ``scripts/get-llama-server.sh`` makes, ``docs/llamacpp.md``):
  ``-m``, ``--port`` (default 8080), ``--metrics``, ``--spec-type ngram-simple --spec-ngram-simple-size-n N
  --spec-ngram-simple-size-m M`` (no draft is shorter than N: keep M >= N).
- The simulator: ``python -m orchestrator.sim`` (``specsweep sim --help``).
"""

from __future__ import annotations

import json

__all__ = ["ENGINES", "HOST_KINDS", "default_name", "starter_experiment"]

ENGINES = ("sglang", "vllm", "llamacpp", "sim")
HOST_KINDS = ("ssh", "local")

_PORTS = {"sglang": 30000, "vllm": 8000, "llamacpp": 8080, "sim": 18190}


def default_name(engine: str) -> str:
    return {"sglang": "sglang-eagle3", "vllm": "vllm-eagle3", "llamacpp": "llamacpp-ngram", "sim": "sim-demo"}[engine]


def _host_block(host: str) -> str:
    if host == "local":
        return "host: local                          # this machine; `{ssh: user@gpu-box}` for another one\n"
    return (
        "host: {ssh: root@gpu-box}            # user@host[:port] or a ~/.ssh/config alias (specsweep doctor FILE\n"
        "                                     # checks it); `hosts: [...]` spreads the sweep over a pool\n"
    )


def _url(engine: str, host: str) -> str:
    where = "127.0.0.1" if host == "local" else "gpu-box"
    return f"http://{where}:{_PORTS[engine]}"


def _service(engine: str, host: str, command: str, *, unit: str, environment: str = "") -> str:
    """A systemd drop-in on an SSH host (the unit must exist there), a plain process on this machine (and the
    simulator everywhere: it needs no unit)."""
    if host == "ssh" and engine != "sim":
        return (
            "service:\n"
            "  kind: systemd                      # a drop-in replaces ExecStart for each configuration, and is\n"
            f"  unit: {unit}{' ' * max(1, 29 - len(unit))}# removed afterwards; the unit must exist on the host\n"
            "  exec_start: >-\n"
            f"    {command}\n" + environment
        )
    return (
        "service:\n"
        "  kind: process                      # started in its own session, stopped after each configuration\n"
        "  command: >-\n"
        f"    {command}\n" + environment
    )


_HEADER = """\
# {title}
# Written by `specsweep init`. Next:
#   specsweep validate {{file}}          # every error, with its line
#   specsweep plan {{file}}              # deployments (= restarts), load points, ETA
#   specsweep sweep {{file}} --dry-run   # what would be written and run, touching nothing
#   specsweep sweep {{file}}
# Every key is described in docs/guide.md ("An experiment file").
name: {name}
description: {description}
"""

_LOAD = """\
# The client side, the same for every configuration: each concurrency level is one load point.
load:
  concurrency: [1, 4, 16]
  warmup: 2                           # requests sent after each (re)start, not measured
  requests: {requests:<25} # per load point (or `duration: 60s`)
  max_tokens: {max_tokens}
  temperature: 0                      # greedy: the accept length does not depend on sampling luck
  prompts: "builtin:chat"             # or a JSONL / ShareGPT file, or "synthetic:in=128,out=256"
  repeats: {repeats}                          # each point measured N times (each with its own prompts): intervals
                                      # over windows, not only requests; a winner must beat the noise
  repeats_across_restarts: 1          # 2+ deploys every configuration again (restart-to-restart variance)
  # until: {{rel_ci: 0.02, max_requests: 512}}   # or: measure each point until its 95% interval is within ±2%
  # flush_cache: true                 # empty the prefix cache before every point
# When a sweep stops instead of spending ready_timeout on every configuration (these are the defaults).
failure_policy: {{stop_on_baseline_failure: true, max_consecutive_failed_deployments: 3}}
"""


def _sglang(host: str) -> str:
    command = (
        "{server_python} -m sglang.launch_server --model-path {model} --tp-size {tp} --port 30000 --host 0.0.0.0\n"
        "    --enable-metrics {spec_args}"
    )
    python = "/opt/venv/bin/python" if host == "ssh" else "python3"
    return (
        _host_block(host) + "vars:\n"
        f"  server_python: {python}{' ' * max(1, 23 - len(python))}# the Python that has sglang installed\n"
        "  model: meta-llama/Llama-3.1-8B-Instruct\n"
        "  draft_model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B   # an EAGLE-3 head trained for the model\n"
        "  tp: 1                              # tensor parallel size (GPUs)\n"
        + _service("sglang", host, command, unit="sglang.service")
        + "server:\n"
        f'  url: "{_url("sglang", host)}"\n'
        "  model: meta-llama/Llama-3.1-8B-Instruct   # the name requests use (SGLang serves the model path)\n"
        "  ready_timeout: 15m                 # how long one start may take before it counts as failed\n"
        "  expected_load_time: 3m             # for the first ETA; specsweep learns the real one as it runs\n"
        "engine: sglang                       # which log lines and counters to read\n"
        "# Each variant is a server configuration family; `matrix` expands it (one deployment = one restart).\n"
        "variants:\n"
        '  autoregressive: {spec_args: ""}\n'
        "  eagle3:\n"
        "    spec_args: >-\n"
        "      --speculative-algorithm EAGLE3 --speculative-draft-model-path {draft_model}\n"
        "      --speculative-num-steps {steps} --speculative-eagle-topk {topk} --speculative-num-draft-tokens {draft}\n"
        "    # a chain of 3 drafts (topk 1: draft tokens = steps + 1), then longer chains and a tree\n"
        "    matrix: {steps: [3], topk: [1], draft: [4]}\n"
        "    include:\n"
        "      - {steps: 5, topk: 1, draft: 6}\n"
        "      - {steps: 5, topk: 4, draft: 16}\n"
        "baselines: [autoregressive]          # measured first; every point is compared with them\n"
    )


def _vllm(host: str) -> str:
    program = "/opt/venv/bin/vllm" if host == "ssh" else "vllm"
    command = f"{program} serve {{model}} --port 8000 {{spec_args}}"
    environment = "  environment:\n    VLLM_LOGGING_LEVEL: INFO         # vLLM logs its spec-decoding stats at INFO\n"
    return (
        _host_block(host) + "vars:\n"
        "  model: meta-llama/Llama-3.1-8B-Instruct\n"
        "  draft_model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B   # an EAGLE-3 head trained for the model\n"
        + _service("vllm", host, command, unit="vllm.service", environment=environment)
        + "server:\n"
        f'  url: "{_url("vllm", host)}"\n'
        "  model: meta-llama/Llama-3.1-8B-Instruct\n"
        "  ready_timeout: 15m\n"
        "  expected_load_time: 3m\n"
        "engine: vllm\n"
        "variants:\n"
        '  autoregressive: {spec_args: ""}\n'
        "  eagle3:\n"
        "    # --speculative-config is one JSON object; {{ and }} are literal braces in a template\n"
        "    spec_args: >-\n"
        '      --speculative-config \'{{"method": "eagle3", "model": "{draft_model}",\n'
        '      "num_speculative_tokens": {k}}}\'\n'
        "    matrix: {k: [2, 4, 6]}\n"
        '  # n-gram lookup needs no draft model: "method": "ngram" with "prompt_lookup_max": 4\n'
        "baselines: [autoregressive]\n"
    )


def _llamacpp(host: str) -> str:
    program = "/usr/local/bin/llama-server" if host == "ssh" else "llama-server"
    command = f"{program} -m {{model_file}} --alias {{alias}} --host 0.0.0.0 --port 8080 --metrics -np 4 {{spec_args}}"
    return (
        _host_block(host) + "vars:\n"
        "  model_file: /models/model.gguf     # scripts/get-llama-server.sh builds llama-server and fetches a model\n"
        "  alias: model\n" + _service("llamacpp", host, command, unit="llama-server.service") + "server:\n"
        f'  url: "{_url("llamacpp", host)}"\n'
        "  model: model                       # the --alias above\n"
        "  api: chat                          # `completions` for a base model without a chat template\n"
        "  ready_timeout: 2m\n"
        "  expected_load_time: 10s\n"
        "  expected_tokens_per_second: 20     # per user, for the first ETA\n"
        "engine: llamacpp\n"
        "variants:\n"
        '  autoregressive: {spec_args: ""}\n'
        "  ngram:\n"
        "    # drafts from the request's own text; a draft is never shorter than size-n, so keep size-m >= size-n\n"
        '    spec_args: "--spec-type ngram-simple --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m {size_m}"\n'
        "    matrix: {size_m: [4, 8, 16]}\n"
        "baselines: [autoregressive]\n"
    )


def _sim(host: str) -> str:
    # On this machine the controller's own Python runs the simulator; on another host specsweep must be
    # installed there (its `specsweep sim` is the same program). A decode-log line every 10 decode steps, not
    # SGLang's 40: a tree point at C=16 runs about 32 steps, and its log window would hold no metric line.
    program = "{python} -m orchestrator.sim" if host == "local" else "specsweep sim"
    command = (
        f"{program} --engine sglang --host {'127.0.0.1' if host == 'local' else '0.0.0.0'} --port 18190 "
        "--profile k26 --load-seconds 1 --seed 7\n"
        "    --decode-log-interval 10 {spec_args}"
    )
    return (
        _host_block(host) + _service("sim", host, command, unit="specsweep-sim.service") + "server:\n"
        f'  url: "{_url("sim", host)}"\n'
        "  model: sim\n"
        "  ready_timeout: 60s\n"
        "  expected_load_time: 2s\n"
        "  expected_tokens_per_second: 95\n"
        "engine: sim                          # the simulator speaks SGLang's dialect here (--engine above)\n"
        "variants:\n"
        '  autoregressive: {spec_args: "--algorithm ar"}\n'
        '  linear: {spec_args: "--algorithm linear --draft-tokens 7"}\n'
        "  ddtree:\n"
        '    spec_args: "--algorithm ddtree --budget {budget} --topk {topk}"\n'
        "    matrix: {budget: [7, 16], topk: [1, 4]}\n"
        "baselines: [autoregressive, linear]  # the first is the AR baseline, the second the linear one\n"
    )


_BODIES = {"sglang": _sglang, "vllm": _vllm, "llamacpp": _llamacpp, "sim": _sim}
_TITLES = {
    "sglang": "SGLang with EAGLE-3 speculation against the autoregressive baseline.",
    "vllm": "vLLM with EAGLE-3 speculation (k speculative tokens) against k = 0.",
    "llamacpp": "llama.cpp's llama-server with n-gram speculation against the autoregressive baseline.",
    "sim": "specsweep's built-in simulator: AR and linear baselines against a small DDTree matrix (no GPU).",
}


def starter_experiment(engine: str, host: str, *, name: str | None = None, file: str = "FILE") -> str:
    """The text of a commented experiment file for ``engine`` on a ``host`` kind (``ssh`` or ``local``)."""
    if engine not in _BODIES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if host not in HOST_KINDS:
        raise ValueError(f"host must be one of {', '.join(HOST_KINDS)}, got {host!r}")
    name = name or default_name(engine)
    description = json.dumps(_TITLES[engine].rstrip("."), ensure_ascii=False)  # a YAML string, quoted
    header = _HEADER.format(title=_TITLES[engine], name=name, description=description).replace("{file}", file)
    # The simulator's starter is a first run of the tool, minutes long; a real engine's measures for real.
    # 32 requests: every level (C=16 at most) is reached, and two repeats of each point tell AR, the linear
    # drafter and the trees apart beyond noise (ETA 6m08s, 6m21s measured on a 2-core machine).
    load = {"requests": 32, "max_tokens": 64, "repeats": 2} if engine == "sim" else {}
    return header + _BODIES[engine](host) + _LOAD.format(**{"requests": 32, "max_tokens": 256, "repeats": 3, **load})
