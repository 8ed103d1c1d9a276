"""The Host interface: where commands run, and the few file operations a Service needs on top of them.

A Host is as thin as an httpx transport: run a command and give back its exit code and output; a non-zero
exit is an answer (``systemctl is-active`` exits 3 for a failed unit), never an exception. Exceptions are for
a command that could not run at all (:class:`~orchestrator.errors.CommandError`: a timeout, a dropped
connection that could not be retried) or a host that cannot be reached
(:class:`~orchestrator.errors.HostConnectionError`, :class:`~orchestrator.errors.HostKeyError`).

A ``str`` command is a POSIX ``sh`` script; a ``list`` is one program and its arguments, quoted for you. The
file operations are built on ``run`` (so ``sudo`` applies to them exactly as to commands, and a local and a
remote host behave alike): ``write_text`` writes a temporary file beside the target, checks it holds every
byte sent, syncs it, renames it and syncs the directory, so a reader never sees half a file: a controller
killed while it writes (its stdin closed early) leaves the old file, or none, never a torn one renamed into
place (issue 49).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from orchestrator.errors import CommandError
from orchestrator.quoting import shell_join, shell_quote

__all__ = ["CommandResult", "Host", "ShellFileOps", "as_script", "summarize_command"]


@dataclass(frozen=True)
class CommandResult:
    """What a command did: its exit code and output (decoded as UTF-8, undecodable bytes replaced).

    ``stdout_bytes`` keeps the exact bytes, for callers that count offsets (log cursors).
    """

    exit_code: int
    stdout: str
    stderr: str
    stdout_bytes: bytes = field(default=b"", repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def check(self, what: str, *, host: str | None = None) -> CommandResult:
        """Return self when the command succeeded, else raise CommandError naming ``what`` and its stderr."""
        if self.exit_code != 0:
            detail = (self.stderr.strip() or self.stdout.strip()).splitlines()
            last = detail[-1] if detail else "no output"
            raise CommandError(f"{what} failed (exit {self.exit_code}): {last}", host=host)
        return self


@runtime_checkable
class Host(Protocol):
    """Where commands run: the machine serving the model, local or over SSH."""

    name: str

    def run(
        self,
        cmd: str | Sequence[str],
        timeout: float | None = None,
        *,
        input: str | None = None,
        idempotent: bool = True,
    ) -> CommandResult:
        """Run ``cmd`` (a sh script, or argv) and return its result; raise only when it could not run.

        ``input`` is written to the command's stdin. ``idempotent=False`` says the command must not run twice:
        after a dropped connection it is not retried (an SSH host raises instead).
        """
        ...

    def write_text(self, path: str, text: str, mode: int = 0o644) -> None:
        """Write ``text`` to ``path`` atomically (temporary file + rename), creating the parent directory."""
        ...

    def read_text(self, path: str) -> str:
        """The content of ``path``; CommandError when it cannot be read."""
        ...

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists on the host."""
        ...

    def close(self) -> None:
        """Release connections; the host can still be used afterwards (it reconnects)."""
        ...


def as_script(cmd: str | Sequence[str]) -> str:
    """A sh script for ``cmd``: a string is taken as a script, a sequence is quoted word by word."""
    if isinstance(cmd, str):
        return cmd
    return shell_join(list(cmd))


def summarize_command(cmd: str | Sequence[str], limit: int = 80) -> str:
    """A one-line, bounded rendering of a command for error messages."""
    text = " ".join(as_script(cmd).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Written as one script so that it is one round trip, and runs under sudo as a whole when sudo applies.
_WRITE_SCRIPT = """set -e
p={path}
mkdir -p -- "$(dirname -- "$p")"
t=$(mktemp -- "$p.specsweep-XXXXXX")
trap 'rm -f -- "$t"' EXIT
cat > "$t"
n=$(wc -c < "$t")
[ "$n" -eq {size} ] || {{ echo "only $n of {size} bytes arrived: $p left as it was" >&2; exit 75; }}
chmod {mode:o} -- "$t"
sync -- "$t" 2>/dev/null || true
mv -f -- "$t" "$p"
trap - EXIT
sync -- "$(dirname -- "$p")" 2>/dev/null || true
"""


class ShellFileOps:
    """``write_text``/``read_text``/``exists`` for any host that has ``run`` and ``name``."""

    name: str

    def run(
        self,
        cmd: str | Sequence[str],
        timeout: float | None = None,
        *,
        input: str | None = None,
        idempotent: bool = True,
    ) -> CommandResult:
        raise NotImplementedError

    def write_text(self, path: str, text: str, mode: int = 0o644) -> None:
        script = _WRITE_SCRIPT.format(path=shell_quote(path), mode=mode, size=len(text.encode()))
        self.run(script, input=text).check(f"writing {path}", host=self.name)

    def read_text(self, path: str) -> str:
        return self.run(["cat", "--", path]).check(f"reading {path}", host=self.name).stdout

    def exists(self, path: str) -> bool:
        result = self.run(["test", "-e", path])
        if result.exit_code not in (0, 1):
            result.check(f"checking {path}", host=self.name)
        return result.exit_code == 0
