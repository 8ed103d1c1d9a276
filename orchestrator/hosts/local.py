"""LocalHost: the controller itself as a host (the local demo, a GPU box that runs specsweep itself).

Commands run through ``/bin/sh`` in their own session, so a timeout ends the whole process group and not
just the shell. With ``sudo="auto"`` and a non-root user, every command runs through ``sudo -n`` (never a
password prompt: it fails instead, and says so).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from typing import Literal

from orchestrator.errors import CommandError
from orchestrator.hosts.base import CommandResult, ShellFileOps, as_script, summarize_command

__all__ = ["LocalHost"]

SudoPolicy = Literal["auto", "always", "never"]


class LocalHost(ShellFileOps):
    """Run commands on this machine."""

    def __init__(self, name: str = "local", *, sudo: SudoPolicy = "never", command_timeout: float = 60.0) -> None:
        self.name = name
        self.address = "127.0.0.1"
        self.command_timeout = command_timeout
        self._sudo = sudo == "always" or (sudo == "auto" and os.geteuid() != 0)

    def __repr__(self) -> str:
        return f"LocalHost({self.name!r})"

    def run(
        self,
        cmd: str | Sequence[str],
        timeout: float | None = None,
        *,
        input: str | None = None,
        idempotent: bool = True,
    ) -> CommandResult:
        script = as_script(cmd)
        argv = ["/bin/sh", "-c", script]
        if self._sudo:
            argv = ["sudo", "-n", "--", "/bin/sh", "-c", script]
        limit = self.command_timeout if timeout is None else timeout
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise CommandError(f"cannot run {summarize_command(cmd)}: {exc}", host=self.name) from exc
        try:
            out, err = proc.communicate(input.encode() if input is not None else None, timeout=limit)
        except subprocess.TimeoutExpired:
            self._kill_group(proc)
            raise CommandError(f"{summarize_command(cmd)} did not finish within {limit:g} s", host=self.name) from None
        except BaseException:
            self._kill_group(proc)
            raise
        return CommandResult(
            exit_code=proc.returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            stdout_bytes=out,
        )

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()

    def close(self) -> None:
        """Nothing to release."""
