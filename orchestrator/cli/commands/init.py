"""`specsweep init [FILE] --engine E --host ssh|local`: write a commented experiment file to start from."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from orchestrator.cli.console import console
from orchestrator.errors import ConfigError, SpecsweepError
from orchestrator.experiment.starter import HOST_KINDS, default_name, starter_engines, starter_experiment


def init(
    file: Path | None = typer.Argument(
        None,
        metavar="[FILE]",
        help="Where to write the experiment (default: <name>.yaml in this directory).",
        show_default=False,
    ),
    engine: str = typer.Option(
        "sim",
        "--engine",
        "-e",
        help="The engine to sweep: an engine with a starter file (sglang, vllm, llamacpp, sim: the built-in "
        "simulator; an installed engine package may add its own).",
    ),
    host: str = typer.Option(
        "",
        "--host",
        help="ssh (another machine, systemd) or local (this machine, a plain process).",
        show_default="ssh for an engine, local for sim",
    ),
    name: str | None = typer.Option(None, "--name", help="The experiment's name (it names the results folder)."),
    force: bool = typer.Option(False, "--force", help="Overwrite FILE if it exists."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Write a commented experiment file for an engine and a kind of host, ready for validate, plan and sweep.

    The simulator's (--engine sim, the default) runs on this machine with no GPU: `specsweep init && specsweep
    sweep sim-demo.yaml` is a whole sweep.
    """
    engines = starter_engines()
    if engine not in engines:
        raise ConfigError(f"--engine must be one of {', '.join(engines)}, got {engine!r}", key="--engine")
    kind = host or ("local" if engine == "sim" else "ssh")
    if kind not in HOST_KINDS:
        raise ConfigError(f"--host must be one of {', '.join(HOST_KINDS)}, got {host!r}", key="--host")
    name = name or default_name(engine)
    target = file if file is not None else Path(f"{name}.yaml")
    if target.exists() and not force:
        raise SpecsweepError(f"{target} exists; give another FILE, or --force to overwrite it")
    text = starter_experiment(engine, kind, name=name, file=str(target))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SpecsweepError(f"cannot write {target}: {exc.strerror or exc}") from exc
    if as_json:
        typer.echo(json.dumps({"file": str(target), "engine": engine, "host": kind, "name": name}))
        return
    where = {"ssh": "on an SSH host", "local": "on this machine"}.get(kind, f"on a {kind} host")
    console.print(f"wrote {target} ({engine} {where})", markup=False, soft_wrap=True)
    console.print(
        f"next: edit it (the comments say what each key does), then `specsweep validate {target}`, "
        f"`specsweep plan {target}`, `specsweep sweep {target}`",
        markup=False,
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    app.command("init")(init)
