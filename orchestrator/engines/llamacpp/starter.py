"""``specsweep init --engine llamacpp``: llama.cpp's llama-server with n-gram speculation.

The build ``scripts/get-llama-server.sh`` makes (``docs/llamacpp.md``): ``-m``, ``--port`` (default 8080),
``--metrics``, ``--spec-type ngram-simple --spec-ngram-simple-size-n N --spec-ngram-simple-size-m M`` (no draft is
shorter than N: keep M >= N).
"""

from __future__ import annotations

from orchestrator.engines.starter import Starter

__all__ = ["llamacpp_starter"]


def llamacpp_starter(host: str) -> Starter:
    program = "/usr/local/bin/llama-server" if host == "ssh" else "llama-server"
    return Starter(
        title="llama.cpp's llama-server with n-gram speculation against the autoregressive baseline.",
        name="llamacpp-ngram",
        port=8080,
        unit="llama-server.service",
        command=(
            f"{program} -m {{model_file}} --alias {{alias}} --host 0.0.0.0 --port 8080 --metrics -np 4 {{spec_args}}"
        ),
        vars=(
            "vars:\n"
            "  model_file: /models/model.gguf     "
            "# scripts/get-llama-server.sh builds llama-server and fetches a model\n"
            "  alias: model\n"
        ),
        server=(
            "  model: model                       # the --alias above\n"
            "  api: chat                          # `completions` for a base model without a chat template\n"
            "  ready_timeout: 2m\n"
            "  expected_load_time: 10s\n"
            "  expected_tokens_per_second: 20     # per user, for the first ETA\n"
        ),
        variants=(
            "engine: llamacpp\n"
            "variants:\n"
            '  autoregressive: {spec_args: ""}\n'
            "  ngram:\n"
            "    # drafts from the request's own text; a draft is never shorter than size-n, so keep size-m >= size-n\n"
            '    spec_args: "--spec-type ngram-simple --spec-ngram-simple-size-n 3 '
            '--spec-ngram-simple-size-m {size_m}"\n'
            "    matrix: {size_m: [4, 8, 16]}\n"
            "baselines: [autoregressive]\n"
        ),
    )
