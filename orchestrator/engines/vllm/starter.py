"""``specsweep init --engine vllm``: vLLM with EAGLE-3 against k = 0.

vLLM 0.33.0: ``vllm serve MODEL --port`` (default 8000), ``--speculative-config`` a JSON object
(``vllm/engine/arg_utils.py``) with ``method`` (``eagle``, ``eagle3``, ``ngram``, ``draft_model``, ...), ``model``
and ``num_speculative_tokens`` (``vllm/config/speculative.py``).
"""

from __future__ import annotations

from orchestrator.engines.starter import Starter

__all__ = ["vllm_starter"]


def vllm_starter(host: str) -> Starter:
    program = "/opt/venv/bin/vllm" if host == "ssh" else "vllm"
    return Starter(
        title="vLLM with EAGLE-3 speculation (k speculative tokens) against k = 0.",
        name="vllm-eagle3",
        port=8000,
        unit="vllm.service",
        command=f"{program} serve {{model}} --port 8000 {{spec_args}}",
        vars=(
            "vars:\n"
            "  model: meta-llama/Llama-3.1-8B-Instruct\n"
            "  draft_model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B   # an EAGLE-3 head trained for the model\n"
        ),
        environment=(
            "  environment:\n    VLLM_LOGGING_LEVEL: INFO         # vLLM logs its spec-decoding stats at INFO\n"
        ),
        server=("  model: meta-llama/Llama-3.1-8B-Instruct\n  ready_timeout: 15m\n  expected_load_time: 3m\n"),
        variants=(
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
        ),
    )
