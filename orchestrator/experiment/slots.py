"""GPU slots: a host's ``gpus:``, a deployment's ``gpus_per_deployment`` (top level, or per variant) and the
``slots:`` section, with the checks that tie them to the service and the server.

A host that declares ``gpus: N`` (or ``gpus: auto``: the count nvidia-smi reports, read when the run opens)
runs several deployments at once, each on its own disjoint set of GPUs (a *slot*: its own
``CUDA_VISIBLE_DEVICES``, port and service instance); :mod:`orchestrator.plan.slots` packs the deployments
onto those sets. What a slot gives a deployment's templates:

    {slot}        the slot's instance name, its GPU ids joined by '-' ("0", "2-3")
    {slot_gpus}   its GPU ids joined by ',' (what CUDA_VISIBLE_DEVICES is set to)
    {slot_port}   the port it serves at: server.url's port plus the slot's number times ``slots.port_step``

Without GPU slots these render as one slot would: ``0``, an empty string and server.url's port.

``slots:``
    baselines         ``per-slot`` (default): every slot is its own target and measures the baselines itself,
                      so each comparison stays within one slot; ``shared``: the slots of a host share one
                      target and its baselines, after a slot-equivalence check (the first baseline's first
                      point measured on two slots: beyond noise or not, told in the run's events)
    port_step         ports between two slots (1)
    clean_timeout     how long a slot waits for its GPUs to be clean before it starts a server (120 s)
    clean_tolerance_mib
                      how much more memory than before the run a clean GPU may hold (512 MiB)
"""

from __future__ import annotations

from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from orchestrator.experiment.common import Duration, _Strict

__all__ = [
    "MAX_GPUS",
    "SLOT_FIELDS",
    "SLOT_TOKENS",
    "SlotsSpec",
    "as_fields",
    "gpu_slots_enabled",
    "gpus_field",
    "slot_problems",
    "slot_values",
    "url_port",
]

#: The most GPUs one host may declare (nvidia-smi's largest boxes hold 16; room to spare).
MAX_GPUS = 64

#: The template fields a slot fills in, and what each means.
SLOT_FIELDS = {
    "slot": "the GPU slot's instance name (its GPU ids joined by '-')",
    "slot_gpus": "the GPU slot's GPU ids joined by ',' (its CUDA_VISIBLE_DEVICES)",
    "slot_port": "the port the GPU slot serves at (server.url's port plus the slot's number)",
}

#: What the plan renders for a slot's fields when the host runs GPU slots: the slot puts its own values in
#: place of these just before it applies a deployment, so a configuration's identity never depends on the
#: slot it runs on.
SLOT_TOKENS = {name: f"__SPECSWEEP_{name.upper()}__" for name in SLOT_FIELDS}


def as_fields(text: str) -> str:
    """``text`` (a rendered command, a plan's line) with each slot token shown as the template field it stands
    for (``{slot_port}``): what a person reads, the slot's own value being filled in only when it applies."""
    for name, token in SLOT_TOKENS.items():
        text = text.replace(token, "{" + name + "}")
    return text


class SlotsSpec(_Strict):
    """The ``slots:`` section (see the module docstring)."""

    baselines: Literal["per-slot", "shared"] = "per-slot"
    port_step: int = Field(1, ge=1, le=1000)
    clean_timeout: Duration = 120.0
    clean_tolerance_mib: float = Field(512.0, ge=0)

    @field_validator("clean_timeout")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be positive")
        return value


def gpus_field(value: Any) -> Any:
    """A host's ``gpus:``: None, a count of 1..MAX_GPUS, or ``auto``."""
    if value is None or value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"gpus is a number of GPUs (1..{MAX_GPUS}) or auto (nvidia-smi's count), got {value!r}")
    if not 1 <= value <= MAX_GPUS:
        raise ValueError(f"gpus must be between 1 and {MAX_GPUS}, got {value}")
    return value


def url_port(url: str) -> int:
    """The port of ``url`` (its scheme's default when it names none)."""
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def slot_values(url: str) -> dict[str, str | int]:
    """What the slot fields render to without GPU slots: one slot, no GPU list, server.url's port."""
    return {"slot": "0", "slot_gpus": "", "slot_port": url_port(url)}


class _HostLike(Protocol):
    @property
    def display_name(self) -> str: ...


class _ExperimentLike(Protocol):
    """What the checks read of an experiment (``orchestrator.experiment.schema.Experiment``)."""

    gpus_per_deployment: int
    slots: SlotsSpec
    launcher: Any
    service: Any
    server: Any
    variants: dict[str, Any]
    search: Any
    host: Any
    hosts: Any

    def host_specs(self) -> list[Any]: ...


def gpu_slots_enabled(exp: Any) -> bool:
    """Whether any host of ``exp`` declares its GPUs (and so runs GPU slots)."""
    if getattr(exp, "launcher", None) is not None:
        return False
    return any(getattr(spec, "gpus", None) is not None for spec in exp.host_specs())


def _host_path(exp: _ExperimentLike, index: int) -> tuple[Any, ...]:
    return ("hosts", index, "gpus") if exp.hosts else ("host", "gpus")


def slot_problems(exp: _ExperimentLike) -> list[tuple[tuple[Any, ...], str]]:
    """Every problem of the GPU slot settings: (key path, message) pairs."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    specs = exp.host_specs()
    declared = [(i, s) for i, s in enumerate(specs) if getattr(s, "gpus", None) is not None]
    if exp.launcher is not None:
        for index, _ in declared:
            problems.append(
                (
                    _host_path(exp, index),
                    f"{exp.launcher.title} places deployments itself: ask it for GPUs with "
                    f"{exp.launcher.gpu_request}, not with the hosts' gpus",
                )
            )
        return problems
    sizes = {"gpus_per_deployment": exp.gpus_per_deployment}
    for name, variant in exp.variants.items():
        own = getattr(variant, "gpus_per_deployment", None)
        if own is not None:
            sizes[f"variants.{name}.gpus_per_deployment"] = own
    if not declared:
        if getattr(exp.service, "kind", None) == "systemd" and str(exp.service.unit).endswith("@.service"):
            problems.append(
                (
                    ("service", "unit"),
                    f"{exp.service.unit} is a template unit: systemd starts only its instances "
                    "(NAME@INSTANCE.service), which GPU slots name; declare the host's gpus (gpus: N, or auto) "
                    "to run one instance per slot, or name a plain unit",
                )
            )
        return problems
    if len(declared) != len(specs):
        index = next(i for i, s in enumerate(specs) if getattr(s, "gpus", None) is None)
        problems.append(
            (("hosts", index), "every host of the pool declares its gpus, or none does (GPU slots on some only)")
        )
    kind = getattr(exp.service, "kind", None)
    if kind == "none":
        problems.append((("service", "kind"), "GPU slots start their own servers: service kind none runs none"))
        return problems
    if exp.search is not None:
        problems.append((("search",), "a search does not run in GPU slots yet; drop the hosts' gpus or the search"))
    for _, spec in declared:
        gpus = spec.gpus
        if gpus == "auto":
            continue
        for key, size in sizes.items():
            if size > gpus:
                problems.append(
                    (
                        tuple(key.split(".")),
                        f"a deployment of {size} GPUs does not fit on {spec.display_name} ({gpus} GPUs)",
                    )
                )
    base = url_port(exp.server.url)
    for _, spec in declared:
        gpus = spec.gpus
        if gpus == "auto":
            continue
        highest = base + (gpus - 1) * exp.slots.port_step
        if highest > 65535:
            problems.append(
                (
                    ("slots", "port_step") if exp.slots.port_step > 1 else ("server", "url"),
                    f"the slots of {spec.display_name} ({gpus} GPUs) would serve up to port {highest}, above "
                    f"65535: server.url's port {base} plus {gpus - 1} x slots.port_step {exp.slots.port_step}; "
                    "use a lower port or a smaller port_step",
                )
            )
    if kind == "systemd" and not str(exp.service.unit).endswith("@.service"):
        problems.append(
            (
                ("service", "unit"),
                f"GPU slots run one instance of a template unit per slot: name the template (NAME@.service), "
                f"got {exp.service.unit!r}",
            )
        )
    template = exp.service.command_template() or ""
    several = any(spec.gpus == "auto" or spec.gpus // min(sizes.values()) > 1 for _, spec in declared)
    if several and "{slot_port}" not in template:
        where: tuple[Any, ...] = ("service", "command") if kind == "process" else ("service", "exec_start")
        if kind == "systemd" and getattr(exp.service, "mode", "dropin") == "unit":
            where = ("service", "unit_file")
        problems.append(
            (where, "several GPU slots serve at once: give each its port with {slot_port} in the server's command")
        )
    if urlsplit(exp.server.url).port is None:
        problems.append((("server", "url"), "GPU slots serve at server.url's port plus their number: give the port"))
    return problems
