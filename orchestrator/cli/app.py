"""The ``specsweep`` command line: thin. Each command parses its arguments, calls one library function, and
renders what comes back; every ``SpecsweepError`` becomes one line on stderr and the error's exit code, and any
other exception (a bug) one line naming where its traceback was saved, and exit 1 (:func:`main`).

Commands live one per module in ``orchestrator/cli/commands/`` and register themselves on ``app``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import tempfile
import threading
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
import typer.rich_utils as typer_rich_utils
from rich.columns import Columns
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text
from typer.core import TyperCommand, TyperGroup, TyperOption

from orchestrator import __version__
from orchestrator.errors import SpecsweepError

__all__ = ["app", "internal_error", "main"]


def _no_flag_types(params: list[Any], ctx: Any = None) -> list[Any]:
    """Flags take no value: give them an empty type column in ``--help`` (typer's rich help prints ``<bool>``
    beside every flag, ``--help`` and ``--report/--no-report`` included, unless a metavar is set). A number
    with a range says ``<int> [x>=1]``, not ``<int range> [x>=1]``: at 80 columns every column of the
    options table counts, and a wide type column is what made rich cut option names
    (``--first-token-timeo…``)."""
    for param in params:
        if not isinstance(param, TyperOption) or param.metavar is not None:
            continue
        if param.is_flag:
            param.metavar = ""
        elif ctx is not None and getattr(param.type_descriptor, "is_ranged", False):
            param.metavar = param.display_type(ctx).replace(" range>", ">")
    return params


def _unwrap(text: str | None) -> str | None:
    """A docstring's paragraphs as one line each, so that rich wraps them at the terminal's width (typer keeps
    the source's line breaks after the first paragraph: at 80 columns, sentences broke mid-line). A paragraph
    of a list or one marked ``\b`` keeps its lines."""
    if not text:
        return text
    # A docstring's reST literals (``name``) are shown as the help's own (`name`), not as literal double quotes.
    paragraphs = inspect.cleandoc(text).replace("``", "`").split("\n\n")
    kept = [
        p
        if p.startswith("\b") or any(line.lstrip().startswith(("- ", "* ")) for line in p.splitlines())
        else " ".join(line.strip() for line in p.splitlines())
        for p in paragraphs
    ]
    return "\n\n".join(kept)


class _HelpTable(Table):
    """The options table of typer's rich help, laid out so that nothing is cut at 80 columns: an option's
    names and type never wrap nor shrink (rich cut them: ``--first-token-timeo…``), only the help column wraps,
    and a word too long for it folds onto the next line instead of ending in ``…``. Typer builds its tables
    with ``typer.rich_utils.Table``; this class stands in for it there (help output only)."""

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        # Typer groups an option's help, default and range in rich Columns, whose own grid cuts a long word
        # with "…": one Text instead, which wraps between words and folds a word too long for the column.
        cells = [
            Text(" ").join([r for r in cell.renderables if isinstance(r, Text)])
            if isinstance(cell, Columns) and all(isinstance(r, Text) for r in cell.renderables)
            else cell
            for cell in renderables
        ]
        super().add_row(*cells, **kwargs)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.show_header and len(self.columns) > 2:
            for column in self.columns:
                column.overflow = "fold"
            for column in self.columns[:-2]:  # the names; the type folds, the help wraps
                column.no_wrap = True
        yield from super().__rich_console__(console, options)


typer_rich_utils.Table = _HelpTable  # type: ignore[misc]


class Command(TyperCommand):
    """Every specsweep command: typer's help, flags without a type, paragraphs wrapped at the width."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = _unwrap(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        return _no_flag_types(list(super().get_params(ctx)), ctx)


class Group(TyperGroup):
    """The ``specsweep`` group: typer's help, flags without a type, paragraphs wrapped at the width."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = _unwrap(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        return _no_flag_types(list(super().get_params(ctx)), ctx)


app = typer.Typer(
    name="specsweep",
    cls=Group,
    help=(
        "Sweep speculative-decoding configurations of an LLM server (SGLang, vLLM, llama.cpp, or the built-in "
        "simulator) over SSH and systemd, measure them under load, and compare them with their baselines."
    ),
    no_args_is_help=True,
    # --install-completion / --show-completion: shell completion for bash, zsh, fish and PowerShell.
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# One module per command, in the order ``--help`` lists them (a dash in a name is an underscore in its module's).
COMMANDS = (
    "init",
    "validate",
    "plan",
    "sweep",
    "ls",
    "report",
    "recommend",
    "verify-schedule",
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
    importlib.import_module(f"orchestrator.cli.commands.{_name.replace('-', '_')}").register(app)
for _info in app.registered_commands:
    if _info.cls in (None, TyperCommand):
        _info.cls = Command


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning our own errors into one line and an exit code.

    Usage errors, ``--help`` and exit codes are click's (standalone mode); ``SpecsweepError`` is ours. Anything
    else is a bug, and still no traceback reaches the terminal: it becomes one line that names the run directory
    (when the error happened while one was open), the file the traceback was saved to (``traceback.txt`` in that
    run directory, else under ~/.cache/specsweep/tracebacks) and whether the hosts were restored, and exit 1.
    The sweep restores its hosts on every way out, this one included, before the error reaches here. Set
    ``SPECSWEEP_TRACEBACK=1`` to also print the traceback.
    """
    from orchestrator.redaction import RedactingStream

    previous_hook = threading.excepthook
    threading.excepthook = _thread_excepthook
    streams = sys.stdout, sys.stderr
    # Piped output (a CI log, a file, another program) passes the redactor; a terminal's stream is left as it is
    # (rich's live display measured the stream itself and hung behind a wrapper under a pseudo-terminal), and
    # rich's consoles redact what they render themselves (orchestrator/cli/console.py).
    if not sys.stdout.isatty():
        sys.stdout = RedactingStream(sys.stdout)
    if not sys.stderr.isatty():
        sys.stderr = RedactingStream(sys.stderr)
    try:
        app(args=argv, prog_name="specsweep")
    except SpecsweepError as exc:
        _error_line(f"specsweep: error: {exc}")
        sys.exit(exc.exit_code)
    except Exception as exc:  # the last line of defence: a bug, reported in one line
        _error_line(internal_error(exc, argv if argv is not None else sys.argv[1:]))
        sys.exit(1)
    finally:
        threading.excepthook = previous_hook
        sys.stdout, sys.stderr = streams


def _one_line(text: str) -> str:
    """``text`` as one printable line that any terminal encoding can take."""
    flat = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text.replace("\n", " "))
    return flat.encode("utf-8", "backslashreplace").decode("utf-8")


def _error_line(message: str) -> None:
    from orchestrator.redaction import redact_text

    # A failing server's output or an invalid URL may carry a secret: masked by shape and by every value known.
    typer.secho(_one_line(redact_text(message)), err=True, fg=typer.colors.RED)


def internal_error(exc: BaseException, argv: list[str]) -> str:
    """Save the traceback of an unexpected exception and return the one line that says where (and what happened
    to the hosts when a run was under way)."""
    text = "".join(traceback.format_exception(exc))
    run_dir = _run_dir_of(exc)
    saved = _save_traceback(text, argv, run_dir)
    if os.environ.get("SPECSWEEP_TRACEBACK"):
        sys.stderr.write(text)
    what = _one_line(f"{type(exc).__name__}: {exc}")[:300]
    parts = [f"specsweep: internal error (a bug in specsweep, please report it): {what}"]
    if run_dir is not None:
        parts.append(f"run directory: {run_dir} ({_hosts_outcome(run_dir)})")
    parts.append(f"traceback saved to {saved}" if saved else "the traceback could not be saved")
    return "; ".join(parts)


def _run_dir_of(exc: BaseException) -> Path | None:
    """The run directory open where ``exc`` was raised: the innermost frame of its traceback that holds a
    RunStore (the sweep's, a playbook's), also through the exceptions it was raised from."""
    from orchestrator.runs.store import RunStore

    found: Path | None = None
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            for value in list(tb.tb_frame.f_locals.values()):
                try:
                    store = value if isinstance(value, RunStore) else getattr(value, "store", None)
                except Exception:  # an object whose attributes misbehave: not a holder of a run
                    continue
                if isinstance(store, RunStore):
                    found = store.path
            tb = tb.tb_next
        if found is not None:
            return found
        current = current.__cause__ or current.__context__
    return None


def _save_traceback(text: str, argv: list[str], run_dir: Path | None) -> Path | None:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    header = f"# specsweep {__version__} at {stamp}: specsweep {' '.join(argv)}\n"
    body = (header + text).encode("utf-8", "backslashreplace")
    targets: list[Path] = []
    if run_dir is not None:
        targets.append(run_dir / "traceback.txt")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specsweep" / "tracebacks"
    targets += [
        cache / f"{stamp}-{os.getpid()}.txt",
        Path(tempfile.gettempdir()) / f"specsweep-{stamp}-{os.getpid()}.txt",
    ]
    for target in targets:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "ab") as out:
                out.write(body)
            return target
        except OSError:
            continue
    return None


def _hosts_outcome(run_dir: Path) -> str:
    """What the run's own events say about its hosts (the sweep restores them before an error reaches here)."""
    kinds: list[str] = []
    try:
        with open(run_dir / "events.jsonl", encoding="utf-8", errors="replace") as events:
            for line in events:
                try:
                    kinds.append(str(json.loads(line).get("kind", "")))
                except (ValueError, AttributeError):
                    continue
    except OSError:
        return "its events cannot be read: check the hosts with `specsweep restore --dry-run FILE`"
    if "restore_failed" in kinds:
        return "a host could not be restored: run `specsweep restore FILE`"
    if "restore" in kinds:
        return "hosts restored"
    if "deploy" not in kinds:
        return "no host was changed"
    return "the run did not record restoring its hosts: run `specsweep restore FILE`"


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    """An exception that ends a thread (a host's worker, say) gets the same treatment: one line, not a
    traceback. SystemExit in a thread stays silent, as Python's own hook keeps it."""
    if args.exc_type is SystemExit or args.exc_value is None:
        return
    name = args.thread.name if args.thread is not None else "a thread"
    _error_line(f"{internal_error(args.exc_value, sys.argv[1:])} (in {name})")
