"""`specsweep doctor`: check, before a sweep, that every host of an experiment can be driven.

Per host, in order (a failed connection skips the rest): SSH reachable with the configured key and host-key
policy; commands run as root (directly or through ``sudo -n``); systemd present; the unit exists; its
drop-in directory writable; its journal readable; no leftover or lock of another run (a sweep that holds the
lock now fails the check: wait for it, restore nothing under it); the server port free or served by our unit;
the clock close to the controller's; ``nvidia-smi`` present (a warning only; not asked of an experiment whose
server runs on the CPU: :func:`cpu_only`); with GPU
slots (``gpus:`` on the host), the GPUs nvidia-smi lists and whether a process already holds one. For a
process service the systemd checks give way to: the program exists, the working directory exists.

Nothing on the host is changed. Each check is a value (:class:`Check`); the CLI draws the checklist.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from orchestrator.errors import SpecsweepError
from orchestrator.hosts import SSHHost, connect_host
from orchestrator.hosts.base import Host
from orchestrator.launchers.outcomes import Check, HostReport, Status
from orchestrator.quoting import shell_quote, split_command
from orchestrator.services import make_service
from orchestrator.services.base import Leftover
from orchestrator.services.systemd import UNIT_DIR
from orchestrator.templates import fields

__all__ = ["Check", "HostReport", "Status", "check_host", "cpu_only", "guard", "run_doctor", "running_sweep"]

CLOCK_SKEW_WARN = 2.0


def run_doctor(experiment: Any, *, progress: Callable[[str, Check], None] | None = None) -> list[HostReport]:
    """Check where ``experiment``'s deployments run, as its launcher's kind does (``LauncherKind.doctor``: every
    host; a Slurm launcher's login node and partition; a Kubernetes launcher's cluster);
    ``progress(host, check)`` is called as each check finishes."""
    from orchestrator.launchers.registry import kind_of

    return kind_of(experiment).doctor(experiment, progress=progress)


def check_host(
    experiment: Any, spec: Any, *, progress: Callable[[str, Check], None] | None = None, gpu_slots: bool = False
) -> HostReport:
    """Every check of one host (with ``gpu_slots``, the GPUs the host declares too)."""
    report = HostReport(host=str(getattr(spec, "display_name", None) or getattr(spec, "name", None) or "host"))

    def add(check: Check) -> None:
        report.checks.append(check)
        if progress is not None:
            progress(report.host, check)

    try:
        host = connect_host(spec)
    except SpecsweepError as exc:
        add(Check("ssh", "fail", str(exc)))
        return report
    try:
        _run_checks(experiment, spec, host, add, gpu_slots=gpu_slots)
    finally:
        host.close()
    return report


def _run_checks(experiment: Any, spec: Any, host: Host, add: Callable[[Check], None], *, gpu_slots: bool) -> None:
    try:
        whoami = host.run("id -u; id -un").check("id", host=host.name).stdout.split()
    except SpecsweepError as exc:
        add(Check("ssh", "fail", str(exc)))
        return
    if isinstance(host, SSHHost):
        t = host.target
        policy = "accept-new" if getattr(spec, "host_key_policy", "strict") == "accept-new" else "strict"
        add(Check("ssh", "ok", f"{t.user}@{t.hostname}:{t.port}, host key checked ({policy})"))
    else:
        add(Check("local", "ok", "commands run on this machine"))
    service_spec = experiment.service
    is_systemd = getattr(service_spec, "kind", "") == "systemd"
    sudo = " through sudo -n" if isinstance(host, SSHHost) and host.uses_sudo else ""
    if whoami[:1] == ["0"]:
        add(Check("root", "ok", f"commands run as root{sudo}"))
    else:
        add(
            Check(
                "root",
                "fail" if is_systemd else "ok",
                f"commands run as {whoami[1] if len(whoami) > 1 else '?'}{sudo}"
                + ("; systemd changes need root (set sudo: auto and allow sudo -n)" if is_systemd else ""),
            )
        )
    existing = getattr(service_spec, "kind", "") == "none"
    if is_systemd:
        _systemd_checks(service_spec, host, add)
    elif existing:
        _existing_checks(experiment, host, add)
    else:
        _process_checks(service_spec, host, add)
    _leftover_check(experiment, host, add)
    if not existing:  # an existing server holds its port: that is the point
        _port_check(experiment, spec, host, service_spec, add)
    _clock_check(host, add)
    cpu = None if gpu_slots else cpu_only(experiment)
    if cpu is not None:  # nvidia-smi's absence says nothing about a server that runs on the CPU
        add(Check("gpu", "skip", f"not checked: {cpu}"))
    else:
        _gpu_check(host, add)
    if gpu_slots:  # the declared GPUs there, and none held already
        from orchestrator.launchers.gpuslots import doctor_check

        guard(add, "gpu slots", lambda: Check("gpu slots", *doctor_check(spec, host)))


def guard(add: Callable[[Check], None], name: str, body: Callable[[], Check]) -> None:
    """``add(body())``, or a failed check named ``name`` saying why ``body`` raised."""
    try:
        add(body())
    except SpecsweepError as exc:
        add(Check(name, "fail", str(exc)))


def _systemd_checks(service_spec: Any, host: Host, add: Callable[[Check], None]) -> None:
    unit = service_spec.unit
    q = shell_quote(unit)

    def systemd() -> Check:
        r = host.run("[ -d /run/systemd/system ] && systemctl --version | head -n 1")
        return Check("systemd", "ok", r.stdout.strip()) if r.ok else Check("systemd", "fail", "systemd is not running")

    def unit_exists() -> Check:
        r = host.run(f"systemctl show {q} -p LoadState,FragmentPath,ActiveState")
        r.check("systemctl show", host=host.name)
        v = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
        if v.get("LoadState") == "loaded":
            return Check("unit", "ok", f"{unit}: {v.get('FragmentPath', '?')}, {v.get('ActiveState', '?')}")
        if getattr(service_spec, "mode", "dropin") == "unit":
            return Check("unit", "ok", f"{unit} does not exist yet; mode unit will create it")
        return Check("unit", "fail", f"{unit} is {v.get('LoadState', 'unknown')} on the host")

    def writable() -> Check:
        d = shell_quote(f"{UNIT_DIR}/{unit}.d")
        r = host.run(f"test -w {UNIT_DIR} && {{ test ! -e {d} || test -w {d}; }}")
        if r.ok:
            return Check("drop-ins", "ok", f"{UNIT_DIR} writable")
        return Check("drop-ins", "fail", f"cannot write under {UNIT_DIR}")

    def journal() -> Check:
        r = host.run(f"journalctl -q -u {q} -n 1 --no-pager > /dev/null")
        if r.ok:
            return Check("journal", "ok", f"journalctl -u {unit} readable")
        return Check("journal", "fail", (r.stderr.strip() or "journalctl failed").splitlines()[-1])

    for name, body in (("systemd", systemd), ("unit", unit_exists), ("drop-ins", writable), ("journal", journal)):
        guard(add, name, body)


def _existing_checks(experiment: Any, host: Host, add: Callable[[Check], None]) -> None:
    """``service: {kind: none}``: the server must already run (it is measured as it is, never started)."""

    def server() -> Check:
        service = make_service(experiment, host)
        state = service.state()
        url = getattr(service, "url", experiment.server.url)
        if state.running:
            return Check("server", "ok", f"{url} answers; it is measured as it runs (kind none: never restarted)")
        return Check("server", "fail", f"{url} does not answer ({state.describe()}); kind none never starts it")

    guard(add, "server", server)


def _process_checks(service_spec: Any, host: Host, add: Callable[[Check], None]) -> None:
    command = getattr(service_spec, "command", "") or ""

    def program() -> Check:
        try:
            first = split_command(command)[0]
        except SpecsweepError as exc:
            return Check("program", "fail", str(exc))
        if fields(first):
            return Check("program", "skip", f"{first} is a template; checked at run time")
        r = host.run(f"command -v {shell_quote(first)}")
        return Check("program", "ok", r.stdout.strip()) if r.ok else Check("program", "fail", f"{first} not found")

    def workdir() -> Check:
        wd = getattr(service_spec, "workdir", None)
        if not wd:
            return Check("workdir", "skip", "none set")
        ok = host.run(f"test -d {shell_quote(wd)}").ok
        return Check("workdir", "ok" if ok else "fail", wd if ok else f"{wd} does not exist")

    guard(add, "program", program)
    guard(add, "workdir", workdir)


def running_sweep(experiment: Any, leftover: Leftover | None) -> str | None:
    """What a live lock on the service says (the run that holds it, its pid and controller), None when no live
    run holds it: a sweep running now is no leftover to restore, and no sweep can start beside it."""
    if leftover is None or leftover.lock is None or leftover.lock_stale or leftover.lock.get("corrupt"):
        return None
    lock = leftover.lock
    label = str(lock.get("label") or "")
    name = str(getattr(experiment, "name", "") or "")
    who = f"pid {lock.get('pid', '?')} on {lock.get('controller', '?')}, since {lock.get('started', '?')}"
    if name and label.startswith(f"{name} "):
        return f"a sweep of this experiment is running ({who}, run {label[len(name) + 1 :]}): wait for it"
    return f"another specsweep run drives {leftover.service} ({label or 'unnamed'}; {who}): wait for it"


def _leftover_check(experiment: Any, host: Host, add: Callable[[Check], None]) -> None:
    def body() -> Check:
        leftover = make_service(experiment, host).find_leftovers()
        running = running_sweep(experiment, leftover)
        if running is not None:
            return Check("leftovers", "fail", running)
        if leftover is None:
            return Check("leftovers", "ok", "no marker or lock of another run")
        if leftover.marker is not None:
            return Check("leftovers", "warn", leftover.describe() + "; the next run (or specsweep restore) undoes it")
        return Check("leftovers", "warn", leftover.describe())

    guard(add, "leftovers", body)


def _port_check(experiment: Any, spec: Any, host: Host, service_spec: Any, add: Callable[[Check], None]) -> None:
    def body() -> Check:
        url = urlsplit(experiment.server_url(spec))
        port = url.port or (443 if url.scheme == "https" else 80)
        r = host.run(f"command -v ss >/dev/null || exit 127; ss -Hltnp 'sport = :{int(port)}'")
        if r.exit_code == 127:
            return Check("port", "warn", "ss is not installed; port not checked")
        if not r.stdout.strip():
            return Check("port", "ok", f"port {port} free")
        pids = sorted({int(p) for p in re.findall(r"pid=(\d+)", r.stdout)})
        unit = getattr(service_spec, "unit", None)
        if unit and pids:
            cg = host.run(f"cat /proc/{pids[0]}/cgroup 2>/dev/null").stdout
            if f"/{unit}" in cg:
                return Check("port", "ok", f"port {port} served by {unit}")
        ours = _started_by_us(experiment, host, pids) if not unit and pids else None
        if ours is not None and running_sweep(experiment, ours) is not None:
            return Check("port", "ok", f"port {port} held by the server of the sweep running now")
        if ours is not None:
            return Check("port", "ok", f"port {port} held by this experiment's server (the next run stops it)")
        users = ", ".join(re.findall(r'users:\(\("([^"]+)"', r.stdout)) or "another process"
        return Check(
            "port",
            "fail",
            f"port {port} is in use by {users} (pid {', '.join(map(str, pids)) or '?'}): the server cannot listen "
            "there; stop that process or move the server (its command and server.url) to a free port",
        )

    guard(add, "port", body)


def _started_by_us(experiment: Any, host: Host, pids: list[int]) -> Leftover | None:
    """What a run of this experiment left (its marker) when a process service's port is held by the server that
    run started (its process group, named by the service's marker or pid file): not another program. None
    otherwise."""
    try:
        leftover = make_service(experiment, host).find_leftovers()
    except SpecsweepError:
        return None
    process = ((leftover.marker or {}).get("process") if leftover is not None else None) or {}
    leader = process.get("pid") if isinstance(process, dict) else None
    if not isinstance(leader, int):
        return None
    sessions = host.run(" ".join(["ps -o sid= -p", ",".join(str(p) for p in pids)])).stdout.split()
    return leftover if str(leader) in sessions else None


#: What says a server runs on the CPU alone, in its command or environment (each engine's own switch):
#: SGLang's and vLLM's ``--device cpu``, SGLang's CPU engine, vLLM's CPU build's settings, llama.cpp without
#: offloaded layers, and no CUDA device visible.
_CPU_SIGNS = (
    (re.compile(r"--device(?:=|\s+)['\"]?cpu\b"), "--device cpu"),
    (re.compile(r"\bSGLANG_USE_CPU_ENGINE\b"), "SGLANG_USE_CPU_ENGINE"),
    (re.compile(r"\bVLLM_CPU_[A-Z_]+\b"), "vLLM's CPU build (VLLM_CPU_*)"),
    (re.compile(r"\bVLLM_TARGET_DEVICE(?:=|\": \")cpu\b"), "VLLM_TARGET_DEVICE cpu"),
    (re.compile(r"(?:\s-ngl|--n-gpu-layers|--gpu-layers)(?:=|\s+)0\b"), "no layer on a GPU"),
    (re.compile(r"\bCUDA_VISIBLE_DEVICES\": \"(?:-1)?\""), "no CUDA device visible"),
)


def cpu_only(experiment: Any) -> str | None:
    """Why ``experiment``'s server needs no GPU (the simulator; a command or environment that says the CPU:
    :data:`_CPU_SIGNS`), None when nothing says so."""
    if getattr(experiment, "engine", None) == "sim":
        return "the experiment runs the simulator (engine: sim), which needs no GPU"
    service = getattr(experiment, "service", None)
    dump = getattr(service, "model_dump", None)
    texts = [json.dumps(dump(mode="json"))] if callable(dump) else []
    for variant in (getattr(experiment, "variants", None) or {}).values():
        texts += [str(v) for v in getattr(variant, "template_fields", {}).values()]
    text = " " + "\n".join(texts)
    for pattern, what in _CPU_SIGNS:
        if pattern.search(text):
            return f"the experiment runs on the CPU ({what})"
    return None


def _clock_check(host: Host, add: Callable[[Check], None]) -> None:
    def body() -> Check:
        t0 = time.time()
        r = host.run("date +%s.%N").check("date", host=host.name)
        t1 = time.time()
        try:
            remote = float(r.stdout.strip())
        except ValueError:
            return Check("clock", "warn", f"cannot read the host's clock: {r.stdout.strip()!r}")
        skew = remote - (t0 + t1) / 2
        level: Status = "ok" if abs(skew) <= CLOCK_SKEW_WARN else "warn"
        return Check("clock", level, f"skew {skew:+.2f} s (round trip {t1 - t0:.2f} s)")

    guard(add, "clock", body)


def _gpu_check(host: Host, add: Callable[[Check], None]) -> None:
    def body() -> Check:
        r = host.run("command -v nvidia-smi >/dev/null || exit 127; nvidia-smi -L", timeout=30)
        if r.exit_code == 127:
            return Check("gpu", "warn", "nvidia-smi not found")
        if not r.ok:
            return Check("gpu", "warn", (r.stderr.strip() or "nvidia-smi failed").splitlines()[-1])
        gpus = [line for line in r.stdout.splitlines() if line.startswith("GPU")]
        return Check("gpu", "ok", f"{len(gpus)} GPU(s)" + (f": {gpus[0]}" if gpus else ""))

    guard(add, "gpu", body)
