"""Running a sweep in GPU slots: which deployment each slot runs next, stage by stage.

The layout is :mod:`orchestrator.plan.slots`'s (phases of one deployment size each, disjoint GPU sets per
phase); the slots themselves (a service instance each, clean GPUs, the run's lock over every instance) are
:mod:`orchestrator.launchers.gpuslots`'s. This schedule stands in for :class:`~orchestrator.sweep.schedule.Schedule`
when the hosts run GPU slots:

- The run goes *stage* by stage, a stage being one phase of one restart round (round 1's phases in order,
  then round 2's, ...). A slot takes the deployments of its phase's stage once every earlier stage has given
  out all of its deployments; the deployments still running from the earlier stage finish meanwhile (the
  GPU sets of the two never run on one GPU together: the launcher waits for a slot's GPUs to be free).
- Baselines: with ``slots.baselines: per-slot`` every slot is its own target and measures every baseline
  itself, first, in every phase (each comparison stays within one slot and one GPU set); with ``shared``
  the slots of a host share one target and a baseline is measured once: dealt first, like any other
  deployment of its phase.
- The other deployments of a stage are dealt round-robin over the phase's slots, the deal turned by one slot
  every round (:func:`orchestrator.plan.slots.deal`), so a slot's drift does not line up with one
  configuration; a slot that has run its hand takes the last deployment of the longest other hand.

Points are keyed ``(target, point id)`` as records are; a point of a non-baseline deployment counts as done
once any target has it, a target of this layout or one the resumed run recorded (``--resume`` with fewer
GPUs, as ``gpus: auto`` gives after one drops out, has other slots: resume is by point, never by slot).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.errors import SpecsweepError
from orchestrator.sweep.policy import FailureTracker
from orchestrator.sweep.schedule import Schedule

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment, FailurePolicySpec
    from orchestrator.launchers.base import Launcher, Slot
    from orchestrator.plan.deployments import Deployment, LoadPoint, Plan
    from orchestrator.plan.slots import GpuSlot, SlotLayout
    from orchestrator.runs.store import Record, ResumeState

__all__ = [
    "SlotFailureTracker",
    "SlotSchedule",
    "equivalence_check",
    "note_equivalence",
    "slot_equivalence",
    "slot_policy",
    "slot_schedule",
    "with_failure_placement",
]

_STAGE_POLL_SECONDS = 0.1


class SlotSchedule(Schedule):
    """The order of a sweep's deployments over GPU slots (see the module docstring)."""

    def __init__(self, plan: Plan, layout: SlotLayout, final: set[tuple[str, str]], *, per_slot: bool) -> None:
        from orchestrator.plan.slots import deal, stage_deployments

        slots = layout.all_slots()
        if not slots:
            raise ValueError("a slot schedule needs at least one slot")
        self.plan = plan
        self.layout = layout
        self.per_slot = per_slot
        self.final = final
        self.targets = list(dict.fromkeys(s.target for s in slots))
        #: Every target a non-baseline point may be done on: this layout's, and the resumed run's own.
        self.known_targets = list(dict.fromkeys([*self.targets, *sorted({t for t, _ in final})]))
        self.pooled = len(self.targets) > 1
        self.rounds = sorted({d.restart for d in plan.deployments}) or [1]
        self._lock = threading.Lock()
        #: Slots whose GPUs another process holds: they take nothing more (their hands go to the others).
        self.retired: set[str] = set()
        #: (round, phase) in the order they run.
        self.stages = [(r, size) for r in self.rounds for size in layout.phases]
        # (stage, target) -> baselines to take; (stage, slot name) -> the slot's hand of other deployments.
        self._slot_baselines: dict[tuple[tuple[int, int], str], deque[Deployment]] = {}
        self._hands: dict[tuple[tuple[int, int], str], deque[Deployment]] = {}
        for stage in self.stages:
            round_, size = stage
            phase_slots = layout.slots.get(size, [])
            baselines, others = stage_deployments(plan, layout, round_, size, per_slot_baselines=per_slot)
            if per_slot:
                for slot in phase_slots:
                    self._slot_baselines.setdefault((stage, slot.target), deque(baselines))
            else:  # shared: a baseline is one more deployment of the deal, dealt first
                others = baselines + others
            for slot, hand in zip(phase_slots, deal(others, len(phase_slots), round_), strict=False):
                self._hands[(stage, slot.name)] = deque(hand)

    # -- who measures what ---------------------------------------------------------------------------

    def targets_of(self, deployment: Deployment) -> list[str]:
        """The targets that measure a baseline (every slot of its phases, or their hosts)."""
        phases = self.layout.phase_of(deployment, per_slot_baselines=self.per_slot)
        return list(dict.fromkeys(s.target for size in phases for s in self.layout.slots.get(size, [])))

    def _done(self, point_id: str) -> bool:
        """A non-baseline point finished on any target (this layout's or the resumed run's)."""
        return any((t, point_id) in self.final for t in self.known_targets)

    def shared_done(self, deployment: Deployment) -> bool:
        return all(self._done(p.id) for p in deployment.load_points)

    def pending_count(self) -> int:
        count = 0
        for d in self.plan.deployments:
            if d.baseline:
                count += sum(len(self.pending_points(t, d)) for t in self.targets_of(d))
            else:
                count += sum(1 for p in d.load_points if not self._done(p.id))
        return count

    @property
    def total_points(self) -> int:
        return sum(len(d.load_points) * (len(self.targets_of(d)) if d.baseline else 1) for d in self.plan.deployments)

    def remaining_loads(self) -> int:
        loads = 0
        for d in self.plan.deployments:
            if d.baseline:
                loads += sum(1 for t in self.targets_of(d) if self.pending_points(t, d))
            elif not self.shared_done(d):
                loads += 1
        return loads

    def remaining_point_seconds(self) -> float:
        seconds = 0.0
        for d in self.plan.deployments:
            if d.baseline:
                seconds += sum(p.estimated_seconds for t in self.targets_of(d) for p in self.pending_points(t, d))
            else:
                seconds += sum(p.estimated_seconds for p in d.load_points if not self._done(p.id))
        return seconds

    # -- what a slot runs next ---------------------------------------------------------------------

    def _stage_given_out(self, stage: tuple[int, int]) -> bool:
        with self._lock:
            baselines = any(q for (s, _), q in self._slot_baselines.items() if s == stage)
            hands = any(q for (s, _), q in self._hands.items() if s == stage)
        return not baselines and not hands

    def retire(self, slot_name: str) -> None:
        """``slot_name`` takes no more deployments (what is left of its hand goes to the other slots)."""
        with self._lock:
            self.retired.add(slot_name)

    def _next(self, stage: tuple[int, int], slot: GpuSlot) -> Deployment | None:
        with self._lock:
            if slot.name in self.retired:
                return None
            own = self._slot_baselines.get((stage, slot.target))
            if own:
                return own.popleft()
            hand = self._hands.get((stage, slot.name))
            if hand:
                return hand.popleft()
            others = [q for (s, name), q in self._hands.items() if s == stage and q and name != slot.name]
            if others:  # the tail of the longest other hand
                return max(others, key=len).pop()
        return None

    def deployments_for_slot(
        self, slot: Any, *, going: Callable[[], bool], skipped: Callable[[], None]
    ) -> Iterator[Deployment]:
        """The deployments ``slot`` (the launcher's :class:`~orchestrator.launchers.gpuslots.GpuSlot`) runs, one at
        a time, stage by stage (see the module docstring)."""
        spec: GpuSlot = slot.slot
        for index, stage in enumerate(self.stages):
            if stage[1] != spec.size:
                continue
            while going() and not all(self._stage_given_out(s) for s in self.stages[:index]):
                time.sleep(_STAGE_POLL_SECONDS)
            while going():
                deployment = self._next(stage, spec)
                if deployment is None:
                    break
                if not deployment.baseline and self.shared_done(deployment):
                    skipped()
                    continue
                yield deployment
            if not going():
                return

    def deployments_for(
        self, target: str, *, going: Callable[[], bool], skipped: Callable[[], None]
    ) -> Iterator[Deployment]:  # pragma: no cover - the loop asks deployments_for_slot
        raise NotImplementedError("a slot schedule is asked per slot: deployments_for_slot")

    def pending_points(self, target: str, deployment: Deployment) -> list[LoadPoint]:
        """A baseline's points ``target`` has not finished; another deployment's points no target has."""
        if deployment.baseline:
            return [p for p in deployment.load_points if (target, p.id) not in self.final]
        return [p for p in deployment.load_points if not self._done(p.id)]


def slot_equivalence(a: Mapping[str, Any], b: Mapping[str, Any], *, figure: str = "output_tok_s") -> dict[str, Any]:
    """Whether two records of one point measured on two slots differ beyond noise: their ``figure`` and its
    interval (the record's ``intervals.figures[figure]``: lo, hi). ``equivalent`` is True (the intervals
    overlap), False (they do not: the slots differ beyond noise) or None (no interval on both)."""
    values = []
    for record in (a, b):
        client = record.get("client") or {}
        entry = ((record.get("intervals") or {}).get("figures") or {}).get(figure) or {}
        values.append((client.get(figure), entry.get("lo"), entry.get("hi")))
    (va, la, ha), (vb, lb, hb) = values
    out: dict[str, Any] = {"figure": figure, "a": va, "b": vb}
    if la is None or ha is None or lb is None or hb is None:
        out["equivalent"] = None
        out["why"] = "no interval of the figure on both slots"
        return out
    overlap = max(la, lb) <= min(ha, hb)
    out.update({"a_interval": [la, ha], "b_interval": [lb, hb], "equivalent": overlap})
    out["why"] = "the intervals overlap" if overlap else "the intervals do not overlap: the slots differ beyond noise"
    return out


def equivalence_check(records: Sequence[Record], baseline: str) -> list[dict[str, Any]]:
    """The slot-equivalence check of a per-slot run: each point of the ``baseline`` variant as the first slot
    measured it against every other slot's measurement of it (``slot_equivalence``)."""
    by_point: dict[str, list[Record]] = {}
    for record in records:
        if record.variant == baseline and record.status == "ok":
            by_point.setdefault(record.point_id, []).append(record)
    out = []
    for point, measured in by_point.items():
        first, *others = measured
        for other in others:
            found = slot_equivalence(first.model_dump(), other.model_dump())
            out.append({"point_id": point, "slots": [first.host, other.host], **found})
    return out


def note_equivalence(sweep: Any, errors: Sequence[BaseException] = ()) -> None:
    """At the end of a per-slot sweep (that raised no ``errors``): the slot-equivalence check of its first
    baseline, as a ``slot_equivalence`` event of the run and a notice (slots that differ beyond noise are
    named: compare only within a slot)."""
    from orchestrator.sweep.events import Notice

    schedule = sweep.schedule
    if errors or not isinstance(schedule, SlotSchedule) or not schedule.per_slot or not sweep.experiment.baselines:
        return
    baseline = sweep.experiment.baselines[0]
    pairs = equivalence_check(sweep.records, baseline)
    if not pairs:
        return
    differ = [p for p in pairs if p["equivalent"] is False]
    unknown = [p for p in pairs if p["equivalent"] is None]
    with contextlib.suppress(SpecsweepError):
        sweep.store.event("slot_equivalence", baseline=baseline, pairs=pairs, differ=len(differ))
    if differ:
        names = sorted({f"{p['slots'][0]} vs {p['slots'][1]}" for p in differ})
        message = (
            f"slot-equivalence check: {baseline} differs beyond noise between {', '.join(names)}: compare "
            "configurations only within one slot (slots.baselines: per-slot)"
        )
        sweep.emit(Notice(message=message, level="warning"))
    elif not unknown:
        sweep.emit(
            Notice(
                message=f"slot-equivalence check: {baseline} within noise on every slot ({len(pairs)} comparisons): "
                "the slots could share one baseline (slots.baselines: shared)"
            )
        )


def with_failure_placement(record: Record, slot: Slot) -> Record:
    """``record`` (a failed point's) with its slot's placement, when the slot has one (``Slot.failure_placement``:
    a GPU slot, its GPUs and the last GPU check, the evidence of a ``gpu_busy`` failure)."""
    placement = slot.failure_placement()
    if placement is None:
        return record
    return record.model_copy(update={"placement": placement})


class SlotFailureTracker(FailureTracker):
    """The failure policy in GPU slots: a deployment that could not start for its slot's own reason
    (``Slot.blocked``: another process holds the slot's GPUs, ``gpu_busy``) retires that slot, whose remaining
    deployments go to the other slots, instead of stopping the sweep; the sweep stops (with that reason) only
    once every slot of a phase is retired. Every other failure is the policy's as anywhere
    (:mod:`orchestrator.sweep.policy`). Which slot of the layout a target is: the schedule's layout says."""

    def __init__(
        self, policy: FailurePolicySpec, schedule: SlotSchedule, slots: Sequence[Slot], notify: Callable[[str], None]
    ) -> None:
        super().__init__(policy)
        self.schedule = schedule
        self._by_target = {s.name: s for s in slots}
        self._specs = {s.target: s for s in schedule.layout.all_slots()}
        self._notify = notify

    def failed(self, target: str, deployment: Deployment, reason: str) -> str | None:
        slot = self._by_target.get(target) if self.schedule.per_slot else None
        spec = self._specs.get(target)
        if slot is None or spec is None or not slot.blocked:
            return super().failed(target, deployment, reason)
        self.schedule.retire(spec.name)
        size = spec.size
        phase = [s for s in self._specs.values() if s.size == size and s.target in self._by_target]
        if all(s.name in self.schedule.retired for s in phase):
            with self._lock:
                if self.halted is None:
                    self.halted = f"every slot of {size} GPU(s) is held by another process: {reason}"
                    return self.halted
            return None
        self._notify(f"{spec.name} retired: {reason}; its other deployments go to the other slots")
        return None


def slot_policy(sweep: Any, launcher: Launcher) -> None:
    """Give ``sweep`` the GPU slots' failure policy (:class:`SlotFailureTracker`) when it runs in slots."""
    if not isinstance(sweep.schedule, SlotSchedule):
        return
    from orchestrator.sweep.events import Notice

    def notify(message: str) -> None:
        with contextlib.suppress(SpecsweepError):
            sweep.store.event("slot_retired", message=message)
        sweep.emit(Notice(message=message, level="warning"))

    sweep.policy = SlotFailureTracker(sweep.experiment.failure_policy, sweep.schedule, list(launcher.slots()), notify)


def slot_schedule(experiment: Experiment, launcher: Launcher, plan: Plan, resume: ResumeState) -> SlotSchedule | None:
    """The slot schedule of a launcher with a layout (``Launcher.layout``: GPU slots); None for any other."""
    layout = launcher.layout
    if layout is None:
        return None
    return SlotSchedule(plan, layout, resume.final, per_slot=experiment.slots.baselines == "per-slot")
