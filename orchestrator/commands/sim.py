"""`specsweep sim`: run the built-in simulated speculative-decoding server in the foreground.

The flags are the simulator's own (``python -m orchestrator.sim --help`` lists the same ones): this command
passes its arguments through to the one parser, so the two entry points cannot drift apart.
"""

from __future__ import annotations

import typer

from orchestrator.errors import SpecsweepError

HELP = (
    "Run the simulated speculative-decoding server until SIGTERM/Ctrl-C, speaking one engine's dialect (its log "
    "lines, /metrics, responses and health endpoints as the engine writes them). Flags: --engine "
    "{sglang,vllm,llamacpp} --engine-version --host --port --algorithm {ar,linear,ddtree} --draft-tokens --budget "
    "--topk --profile {k26,tiny,firehose,metronome} --fault NAME[=V] --seed --load-seconds --decode-log-interval "
    "--log-stats-interval --tp-size --dp-size --ep-size --slots --per-request-spec-decode-metrics --ttft-ms "
    "--itl-ms --model; `specsweep sim --help` explains each."
)


def register(app: typer.Typer) -> None:
    """Add the ``sim`` command to ``app``."""

    @app.command(
        "sim",
        help=HELP,
        add_help_option=False,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    )
    def sim(ctx: typer.Context) -> None:
        # Imported here: the simulator pulls in aiohttp, which other commands need not pay for.
        from orchestrator.sim.config import parse_args
        from orchestrator.sim.runner import run

        config = parse_args(ctx.args, prog="specsweep sim")
        code = run(config)
        if code:
            # An error rather than typer.Exit: the CLI's non-standalone mode would swallow the exit code.
            raise SpecsweepError(f"the simulator stopped with exit code {code} (its log above says why)")
