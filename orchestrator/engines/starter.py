"""What an engine gives ``specsweep init`` for its starter experiment file: the parts only the engine knows.

An engine's :meth:`~orchestrator.engines.base.Engine.starter` returns a :class:`Starter` for a kind of host
(``ssh``: another machine, a systemd unit; ``local``: this machine, a plain process), or None when it offers no
starter file. orchestrator/experiment/starter.py assembles the file from it and the parts every engine shares
(the header, the host, the service block, the load), so a new engine's starter lives in its own package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Starter"]


@dataclass(frozen=True)
class Starter:
    """One engine's starter file, in the YAML text of its blocks (each line ending in a newline)."""

    #: The file's first comment and (without its full stop) its ``description``.
    title: str
    #: The experiment's default name (and so the file's: ``<name>.yaml``).
    name: str
    #: The server's port in ``server.url``.
    port: int
    #: The service's command template (``exec_start`` of a systemd drop-in, ``command`` of a process).
    command: str
    #: The systemd unit on an SSH host; empty: a plain process everywhere (the simulator needs no unit).
    unit: str = ""
    #: The ``vars:`` block, its key included; empty for none.
    vars: str = ""
    #: Lines under the service block (``  environment:`` ...).
    environment: str = ""
    #: The ``server:`` block's lines after ``url``, each indented two spaces.
    server: str = ""
    #: The ``engine:`` line, the variants and the baselines.
    variants: str = ""
    #: The load block's values where they differ from a real engine's: requests, max_tokens, repeats.
    load: Mapping[str, int] = field(default_factory=dict)
