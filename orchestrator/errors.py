"""specsweep's one error hierarchy.

Third-party errors (paramiko, socket, aiohttp, httpx, yaml, pydantic, OS errors) are translated into these at
the boundary where they happen, with the context a user needs (file and line, host name, URL). The CLI catches
``SpecsweepError`` and prints ``str(error)`` as one line, exiting with ``error.exit_code``; nothing else is
caught there, so an uncaught non-``SpecsweepError`` is a bug.

    SpecsweepError                      exit 1 unless said otherwise
    ├── ConfigError                     exit 2: a bad experiment or playbook file (file, line, column, key path)
    ├── HostError                       a host could not be reached or could not do what was asked
    │   ├── HostConnectionError         SSH connect/auth/transport failures, dropped connections
    │   ├── HostKeyError                an unknown or changed host key (names host and fingerprint)
    │   ├── CommandError                a command could not run or timed out (not: it ran and exited non-zero)
    │   └── HostLockedError             another specsweep run holds the host
    ├── ServiceError                    applying, inspecting or restoring a service configuration failed
    │   └── StartFailed                 the server never became healthy (failed unit, exit, timeout)
    ├── LoadError                       the load generator could not run at all (bad URL, bad prompts file)
    ├── MetricsError                    metrics could not be read (not: a line could not be parsed; that is counted)
    ├── StoreError                      a run directory could not be written or read
    │   └── SchemaVersionError          a run directory written by an incompatible version
    ├── PlaybookFailed                  a playbook ran and an expectation did not hold (exit 1)
    └── Interrupted                     the user pressed Ctrl-C or sent SIGTERM (exit 130)
"""

from __future__ import annotations

__all__ = [
    "CommandError",
    "ConfigError",
    "HostConnectionError",
    "HostError",
    "HostKeyError",
    "HostLockedError",
    "Interrupted",
    "LoadError",
    "MetricsError",
    "PlaybookFailed",
    "SchemaVersionError",
    "ServiceError",
    "SpecsweepError",
    "StartFailed",
    "StoreError",
]


class SpecsweepError(Exception):
    """The base of every error specsweep raises on purpose. ``str()`` is the one line the CLI prints."""

    exit_code: int = 1


class ConfigError(SpecsweepError):
    """A bad experiment or playbook file. The message names the file, line, column and key path."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        key: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.key = key
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.file is not None:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        key = f"{self.key}: " if self.key else ""
        # One line, always: keys and values from a file may hold newlines or control characters.
        text = f"{where}{key}{self.message}"
        return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class HostError(SpecsweepError):
    """A host could not be reached or could not do what was asked. ``host`` names it."""

    def __init__(self, message: str, *, host: str | None = None) -> None:
        self.host = host
        super().__init__(f"{host}: {message}" if host else message)


class HostConnectionError(HostError):
    """SSH connection, authentication or transport failure (including a connection dropped mid-command)."""


class HostKeyError(HostError):
    """The host's key is unknown or differs from known_hosts; never accepted silently."""


class CommandError(HostError):
    """A command could not be run on the host or did not finish within its timeout."""


class HostLockedError(HostError):
    """Another specsweep run holds the host's lock."""


class ServiceError(SpecsweepError):
    """A service configuration could not be applied, inspected or restored."""


class StartFailed(ServiceError):
    """The server never became healthy. ``evidence`` holds the journal or log lines that explain why."""

    def __init__(self, message: str, *, evidence: list[str] | None = None, reason: str = "failed") -> None:
        self.evidence = list(evidence or [])
        self.reason = reason
        super().__init__(message)


class LoadError(SpecsweepError):
    """The load generator could not run at all (as opposed to requests that failed, which are counted)."""


class MetricsError(SpecsweepError):
    """Server metrics could not be read at all (unparseable lines are skipped and counted, not raised)."""


class StoreError(SpecsweepError):
    """A run directory could not be written or read."""


class SchemaVersionError(StoreError):
    """A run directory carries a schema version this specsweep cannot read."""


class PlaybookFailed(SpecsweepError):
    """A playbook ran to the end and at least one expectation failed."""


class Interrupted(SpecsweepError):
    """The user interrupted the run (Ctrl-C, SIGTERM); the host has been restored."""

    exit_code = 130
