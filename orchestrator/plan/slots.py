"""GPU slots: a plan's deployments packed onto disjoint sets of a host's GPUs. Pure: no host, no clock.

A host of G GPUs offers, for a deployment size s (its ``gpus_per_deployment``: a tensor-parallel size), the
G // s aligned sets ``{0..s-1}, {s..2s-1}, ...``: 8 x TP1, 4 x TP2, 2 x TP4, 1 x TP8 on an eight-GPU box.
Each set is one *slot*: its own ``CUDA_VISIBLE_DEVICES`` (the set), its own port (server.url's port plus
its first GPU times ``slots.port_step``, so two slots that can run together never share one) and its own
service instance (``NAME@<gpus>.service`` of a template unit, or a process of its own).

Sizes are mixed without overlap by running them in *phases*, one per size in the order the plan first
names them: the slots of a phase are disjoint, and a slot of a later phase starts a server only once every
deployment of the earlier phases has been taken and its own GPUs are free (the tail of one phase overlaps
the start of the next only on GPUs the earlier one no longer uses).

Within a phase, the baselines are measured on every slot (``slots.baselines: per-slot``, each slot its own
target) or once for all (``shared``); the other deployments are dealt round-robin over the phase's slots,
the deal turned by one slot every restart round, so a slot's drift never lines up with one configuration.

:func:`pack` gives the layout and :func:`packed_eta` the wall-clock and GPU-hours of the run one deployment
at a time (before packing) and in slots (after).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Deployment, Plan

__all__ = [
    "GpuSlot",
    "PackedEta",
    "SlotLayout",
    "deal",
    "host_gpu_counts",
    "pack",
    "packed_eta",
    "slot_sets",
    "stage_deployments",
]


@dataclass(frozen=True)
class GpuSlot:
    """One disjoint GPU set of one host, for deployments of one size."""

    host: str
    gpus: tuple[int, ...]
    port: int
    #: The target its records name: its own (``host/gpu0-1``) with per-slot baselines, else the host's.
    target: str

    @property
    def size(self) -> int:
        return len(self.gpus)

    @property
    def instance(self) -> str:
        """The service instance name: the GPU ids joined by '-' (``sim@0-1.service``)."""
        return "-".join(str(g) for g in self.gpus)

    @property
    def visible_devices(self) -> str:
        """Its ``CUDA_VISIBLE_DEVICES``."""
        return ",".join(str(g) for g in self.gpus)

    @property
    def name(self) -> str:
        """The slot's own name (``host/gpu0-1``), whatever target it measures for."""
        return f"{self.host}/gpu{self.instance}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "slot": self.name,
            "gpus": list(self.gpus),
            "port": self.port,
            "instance": self.instance,
            "target": self.target,
        }


def slot_sets(gpus: int, size: int) -> list[tuple[int, ...]]:
    """The aligned, disjoint GPU sets of ``size`` on a host of ``gpus`` GPUs."""
    if size < 1 or gpus < 1:
        return []
    return [tuple(range(k * size, (k + 1) * size)) for k in range(gpus // size)]


@dataclass
class SlotLayout:
    """The slots of every host, phase by phase (one phase per deployment size)."""

    #: Deployment id -> its size in GPUs.
    sizes: dict[str, int]
    #: The sizes in the order they run.
    phases: list[int]
    #: Size -> the slots of that size over every host, in host then GPU order.
    slots: dict[int, list[GpuSlot]]
    #: Host -> its GPU count.
    gpus: dict[str, int]
    #: What the layout had to assume (a host whose count nvidia-smi gives only when the run opens).
    notes: list[str] = field(default_factory=list)

    def phase_of(self, deployment: Deployment, *, per_slot_baselines: bool) -> list[int]:
        """The phases ``deployment`` runs in: its size's; a baseline measured per slot, every phase (it is
        measured on every GPU set it is compared on); a shared baseline, its size's, else the first."""
        size = self.sizes.get(deployment.id, 1)
        if deployment.baseline:
            if per_slot_baselines:
                return list(self.phases)
            return [size] if size in self.phases else self.phases[:1]
        return [size]

    def all_slots(self) -> list[GpuSlot]:
        """Every slot, phase by phase."""
        return [slot for size in self.phases for slot in self.slots.get(size, [])]

    def to_dict(self) -> dict[str, Any]:
        return {
            "phases": [
                {"gpus_per_deployment": size, "slots": [s.to_dict() for s in self.slots.get(size, [])]}
                for size in self.phases
            ],
            "hosts": dict(self.gpus),
            "notes": list(self.notes),
        }


def host_gpu_counts(experiment: Experiment, known: Mapping[str, int] | None = None) -> tuple[dict[str, int], list[str]]:
    """Each host's GPU count (``gpus: N``, or for ``gpus: auto`` the count in ``known``, else the largest
    deployment size as a stand-in, with a note saying so)."""
    known = dict(known or {})
    biggest = max([experiment.gpus_per_deployment] + [experiment.deployment_gpus(v) for v in experiment.variants])
    counts: dict[str, int] = {}
    notes: list[str] = []
    for spec in experiment.host_specs():
        name = spec.display_name
        gpus = getattr(spec, "gpus", None)
        if isinstance(gpus, int):
            counts[name] = gpus
        elif name in known:
            counts[name] = known[name]
        else:
            counts[name] = biggest
            notes.append(f"{name}: gpus auto (nvidia-smi's count when the run opens); planned as {biggest}")
    return counts, notes


def pack(experiment: Experiment, plan: Plan, known: Mapping[str, int] | None = None) -> SlotLayout:
    """The slot layout of ``plan`` on ``experiment``'s hosts (``known``: counts read for ``gpus: auto``)."""
    from orchestrator.experiment.slots import url_port

    counts, notes = host_gpu_counts(experiment, known)
    sizes = {d.id: experiment.deployment_gpus(d.variant) for d in plan.deployments}
    phases = list(dict.fromkeys(sizes[d.id] for d in plan.deployments if not d.baseline))
    if not phases:
        phases = list(dict.fromkeys(sizes.values()))
    base = url_port(experiment.server.url)
    step = experiment.slots.port_step
    shared = experiment.slots.baselines == "shared"
    slots: dict[int, list[GpuSlot]] = {}
    for size in phases:
        out: list[GpuSlot] = []
        for host, gpus in counts.items():
            for gpu_set in slot_sets(gpus, size):
                slot = GpuSlot(host=host, gpus=gpu_set, port=base + gpu_set[0] * step, target=host)
                out.append(slot if shared else GpuSlot(host, gpu_set, slot.port, slot.name))
        if not out:
            notes.append(f"no host has {size} GPUs: its deployments cannot run")
        # No more slots than the phase has deployments for at once: an idle slot would only measure baselines
        # nothing is compared with.
        per_round: dict[int, int] = {}
        for d in plan.deployments:
            if sizes[d.id] == size and (not d.baseline or shared or (len(phases) == 1 and _only_baselines(plan))):
                per_round[d.restart] = per_round.get(d.restart, 0) + 1
        slots[size] = out[: max(per_round.values(), default=0)] if per_round else out[:1]
    return SlotLayout(sizes=sizes, phases=phases, slots=slots, gpus=counts, notes=notes)


def _only_baselines(plan: Plan) -> bool:
    return all(d.baseline for d in plan.deployments)


def deal(deployments: Sequence[Deployment], slots: int, round_: int = 1) -> list[list[Deployment]]:
    """Deal ``deployments`` round-robin over ``slots`` slots, the deal turned by one slot per restart round
    (``round_`` from 1): configuration j of round r goes to slot (j + r - 1) mod slots."""
    hands: list[list[Deployment]] = [[] for _ in range(max(slots, 1))]
    for j, deployment in enumerate(deployments):
        hands[(j + round_ - 1) % len(hands)].append(deployment)
    return hands


def stage_deployments(
    plan: Plan, layout: SlotLayout, round_: int, size: int, *, per_slot_baselines: bool
) -> tuple[list[Deployment], list[Deployment]]:
    """(baselines, the others) of one stage: the plan's deployments of restart round ``round_`` in the phase of
    deployment size ``size``. The ETA (:func:`packed_eta`) and the sweep's schedule (orchestrator/sweep/slots.py)
    both deal from it, so the ETA is of the deal the sweep makes."""
    mine = [
        d
        for d in plan.deployments
        if d.restart == round_ and size in layout.phase_of(d, per_slot_baselines=per_slot_baselines)
    ]
    return [d for d in mine if d.baseline], [d for d in mine if not d.baseline]


@dataclass(frozen=True)
class PackedEta:
    """The run's time and GPU-hours one deployment at a time per host (before) and in GPU slots (after)."""

    serial_seconds: float
    packed_seconds: float
    #: GPU-hours the hosts are held for (wall-clock x their GPUs) before and after.
    serial_gpu_hours: float
    packed_gpu_hours: float
    #: GPU-hours the deployments use (each one's time x its GPUs; per-slot baselines counted on every slot).
    used_gpu_hours: float
    #: Slot name -> the deployment labels it runs, in order (the baselines of a per-slot target included).
    assignment: dict[str, list[str]]

    @property
    def speedup(self) -> float:
        return self.serial_seconds / self.packed_seconds if self.packed_seconds > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "serial_seconds": round(self.serial_seconds, 1),
            "packed_seconds": round(self.packed_seconds, 1),
            "speedup": round(self.speedup, 2),
            "serial_gpu_hours": round(self.serial_gpu_hours, 3),
            "packed_gpu_hours": round(self.packed_gpu_hours, 3),
            "used_gpu_hours": round(self.used_gpu_hours, 3),
            "assignment": self.assignment,
        }


def packed_eta(plan: Plan, layout: SlotLayout, *, per_slot_baselines: bool = True) -> PackedEta:
    """What :func:`pack`'s layout makes of ``plan``'s time (see :class:`PackedEta`): each phase lasts as long
    as its busiest slot; the phases run one after the other."""
    hosts = max(len(layout.gpus), 1)
    total_gpus = sum(layout.gpus.values())
    serial = sum(d.estimated_seconds() for d in plan.deployments) / hosts
    packed = used = 0.0
    assignment: dict[str, list[str]] = {}
    rounds = sorted({d.restart for d in plan.deployments}) or [1]
    for size in layout.phases:
        slots = layout.slots.get(size, [])
        if not slots:
            continue
        busy = dict.fromkeys((s.name for s in slots), 0.0)
        for slot in slots:
            assignment.setdefault(slot.name, [])
        for round_ in rounds:
            baselines, others = stage_deployments(plan, layout, round_, size, per_slot_baselines=per_slot_baselines)
            if per_slot_baselines:
                for slot in slots:
                    for d in baselines:
                        busy[slot.name] += d.estimated_seconds()
                        used += d.estimated_seconds() * size
                        assignment[slot.name].append(d.label)
            else:
                others = baselines + others
            for slot, hand in zip(slots, deal(others, len(slots), round_), strict=False):
                for d in hand:
                    busy[slot.name] += d.estimated_seconds()
                    used += d.estimated_seconds() * size
                    assignment[slot.name].append(d.label)
        packed += max(busy.values(), default=0.0)
    return PackedEta(
        serial_seconds=serial,
        packed_seconds=packed,
        serial_gpu_hours=serial * total_gpus / 3600,
        packed_gpu_hours=packed * total_gpus / 3600,
        used_gpu_hours=used / 3600,
        assignment=assignment,
    )
