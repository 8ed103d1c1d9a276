"""The kinds of launcher whose slots are the experiment's hosts (``LauncherKind``: :mod:`orchestrator.launchers.base`):
``local`` (this machine alone), ``ssh`` (a pool of hosts) and ``gpu-slots`` (hosts that declare their GPUs,
the plan packed into slots). Each is made, restored and checked host by host: ``restore`` undoes the
service's leftovers on every host (with GPU slots, every slot instance's), ``doctor`` checks each host."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from orchestrator.launchers.base import DoctorCallback, Launcher, LauncherKind
from orchestrator.launchers.doctor import check_host
from orchestrator.launchers.gpuslots import GpuSlotLauncher
from orchestrator.launchers.hosts import HostLauncher, LocalLauncher, SSHPoolLauncher
from orchestrator.launchers.restore import restore_hosts

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.launchers.outcomes import HostReport, RestoreOutcome
    from orchestrator.plan.deployments import Plan

__all__ = ["GPU_SLOTS", "LOCAL", "SSH_POOL", "HostsKind"]


class HostsKind(LauncherKind):
    """Deployments on the experiment's hosts, the service on each: made, restored and checked host by host."""

    launcher_class: type[HostLauncher] = SSHPoolLauncher
    #: The hosts run GPU slots: restore every slot instance's leftovers, check the GPUs each host declares.
    gpu_slots: ClassVar[bool] = False

    def make(
        self, experiment: Experiment, *, plan: Plan | None, run_id: str, lock_label: str, break_lock: bool
    ) -> Launcher:
        return self.launcher_class(experiment, experiment.host_specs(), lock_label=lock_label, break_lock=break_lock)

    def restore_each(self, experiment: Experiment, *, break_lock: bool, dry_run: bool) -> Iterator[RestoreOutcome]:
        return restore_hosts(experiment, break_lock=break_lock, dry_run=dry_run, slot_instances=self.gpu_slots)

    def doctor(self, experiment: Experiment, *, progress: DoctorCallback | None) -> list[HostReport]:
        return [
            check_host(experiment, spec, progress=progress, gpu_slots=self.gpu_slots)
            for spec in experiment.host_specs()
        ]


class _LocalKind(HostsKind):
    kind = "local"
    launcher_class = LocalLauncher


class _SSHPoolKind(HostsKind):
    kind = "ssh"
    launcher_class = SSHPoolLauncher


#: This machine alone (``host: local``, or no host): one slot.
LOCAL = _LocalKind()
#: A pool of hosts (SSH, or this machine among them): one slot per host.
SSH_POOL = _SSHPoolKind()


class _GpuSlotsKind(HostsKind):
    """Hosts that declare their GPUs: the plan packed into slots (restored and checked as hosts are; the
    restore finds every slot instance a host holds, the doctor checks the declared GPUs)."""

    kind = "gpu-slots"
    gpu_slots = True

    def make(
        self, experiment: Experiment, *, plan: Plan | None, run_id: str, lock_label: str, break_lock: bool
    ) -> Launcher:
        from orchestrator.plan.deployments import build_plan

        return GpuSlotLauncher(
            experiment,
            plan if plan is not None else build_plan(experiment),
            lock_label=lock_label,
            break_lock=break_lock,
        )


#: GPU slots on the experiment's hosts (a host declares ``gpus``).
GPU_SLOTS = _GpuSlotsKind()
