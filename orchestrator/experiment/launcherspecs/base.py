"""What every launcher's spec is: a strict model with a ``kind``, the target its records name, and the checks
across sections it alone knows (what service it runs, which placeholders ``server.url`` may use).

A spec module subclasses :class:`LauncherSpecBase` with ``kind: Literal["name"] = "name"``; defining the class
registers it (:func:`spec_classes`), and ``launcherspecs/__init__.py`` imports every module of the package.
"""

from __future__ import annotations

from typing import Any, ClassVar

from orchestrator.experiment.common import _Strict

__all__ = ["LauncherSpecBase", "Problem", "spec_classes"]

#: A problem of the experiment found by a launcher's spec: the key path and the message.
Problem = tuple[tuple[Any, ...], str]

_REGISTERED: dict[str, type[LauncherSpecBase]] = {}


def spec_classes() -> tuple[type[LauncherSpecBase], ...]:
    """Every launcher spec defined so far, in the order they were defined."""
    return tuple(_REGISTERED.values())


class LauncherSpecBase(_Strict):
    """A ``launcher:`` section (a subclass per kind). Its defaults are those of a launcher that runs the
    service's command itself, somewhere else than the hosts: a ``process`` service, no host or hosts beside."""

    kind: str

    #: The launcher in a message (``a Slurm launcher``).
    title: ClassVar[str] = "the launcher"
    #: Placeholders ``server.url`` may use with this launcher besides ``{host}`` (Slurm: ``{node}``).
    url_fields: ClassVar[frozenset[str]] = frozenset()
    #: The key a deployment asks this launcher for GPUs with (said where a host's ``gpus`` or
    #: ``gpus_per_deployment`` is set to no effect).
    gpu_request: ClassVar[str] = "the launcher's own settings"

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        _REGISTERED[cls.spec_kind()] = cls

    @classmethod
    def spec_kind(cls) -> str:
        """The ``kind`` this spec is selected by (its field's default)."""
        return str(cls.model_fields["kind"].default)

    @property
    def target(self) -> str:
        """The name the records of this launcher carry (their ``host``)."""
        return self.kind

    def problems(self, exp: Any) -> list[Problem]:
        """What the rest of ``exp`` must be for this launcher: checked across sections once every section is
        valid (``experiment/checks.py``). The default: no host beside it, and a process service (its
        command is what the launcher runs)."""
        from orchestrator.experiment.service import ProcessServiceSpec

        out: list[Problem] = []
        if exp.host is not None or exp.hosts is not None:
            out.append((("launcher",), f"set either launcher or host/hosts, not both: {self.hosts_note}"))
        if not isinstance(exp.service, ProcessServiceSpec):
            out.append(
                (
                    ("service", "kind"),
                    f"{self.runs_as}: use service kind process (its command is the {self.command_of}'s), not "
                    f"{exp.service.kind}",
                )
            )
        if exp.server.via == "ssh" and not self.tunnels:
            out.append(
                (
                    ("server", "via"),
                    f"via: ssh tunnels through a host's SSH connection, which {self.title} has none of; drop via",
                )
            )
        return out

    def warnings(self, exp: Any) -> list[Problem]:
        """Settings of this launcher that work but should be looked at (a warning at validate, with the key's
        file:line); none by default."""
        return []

    #: Whether ``server.via: ssh`` can reach the servers (through an SSH connection the launcher holds).
    tunnels: ClassVar[bool] = False
    #: Why a launcher and hosts cannot both be set (the end of the message).
    hosts_note: ClassVar[str] = "the launcher decides where deployments run"
    #: What runs the server (the start of the message that asks for a process service).
    runs_as: ClassVar[str] = "the launcher runs the server as a process"
    #: What runs the command (``job``, ``container``).
    command_of: ClassVar[str] = "launcher"
