"""The ``specsweep`` command line: thin. Each command parses its arguments, calls one library function, and
renders what comes back; every ``SpecsweepError`` becomes one line on stderr and the error's exit code.

Commands live one per module in ``orchestrator/commands/`` and register themselves on ``app``.
"""

from __future__ import annotations

import importlib
import sys

import typer

from orchestrator import __version__
from orchestrator.errors import SpecsweepError

__all__ = ["app", "main"]

app = typer.Typer(
    name="specsweep",
    help=(
        "Sweep speculative-decoding configurations of an LLM server (SGLang, vLLM, llama.cpp, or the built-in "
        "simulator) over SSH and systemd, measure them under load, and compare them with their baselines."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# One module per command, in the order ``--help`` lists them.
COMMANDS = (
    "validate",
    "plan",
    "sweep",
    "report",
    "compare",
    "playbook",
    "restore",
    "doctor",
    "load",
    "parse",
    "sim",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"specsweep {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Sweep speculative-decoding configurations and compare them with their baselines."""


for _name in COMMANDS:
    importlib.import_module(f"orchestrator.commands.{_name}").register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning our own errors into one line and an exit code.

    Usage errors, ``--help`` and exit codes are click's (standalone mode); only ``SpecsweepError`` is ours.
    """
    try:
        app(args=argv, prog_name="specsweep")
    except SpecsweepError as exc:
        message = str(exc).replace("\n", " ")
        typer.secho(f"specsweep: error: {message}", err=True, fg=typer.colors.RED)
        sys.exit(exc.exit_code)
