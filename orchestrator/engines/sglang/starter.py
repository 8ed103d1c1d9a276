"""``specsweep init --engine sglang`` and ``--engine sim``: SGLang with EAGLE-3, and the simulator speaking SGLang.

SGLang 0.5.23's flags: ``--model-path`` (``sglang/srt/arg_groups/fields/model.py``), ``--port`` (default 30000,
``fields/serving.py``), ``--tp-size`` (``fields/parallel.py``), ``--enable-metrics`` (``fields/observability.py``),
``--speculative-algorithm`` (EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, ...),
``--speculative-draft-model-path``, ``--speculative-num-steps``, ``--speculative-eagle-topk`` and
``--speculative-num-draft-tokens`` (``fields/spec.py``); each flag is its field's name with ``-`` for ``_``
(``arg_groups/arg_utils.py``). The simulator: ``python -m orchestrator.sim`` (``specsweep sim --help``).
"""

from __future__ import annotations

from orchestrator.engines.starter import Starter

__all__ = ["sglang_starter", "sim_starter"]


def sglang_starter(host: str) -> Starter:
    python = "/opt/venv/bin/python" if host == "ssh" else "python3"
    return Starter(
        title="SGLang with EAGLE-3 speculation against the autoregressive baseline.",
        name="sglang-eagle3",
        port=30000,
        unit="sglang.service",
        command=(
            "{server_python} -m sglang.launch_server --model-path {model} --tp-size {tp} --port 30000 --host 0.0.0.0\n"
            "    --enable-metrics {spec_args}"
        ),
        vars=(
            "vars:\n"
            f"  server_python: {python}{' ' * max(1, 23 - len(python))}# the Python that has sglang installed\n"
            "  model: meta-llama/Llama-3.1-8B-Instruct\n"
            "  draft_model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B   # an EAGLE-3 head trained for the model\n"
            "  tp: 1                              # tensor parallel size (GPUs)\n"
        ),
        server=(
            "  model: meta-llama/Llama-3.1-8B-Instruct   # the name requests use (SGLang serves the model path)\n"
            "  ready_timeout: 15m                 # how long one start may take before it counts as failed\n"
            "  expected_load_time: 3m             # for the first ETA; specsweep learns the real one as it runs\n"
        ),
        variants=(
            "engine: sglang                       # which log lines and counters to read\n"
            "# Each variant is a server configuration family; `matrix` expands it (one deployment = one restart).\n"
            "variants:\n"
            '  autoregressive: {spec_args: ""}\n'
            "  eagle3:\n"
            "    spec_args: >-\n"
            "      --speculative-algorithm EAGLE3 --speculative-draft-model-path {draft_model}\n"
            "      --speculative-num-steps {steps} --speculative-eagle-topk {topk} "
            "--speculative-num-draft-tokens {draft}\n"
            "    # a chain of 3 drafts (topk 1: draft tokens = steps + 1), then longer chains and a tree\n"
            "    matrix: {steps: [3], topk: [1], draft: [4]}\n"
            "    include:\n"
            "      - {steps: 5, topk: 1, draft: 6}\n"
            "      - {steps: 5, topk: 4, draft: 16}\n"
            "baselines: [autoregressive]          # measured first; every point is compared with them\n"
        ),
    )


def sim_starter(host: str) -> Starter:
    # On this machine the controller's own Python runs the simulator; on another host specsweep must be
    # installed there (its `specsweep sim` is the same program). A decode-log line every 10 decode steps, not
    # SGLang's 40: a tree point at C=16 runs about 32 steps, and its log window would hold no metric line.
    program = "{python} -m orchestrator.sim" if host == "local" else "specsweep sim"
    return Starter(
        title="specsweep's built-in simulator: AR and linear baselines against a small DDTree matrix (no GPU).",
        name="sim-demo",
        port=18190,
        command=(
            f"{program} --engine sglang --host {'127.0.0.1' if host == 'local' else '0.0.0.0'} --port 18190 "
            "--profile k26 --load-seconds 1 --seed 7\n"
            "    --decode-log-interval 10 {spec_args}"
        ),
        server=("  model: sim\n  ready_timeout: 60s\n  expected_load_time: 2s\n  expected_tokens_per_second: 95\n"),
        variants=(
            "engine: sim                          # the simulator speaks SGLang's dialect here (--engine above)\n"
            "variants:\n"
            '  autoregressive: {spec_args: "--algorithm ar"}\n'
            '  linear: {spec_args: "--algorithm linear --draft-tokens 7"}\n'
            "  ddtree:\n"
            '    spec_args: "--algorithm ddtree --budget {budget} --topk {topk}"\n'
            "    matrix: {budget: [7, 16], topk: [1, 4]}\n"
            "baselines: [autoregressive, linear]  # the first is the AR baseline, the second the linear one\n"
        ),
        # The simulator's starter is a first run of the tool, minutes long; a real engine's measures for real.
        # 32 requests: every level (C=16 at most) is reached, and two repeats of each point tell AR, the linear
        # drafter and the trees apart beyond noise (ETA 6m08s, 6m21s measured on a 2-core machine).
        load={"requests": 32, "max_tokens": 64, "repeats": 2},
    )
