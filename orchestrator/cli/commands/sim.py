"""`specsweep sim`: run the built-in simulated speculative-decoding server in the foreground.

The flags are the simulator's own (``python -m orchestrator.sim --help`` lists the same ones): this command
passes its arguments through to the one parser, so the two entry points cannot drift apart.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any

import typer

from orchestrator.errors import SpecsweepError

HELP = (
    "Run the simulated speculative-decoding server, speaking one engine's dialect (SGLang's, vLLM's or llama.cpp's "
    "log lines, /metrics, responses and health endpoints), until SIGTERM or Ctrl-C; `specsweep sim --help` lists "
    "its flags."
)


#: The flags ``specsweep sim --help`` shows: what a first run needs. The others (dialect details, timing noise,
#: fake GPUs, llama.cpp slot files) are in docs/simulator.md and ``python -m orchestrator.sim --help``.
ESSENTIAL = (
    "--engine",
    "--host",
    "--port",
    "--model",
    "--algorithm",
    "--draft-tokens",
    "--budget",
    "--topk",
    "--profile",
    "--seed",
    "--load-seconds",
    "--fault",
)


def _help_app(parser: argparse.ArgumentParser) -> typer.Typer:
    """A typer command with the simulator's essential flags (:data:`ESSENTIAL`), only to print them in typer's
    help style: the parsing stays the simulator's own parser's (so the two entry points cannot drift apart).
    A flag's choices are listed in its help, as words (a type column of ``sglang|vllm|llamacpp`` was cut
    mid-word at 80 columns)."""
    parameters = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        if not set(action.option_strings) & set(ESSENTIAL):
            continue
        flag = isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction)
        text = action.help or ""
        if action.choices:
            metavar = "NAME"
            if not all(str(c) in text for c in action.choices):
                text += f"; one of: {', '.join(str(c) for c in action.choices)}"
        elif flag:
            metavar = ""
        else:
            metavar = action.metavar if isinstance(action.metavar, str) else "VALUE"
        if action.option_strings == ["--fault"]:
            text = "inject a fault (repeatable), e.g. fail-start, http-500-rate=0.1, stall; the list: docs/simulator.md"
        elif isinstance(action, argparse._AppendAction):
            text += " (repeatable)"
        if action.default not in (None, "", [], False, argparse.SUPPRESS) and "default" not in text:
            text += f" [default: {action.default}]"
        option = typer.Option(False if flag else None, *action.option_strings, help=text, metavar=metavar)
        parameters.append(
            inspect.Parameter(
                action.dest, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=bool if flag else str | None
            )
        )

    def sim(**_values: Any) -> None:
        """Run the simulated speculative-decoding server until SIGTERM/Ctrl-C."""

    sim.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    sim.__doc__ = (parser.description or "") + (
        "\n\nStops on SIGTERM or Ctrl-C. The flags a first run needs are below; every flag (dialect details, "
        "timing noise, fake GPUs, faults) is in docs/simulator.md, and `python -m orchestrator.sim --help` lists "
        "them all (both entry points take the same flags)."
    )
    helper = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})
    helper.command()(sim)
    return helper


def _print_help(prog: str) -> None:
    from orchestrator.cli.app import Command
    from orchestrator.sim.config import build_parser

    helper = _help_app(build_parser(prog))
    for info in helper.registered_commands:
        info.cls = Command
    try:
        helper(args=["--help"], prog_name=prog, standalone_mode=True)
    except SystemExit:
        return


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

        if any(arg in ("-h", "--help") for arg in ctx.args):
            _print_help("specsweep sim")
            return
        config = parse_args(ctx.args, prog="specsweep sim")
        code = run(config)
        if code:
            # An error rather than typer.Exit: the CLI's non-standalone mode would swallow the exit code.
            raise SpecsweepError(f"the simulator stopped with exit code {code} (its log above says why)")
