"""The GPU slots of a plan, as ``specsweep plan`` shows them: each slot's GPUs, port and what runs there,
and the wall-clock and GPU-hours before and after packing (:mod:`orchestrator.plan.slots`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.text import Text

from orchestrator.cli.textfit import Column, fit_table
from orchestrator.experiment.durations import format_duration

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Plan

__all__ = ["render_slots", "slot_totals", "slots_json"]


def _packed(experiment: Experiment, plan: Plan) -> tuple[Any, Any]:
    from orchestrator.plan.slots import pack, packed_eta

    layout = pack(experiment, plan)
    eta = packed_eta(plan, layout, per_slot_baselines=experiment.slots.baselines == "per-slot")
    return layout, eta


def slots_json(experiment: Experiment, plan: Plan) -> dict[str, Any]:
    """The layout and its ETA (``specsweep plan --json``'s ``slots``)."""
    layout, eta = _packed(experiment, plan)
    return {**layout.to_dict(), "baselines": experiment.slots.baselines, "eta": eta.to_dict()}


def slot_totals(experiment: Experiment, plan: Plan) -> tuple[int, int, float]:
    """(restarts, slots, wall-clock seconds) of ``plan`` in GPU slots: what the slot table schedules (a baseline
    measured per slot is one restart on each slot), for the plan's headline."""
    layout, eta = _packed(experiment, plan)
    return sum(len(runs) for runs in eta.assignment.values()), len(layout.all_slots()), eta.packed_seconds


def render_slots(experiment: Experiment, plan: Plan, width: int = 80) -> RenderableType:
    """One row per slot (host, GPUs, port, instance, what it runs), and the before/after line."""
    layout, eta = _packed(experiment, plan)
    unit = getattr(experiment.service, "unit", None)
    columns = [
        Column("slot", "left", required=True),
        Column("GPUs", "left", required=True),
        Column("port", required=True),
        Column("instance", "left", priority=20),
        Column("runs", "left", required=True, wrap=True),
    ]
    rows = []
    for slot in layout.all_slots():
        instance = unit.replace("@.service", f"@{slot.instance}.service") if unit else f"process {slot.instance}"
        runs = eta.assignment.get(slot.name, [])
        rows.append(
            [
                slot.name,
                f"CUDA_VISIBLE_DEVICES={slot.visible_devices}",
                str(slot.port),
                escape(instance),
                Text(", ".join(runs) or "-"),
            ]
        )
    caption = (
        f"before packing: {format_duration(eta.serial_seconds)}, {eta.serial_gpu_hours:.2f} GPU-hours held; "
        f"in slots: {format_duration(eta.packed_seconds)} ({eta.speedup:.1f}x), "
        f"{eta.packed_gpu_hours:.2f} GPU-hours held, {eta.used_gpu_hours:.2f} used; "
        f"baselines {experiment.slots.baselines}"
    )
    table = fit_table(columns, rows, width, title="GPU slots", caption=caption)
    notes = [Text(f"note: {n}") for n in layout.notes]
    return Group(table, *notes) if notes else table
