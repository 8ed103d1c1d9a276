"""GPU slots: several deployments at once on one host, each on its own disjoint set of GPUs.

The layout (which GPU sets, ports and targets) is :mod:`orchestrator.plan.slots`'s; this launcher gives each
slot of it a :class:`GpuSlot`: one service instance of its own (``NAME@<gpus>.service`` of the experiment's
template unit, its drop-in per instance; or a process of its own, ``<experiment>-gpu<gpus>``) with the same
apply/restore guarantees as a host's service (marker, lock, undo on every way out), and one lock per host
for the whole run, over all its instances (``<state dir>/<template>.lock``), taken by the host's first slot
and released by its last.

``launch(deployment)``:

1. takes the slot's GPUs on the host (:class:`HostGpus`: a slot of another size whose set overlaps waits
   until they are free, so slots of two sizes never run on one GPU together);
2. waits until they are clean (:func:`wait_clean`): no compute process on any of them and each one's memory
   back to what it held before the run (within ``slots.clean_tolerance_mib``), for at most
   ``slots.clean_timeout``; a process still holding one fails the deployment (StartFailed, reason
   ``gpu_busy``) naming it (PID, command, memory), never a confusing out-of-memory start;
3. applies the deployment with the slot's values in place of the plan's slot tokens (``{slot}``,
   ``{slot_gpus}``, ``{slot_port}``: :mod:`orchestrator.experiment.slots`) and ``CUDA_VISIBLE_DEVICES`` set,
   and waits until it is healthy at the slot's port.

The server it returns carries ``placement`` (host, slot, GPUs, port, instance and the clean-GPU evidence),
which every record of the deployment keeps. ``release()`` restores the instance (the server stops, its
drop-in goes) and gives the GPUs back: the next deployment on them starts on clean GPUs, or says who holds
them. A host without nvidia-smi is not checked (the evidence says so).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.errors import HostError, ServiceError, SpecsweepError, StartFailed
from orchestrator.hosts import connect_host
from orchestrator.launchers.base import HealthCallback, Launcher, Slot
from orchestrator.launchers.health import wait_for_experiment
from orchestrator.launchers.hosts import HostServer, check_port_free
from orchestrator.quoting import shell_quote
from orchestrator.services import make_service

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.hosts.base import Host
    from orchestrator.plan.deployments import Deployment, Plan
    from orchestrator.plan.slots import GpuSlot as SlotSpec
    from orchestrator.plan.slots import SlotLayout
    from orchestrator.services.base import Service
    from orchestrator.services.hoststate import HostLock

__all__ = ["GpuSlot", "GpuSlotLauncher", "GpuSlotServer", "HostGpus", "slot_deployment", "wait_clean"]

CLEAN_POLL_SECONDS = 0.5


class HostGpus:
    """One host's GPUs as the run's slots share them: who holds which, the memory before the run, the lock
    over every instance."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._cond = threading.Condition()
        self._busy: set[int] = set()
        self.before: dict[int, float] | None = None  # memory in use before the run (MiB per GPU)
        self.checked: bool | None = None  # None: not yet known whether nvidia-smi answers
        self.note: str | None = None
        self._users = 0
        self._lock: Any = None
        self._open_lock = threading.Lock()

    def acquire(self, gpus: Sequence[int], stop: threading.Event) -> bool:
        """Wait until every GPU of ``gpus`` is free and take them; False when ``stop`` was set first."""
        with self._cond:
            while any(g in self._busy for g in gpus):
                if stop.is_set():
                    return False
                self._cond.wait(0.2)
            self._busy.update(gpus)
            return True

    def release(self, gpus: Sequence[int]) -> None:
        with self._cond:
            self._busy.difference_update(gpus)
            self._cond.notify_all()

    def open(self, host: Host, experiment: Experiment, lock_label: str, break_lock: bool) -> None:
        """The first slot of the host: the run's lock over every instance, and the GPUs' memory before it."""
        with self._open_lock:
            self._users += 1
            if self._users > 1:
                return
            try:
                lock = run_lock(host, experiment)
                lock.acquire(lock_label, break_lock=break_lock)
                self._lock = lock
                self._measure_before(host)
            except BaseException:
                self._users -= 1
                raise

    def _measure_before(self, host: Host) -> None:
        from orchestrator.hosts.gpuprocs import gpu_snapshot
        from orchestrator.hosts.telemetry import has_nvidia_smi

        if not has_nvidia_smi(host):
            self.checked, self.note = (
                False,
                f"no nvidia-smi on {self.name}: the GPUs are not checked between deployments",
            )
            return
        try:
            snapshot = gpu_snapshot(host)
        except HostError as exc:
            self.checked, self.note = False, f"the GPUs of {self.name} are not checked: {exc}"
            return
        # What a GPU holds with no process on it: its memory less what its processes hold (a server a killed
        # run left is stopped by the slots' recovery, and its memory is not the level to come back to).
        held: dict[int, float] = {}
        for process in snapshot.processes:
            held[process.gpu] = held.get(process.gpu, 0.0) + (process.memory_mib or 0.0)
        self.before = {g: max(0.0, m - held.get(g, 0.0)) for g, m in snapshot.memory_mib.items()}
        self.checked = True

    def close(self) -> None:
        with self._open_lock:
            self._users -= 1
            if self._users > 0 or self._lock is None:
                return
            lock, self._lock = self._lock, None
            with contextlib.suppress(SpecsweepError):
                lock.release()


def _template_name(experiment: Experiment) -> str:
    unit = getattr(experiment.service, "unit", None)
    return str(unit) if unit else f"{experiment.name}-gpu"


def run_lock(host: Host, experiment: Experiment) -> HostLock:
    """The lock over every instance of the experiment's slots on ``host`` (``<state dir>/<template>.lock``).

    A process service's state directory is the login's ``~/.local/state/specsweep``: ``~`` is expanded on the
    host (its ``$HOME``, as the login user the servers run as), never passed on quoted (which made a directory
    named ``~`` wherever the command ran, that two controllers in two directories did not share)."""
    from orchestrator.services.hoststate import HostLock

    template = _template_name(experiment)
    if getattr(experiment.service, "kind", None) == "systemd":
        from orchestrator.services.systemd import STATE_DIR

        return HostLock(host, f"{STATE_DIR}/{template}.lock", service=template)
    from orchestrator.services.process import DEFAULT_STATE_DIR

    login_user = getattr(host, "as_login_user", None)
    login = login_user() if callable(login_user) else host
    state_dir = DEFAULT_STATE_DIR
    if state_dir == "~" or state_dir.startswith("~/"):
        home = login.run('printf %s "$HOME"').check("reading $HOME", host=login.name).stdout.rstrip("/")
        if not home.startswith("/"):
            raise HostError(f"{login.name}: $HOME is {home!r}, not an absolute path: cannot place the slots' lock")
        state_dir = home + state_dir[1:]
    return HostLock(login, f"{state_dir}/{template}.lock", service=template)


def wait_clean(
    host: Host,
    gpus: Sequence[int],
    before: dict[int, float],
    *,
    tolerance_mib: float,
    timeout: float,
    stop: threading.Event,
    what: str,
) -> dict[str, Any]:
    """Wait until ``gpus`` hold no compute process and at most ``before`` + ``tolerance_mib`` each; the
    evidence (seconds waited, memory now and before). StartFailed (``gpu_busy``) naming what holds them after
    ``timeout`` seconds."""
    from orchestrator.hosts.gpuprocs import gpu_snapshot

    started = time.monotonic()
    while True:
        snapshot = gpu_snapshot(host)
        processes = snapshot.on(gpus)
        over = {
            g: snapshot.memory_mib.get(g, 0.0)
            for g in gpus
            if snapshot.memory_mib.get(g, 0.0) > before.get(g, 0.0) + tolerance_mib
        }
        waited = time.monotonic() - started
        if not processes and not over:
            return {
                "clean": True,
                "waited_s": round(waited, 3),
                "memory_mib": {str(g): snapshot.memory_mib.get(g) for g in gpus},
                "before_run_mib": {str(g): before.get(g) for g in gpus},
                "tolerance_mib": tolerance_mib,
            }
        if stop.is_set():
            raise StartFailed(f"{what}: stopped while waiting for clean GPUs", reason="stopped")
        if waited >= timeout:
            lines = [f"still on GPU {p.gpu}: {p.describe()}" for p in processes]
            lines += [
                f"GPU {g}: {m:.0f} MiB in use, {before.get(g, 0.0):.0f} MiB before the run "
                f"(tolerance {tolerance_mib:.0f} MiB)"
                for g, m in sorted(over.items())
            ]
            who = "; ".join(p.describe() for p in processes) or "no process is listed, yet memory is still in use"
            raise StartFailed(
                f"{what}: GPU {','.join(str(g) for g in gpus)} not clean after {timeout:g} s: {who}",
                evidence=lines,
                reason="gpu_busy",
            )
        time.sleep(CLEAN_POLL_SECONDS)


def slot_deployment(deployment: Deployment, slot: SlotSpec) -> Deployment:
    """``deployment`` as ``slot`` runs it: the slot tokens replaced, ``CUDA_VISIBLE_DEVICES`` set."""
    from orchestrator.experiment.slots import SLOT_TOKENS

    values = {"slot": slot.instance, "slot_gpus": slot.visible_devices, "slot_port": str(slot.port)}

    def fill(text: str) -> str:
        for name, token in SLOT_TOKENS.items():
            text = text.replace(token, values[name])
        return text

    environment = {k: fill(v) for k, v in deployment.environment.items()}
    environment["CUDA_VISIBLE_DEVICES"] = slot.visible_devices
    command = fill(deployment.command) if deployment.command is not None else None
    return deployment.model_copy(update={"command": command, "environment": environment})


class GpuSlotServer(HostServer):
    """A healthy deployment in a slot; ``release`` restores the instance and frees the slot's GPUs."""

    def __init__(self, url: str, service: Service, placement: dict[str, Any], on_release: Callable[[], None]) -> None:
        super().__init__(url, service)
        self.placement = placement
        self._on_release = on_release

    def release(self) -> None:
        self._on_release()


class GpuSlot(Slot):
    """One slot of the layout: its service instance, its GPUs and its port (see the module docstring)."""

    def __init__(
        self,
        experiment: Experiment,
        spec: Any,
        slot: SlotSpec,
        gpus: HostGpus,
        *,
        lock_label: str,
        break_lock: bool = False,
    ) -> None:
        self.experiment = experiment
        self.spec = spec
        self.slot = slot
        self.gpus = gpus
        self.name = slot.target
        self.slot_name = slot.name
        self.lock_label = lock_label
        self.break_lock = break_lock
        base = experiment.server_url(spec)
        self.url = _with_port(base, slot.port)
        self.host: Host | None = None
        self.service: Service | None = None
        self._held = False
        self._opened_gpus = False
        self._last_check: dict[str, Any] | None = None
        #: The last start failed because another process holds the slot's GPUs (the sweep retires the slot).
        self.blocked = False

    @property
    def instance(self) -> str:
        unit = getattr(self.experiment.service, "unit", None)
        if unit:
            return str(unit).replace("@.service", f"@{self.slot.instance}.service")
        return f"{self.experiment.name}-gpu{self.slot.instance}"

    def _make_service(self, host: Host) -> Service:
        service_spec = self.experiment.service
        if service_spec.kind == "systemd":
            spec = service_spec.model_copy(update={"unit": self.instance})
            source: Any = self.experiment.model_copy(update={"service": spec})
            return make_service(source, host)
        other = service_spec.model_copy(update={"log_file": None})
        source = self.experiment.model_copy(update={"service": other})
        return make_service(source, host, name=self.instance)

    def open(self, recovered: Callable[[str], None]) -> None:
        self.host = connect_host(self.spec)
        self.gpus.open(self.host, self.experiment, self.lock_label, self.break_lock)
        self._opened_gpus = True
        service = self._make_service(self.host)
        service.lock(self.lock_label, break_lock=self.break_lock)
        self.service = service
        leftovers = service.recover()
        if leftovers:
            recovered(str(leftovers))

    def launch(
        self, deployment: Deployment, *, progress: HealthCallback | None, stop: threading.Event
    ) -> GpuSlotServer:
        service, host = self.service, self.host
        if service is None or host is None:
            raise ServiceError(f"{self.slot_name}: the slot is not open")
        self.blocked = False
        if not self.gpus.acquire(self.slot.gpus, stop):
            raise StartFailed(f"{self.slot_name}: stopped while waiting for its GPUs", reason="stopped")
        self._held = True
        try:
            placement = self._placement()
            if self.gpus.checked and self.gpus.before is not None:
                exp = self.experiment
                try:
                    placement["gpu_check"] = wait_clean(
                        host,
                        self.slot.gpus,
                        self.gpus.before,
                        tolerance_mib=exp.slots.clean_tolerance_mib,
                        timeout=exp.slots.clean_timeout,
                        stop=stop,
                        what=f"{self.slot_name} ({deployment.label})",
                    )
                except StartFailed as busy:
                    self._last_check = {"clean": False, "reason": str(busy), "evidence": list(busy.evidence)}
                    self.blocked = busy.reason == "gpu_busy"
                    raise
                self._last_check = placement["gpu_check"]
            else:
                placement["gpu_check"] = {"clean": None, "note": self.gpus.note}
            self._check_port_free(service, deployment)
            service.apply(slot_deployment(deployment, self.slot))
            wait_for_experiment(service, self.url, self.experiment, progress=progress, stop=stop)
        except BaseException:
            self._end_deployment()
            raise
        return GpuSlotServer(self.url, service, placement, self._end_deployment)

    def _check_port_free(self, service: Service, deployment: Deployment) -> None:
        """Before each start (the slot's instance is stopped then): nothing else may answer the slot's port, or
        its figures would be recorded as this deployment's while our server fails to bind (StartFailed,
        ``port_taken``, naming who holds it)."""
        try:
            check_port_free(service, self.experiment, self.url, f"{self.slot_name} ({deployment.label})")
        except StartFailed:
            raise
        except ServiceError as taken:
            raise StartFailed(str(taken), reason="port_taken") from None

    def failure_placement(self) -> dict[str, Any] | None:
        """The placement a failed deployment's records keep: the slot, and the last GPU check's evidence."""
        return {**self._placement(), **({"gpu_check": self._last_check} if self._last_check else {})}

    def _placement(self) -> dict[str, Any]:
        return {
            "host": self.slot.host,
            "slot": self.slot_name,
            "gpus": list(self.slot.gpus),
            "cuda_visible_devices": self.slot.visible_devices,
            "port": self.slot.port,
            "instance": self.instance,
        }

    def _end_deployment(self) -> None:
        """Restore the instance (its server stops) and free the slot's GPUs."""
        try:
            if self.service is not None:
                self.service.restore()
        finally:
            if self._held:
                self._held = False
                self.gpus.release(self.slot.gpus)

    def evidence(self, lines: int = 40) -> list[str]:
        if self.service is None:
            return []
        try:
            return list(self.service.logs_tail(lines))
        except SpecsweepError as exc:
            return [f"(could not read the server log: {exc})"]

    def close(self) -> bool:
        service, host = self.service, self.host
        self.service, self.host = None, None
        try:
            if service is None:
                return False
            try:
                service.restore()
            finally:
                with contextlib.suppress(SpecsweepError):
                    service.unlock()
            return True
        finally:
            if self._held:
                self._held = False
                self.gpus.release(self.slot.gpus)
            if self._opened_gpus:
                self._opened_gpus = False
                self.gpus.close()
            if host is not None:
                with contextlib.suppress(Exception):
                    host.close()


def _with_port(url: str, port: int) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = (parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else "") + f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def resolve_auto(experiment: Experiment) -> dict[str, int]:
    """The GPU count of each host that says ``gpus: auto``, from its nvidia-smi (HostError when it has none)."""
    from orchestrator.hosts.gpuprocs import gpu_count

    counts: dict[str, int] = {}
    for spec in experiment.host_specs():
        if getattr(spec, "gpus", None) == "auto":
            host = connect_host(spec)
            try:
                counts[spec.display_name] = gpu_count(host)
            finally:
                with contextlib.suppress(Exception):
                    host.close()
    return counts


class GpuSlotLauncher(Launcher):
    """The slots of :func:`orchestrator.plan.slots.pack`'s layout, phase by phase, on the experiment's hosts."""

    kind = "gpu-slots"

    def __init__(
        self,
        experiment: Experiment,
        plan: Plan,
        *,
        lock_label: str,
        break_lock: bool = False,
        known: dict[str, int] | None = None,
    ) -> None:
        from orchestrator.plan.slots import pack

        self.experiment = experiment
        self.layout: SlotLayout = pack(experiment, plan, known if known is not None else resolve_auto(experiment))
        specs = {spec.display_name: spec for spec in experiment.host_specs()}
        self.hosts = {name: HostGpus(name) for name in specs}
        self._slots = [
            GpuSlot(experiment, specs[s.host], s, self.hosts[s.host], lock_label=lock_label, break_lock=break_lock)
            for s in self.layout.all_slots()
        ]

    def slots(self) -> list[GpuSlot]:
        return list(self._slots)


def doctor_check(spec: Any, host: Host) -> tuple[Literal["ok", "warn", "fail"], str]:
    """``specsweep doctor``'s GPU slot check of a host that declares ``gpus``: (status, detail). Fails when
    nvidia-smi lists fewer GPUs than declared; warns about compute processes already on them (a slot on those
    GPUs would wait for them, then fail naming them)."""
    from orchestrator.hosts.gpuprocs import gpu_snapshot
    from orchestrator.hosts.telemetry import has_nvidia_smi

    declared = getattr(spec, "gpus", None)
    if not has_nvidia_smi(host):
        return "warn", f"gpus: {declared} declared, but no nvidia-smi: the GPUs are not checked between deployments"
    try:
        snapshot = gpu_snapshot(host)
    except HostError as exc:
        return "warn", f"the GPUs cannot be checked between deployments: {exc}"
    seen = len(snapshot.memory_mib)
    if isinstance(declared, int) and declared > seen:
        return "fail", f"gpus: {declared} declared, nvidia-smi lists {seen}"
    if snapshot.processes:
        held = "; ".join(p.describe() for p in snapshot.processes[:4])
        return "warn", f"{seen} GPU(s); already held: {held}"
    count = declared if isinstance(declared, int) else seen
    return "ok", f"{count} GPU(s) for slots, no compute process on any of them"


def instance_experiments(experiment: Experiment, host: Host) -> list[Any]:
    """``experiment`` once per service instance of its GPU slots that ``host`` holds anything of (a marker, a
    drop-in, a lock, a pid file), and once for the slots' run lock: for ``specsweep restore`` to undo what a
    killed run left on each.

    Read from the host, not from the experiment file as it is now (an edit that dropped configurations or
    changed ``gpus`` must not leave servers running), and without asking nvidia-smi (a restore is needed
    exactly when the driver fails)."""
    service = experiment.service
    template = _template_name(experiment)
    out: list[Any] = []
    if service.kind == "systemd" and getattr(service, "unit", None):
        from orchestrator.services.systemd import STATE_DIR, UNIT_DIR

        prefix = template.removesuffix("@.service") + "@"
        listing = host.run(
            f"ls -1 -- {STATE_DIR} {UNIT_DIR} 2>/dev/null; "
            f"systemctl list-units {shell_quote(prefix + '*')} --all --plain --no-legend 2>/dev/null; true"
        ).stdout
        names = set()
        for line in listing.splitlines():
            word = line.split()[0] if line.split() else ""
            match = re.match(rf"^({re.escape(prefix)}[A-Za-z0-9_.-]*?\.service)(\.d|\.lock|\.marker\.json)?$", word)
            if match and match.group(1) != template:
                names.add(match.group(1))
        for unit in sorted(names):
            out.append(experiment.model_copy(update={"service": service.model_copy(update={"unit": unit})}))
        return out  # the run lock is the template's own (restore's first source)
    lock = run_lock(host, experiment)
    state_dir = lock.path.rsplit("/", 1)[0]
    listing = lock.host.run(f"ls -1 -- {shell_quote(state_dir)} 2>/dev/null; true").stdout
    names = set()
    for line in listing.splitlines():
        match = re.match(rf"^({re.escape(template)}[A-Za-z0-9_-]*)\.(pid|exit|lock|marker\.json|log|secrets)$", line)
        if match:
            names.add(match.group(1))
    names.add(template)  # the run lock's own name: restore finds and breaks a dead run's lock
    for name in sorted(names):
        out.append(experiment.model_copy(update={"name": name}))
    return out
