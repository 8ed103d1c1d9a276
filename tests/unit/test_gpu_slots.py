"""GPU slots: the schema (hosts' gpus, gpus_per_deployment, slots:), the packing onto disjoint GPU sets, the ETA
before and after packing, the slot schedule's order, and the clean-GPU wait against the nvidia-smi stub."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import ConfigError, StartFailed
from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deployments import build_plan
from orchestrator.plan.slots import GpuSlot, deal, pack, packed_eta, slot_sets

STUB_DIR = Path(__file__).resolve().parents[1] / "data" / "fake-nvidia-smi"

BASE = """\
name: slots
host: {kind: local, gpus: 8}
service:
  kind: process
  command: "{python} -m orchestrator.sim --port {slot_port} {spec_args}"
server: {url: "http://127.0.0.1:19000", expected_load_time: 10s}
engine: sglang
variants:
  autoregressive: {spec_args: "--algorithm ar"}
  linear: {spec_args: "--algorithm linear --draft-tokens {k}", matrix: {k: [1, 2, 3, 4, 5, 6, 7]}}
baselines: [autoregressive]
load: {concurrency: [1], requests: 4, max_tokens: 16}
"""


def load(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return load_experiment(path)


def error_for(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    return info.value


# -- packing ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "size", "sets"),
    [
        pytest.param(8, 1, [(i,) for i in range(8)], id="8xTP1"),
        pytest.param(8, 2, [(0, 1), (2, 3), (4, 5), (6, 7)], id="4xTP2"),
        pytest.param(8, 4, [(0, 1, 2, 3), (4, 5, 6, 7)], id="2xTP4"),
        pytest.param(8, 8, [tuple(range(8))], id="1xTP8"),
        pytest.param(8, 3, [(0, 1, 2), (3, 4, 5)], id="TP3-leaves-two"),
        pytest.param(2, 4, [], id="too-big"),
    ],
)
def test_slot_sets_are_aligned_and_disjoint(gpus: int, size: int, sets: list[tuple[int, ...]]) -> None:
    assert slot_sets(gpus, size) == sets
    flat = [g for s in sets for g in s]
    assert len(flat) == len(set(flat))


def test_mixed_sizes_run_in_phases_each_on_disjoint_sets_with_their_own_ports(tmp_path: Path) -> None:
    text = BASE.replace(
        "baselines:",
        '  ddtree: {spec_args: "--algorithm ddtree --budget {b}", matrix: {b: [8, 16, 32]}, gpus_per_deployment: 4}\n'
        "baselines:",
    )
    exp = load(tmp_path, text)
    plan = build_plan(exp)
    layout = pack(exp, plan)
    assert layout.phases == [1, 4]
    assert [s.gpus for s in layout.slots[1]] == [(i,) for i in range(7)]  # 7 configurations: 7 slots
    assert [s.gpus for s in layout.slots[4]] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    for slots in layout.slots.values():
        assert len({s.port for s in slots}) == len(slots)
        assert len({g for s in slots for g in s.gpus}) == sum(s.size for s in slots)
    slot = layout.slots[4][1]
    assert (slot.port, slot.instance, slot.visible_devices, slot.target) == (19004, "4-5-6-7", "4,5,6,7", slot.name)
    assert slot.name == "local/gpu4-5-6-7"


def test_shared_baselines_give_every_slot_the_hosts_target(tmp_path: Path) -> None:
    exp = load(tmp_path, BASE + "slots: {baselines: shared, port_step: 10}\n")
    layout = pack(exp, build_plan(exp))
    assert {s.target for s in layout.all_slots()} == {"local"}
    assert [s.port for s in layout.slots[1]] == [19000 + 10 * i for i in range(8)]


def test_deal_turns_by_one_slot_every_round() -> None:
    items = list("abcd")
    first = deal(items, 4, 1)  # type: ignore[arg-type]
    second = deal(items, 4, 2)  # type: ignore[arg-type]
    assert first == [["a"], ["b"], ["c"], ["d"]]
    assert second == [["d"], ["a"], ["b"], ["c"]]


def test_eta_before_and_after_packing(tmp_path: Path) -> None:
    """Eight TP=1 configurations on eight slots: one slot's time instead of eight (baselines shared)."""
    exp = load(tmp_path, BASE + "slots: {baselines: shared}\n")
    plan = build_plan(exp)
    eta = packed_eta(plan, pack(exp, plan), per_slot_baselines=False)
    one = plan.deployments[0].estimated_seconds()
    assert eta.serial_seconds == pytest.approx(8 * one)
    assert eta.packed_seconds == pytest.approx(one)
    assert eta.speedup == pytest.approx(8.0)
    assert eta.serial_gpu_hours == pytest.approx(8 * one * 8 / 3600)
    assert eta.used_gpu_hours == pytest.approx(8 * one / 3600)
    # Per slot, every slot measures the baseline first: two deployments' time.
    per_slot = packed_eta(plan, pack(load(tmp_path, BASE), plan), per_slot_baselines=True)
    assert per_slot.packed_seconds == pytest.approx(2 * one)
    assert all(runs[0] == "autoregressive" for runs in per_slot.assignment.values())


def test_plan_json_shows_the_slots(tmp_path: Path) -> None:
    (tmp_path / "exp.yaml").write_text(BASE)
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "plan", str(tmp_path / "exp.yaml"), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "SPECSWEEP_RESULTS": str(tmp_path / "results")},
    )
    assert proc.returncode == 0, proc.stderr
    import json

    slots = json.loads(proc.stdout)["slots"]
    assert slots["phases"][0]["gpus_per_deployment"] == 1 and len(slots["phases"][0]["slots"]) == 7
    assert slots["eta"]["speedup"] > 3


# -- the schema -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "key", "fragment"),
    [
        pytest.param("gpus: 8}", "gpus: 0}", "host", "between 1 and 64", id="zero-gpus"),
        pytest.param("gpus: 8}", "gpus: many}", "host", "auto", id="gpus-word"),
        pytest.param("--port {slot_port}", "--port 19000", "service.command", "{slot_port}", id="no-slot-port"),
        pytest.param(
            "baselines:",
            '  big: {spec_args: "x", gpus_per_deployment: 16}\nbaselines:',
            "variants.big.gpus_per_deployment",
            "does not fit",
            id="too-big",
        ),
        pytest.param('19000"', '"', "server.url", "give the port", id="url-without-port"),
        pytest.param("127.0.0.1:19000", "127.0.0.1:65530", "server.url", "above 65535", id="slot-port-over-65535"),
        pytest.param("slots: {}", "slots: {baselines: some}", "slots.baselines", "per-slot", id="bad-baselines"),
    ],
)
def test_slot_errors_name_the_line_and_key(tmp_path: Path, old: str, new: str, key: str, fragment: str) -> None:
    text = BASE + "slots: {}\n"
    assert old in text
    err = error_for(tmp_path, text.replace(old, new, 1))
    assert err.key is not None and err.key.startswith(key), str(err)
    assert err.line is not None and fragment in str(err), str(err)


def test_a_systemd_service_in_slots_names_a_template_unit(tmp_path: Path) -> None:
    text = BASE.replace(
        "  kind: process\n  command:",
        "  kind: systemd\n  unit: sglang.service\n  exec_start:",
    )
    err = error_for(tmp_path, text)
    assert err.key == "service.unit" and "NAME@.service" in str(err) and err.line == 5
    assert load(tmp_path, text.replace("sglang.service", "sglang@.service")).gpu_slots


def test_slot_fields_render_as_one_slot_without_gpus(tmp_path: Path) -> None:
    exp = load(tmp_path, BASE.replace("host: {kind: local, gpus: 8}", "host: local"))
    assert not exp.gpu_slots
    assert "--port 19000 " in (build_plan(exp).deployments[0].command or "")


def test_gpus_auto_is_planned_as_the_largest_deployment_with_a_note(tmp_path: Path) -> None:
    exp = load(tmp_path, BASE.replace("gpus: 8", "gpus: auto"))
    layout = pack(exp, build_plan(exp))
    assert layout.gpus == {"local": 1} and "auto" in layout.notes[0]
    assert pack(exp, build_plan(exp), {"local": 4}).gpus == {"local": 4}


# -- running in slots -------------------------------------------------------------------------------------


def test_a_slot_fills_in_its_values_and_cuda_visible_devices(tmp_path: Path) -> None:
    from orchestrator.launchers.gpuslots import slot_deployment

    exp = load(tmp_path, BASE)
    deployment = build_plan(exp).deployments[1]
    assert "__SPECSWEEP_SLOT_PORT__" in (deployment.command or "")
    slot = GpuSlot(host="local", gpus=(2, 3), port=19002, target="local/gpu2-3")
    ran = slot_deployment(deployment, slot)
    assert "--port 19002 " in (ran.command or "") and ran.environment["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert ran.id == deployment.id and ran.config_hash == deployment.config_hash


class _Slot:
    def __init__(self, slot: GpuSlot) -> None:
        self.slot = slot


def test_the_slot_schedule_gives_each_slot_its_baseline_and_its_hand(tmp_path: Path) -> None:
    from orchestrator.sweep.slots import SlotSchedule

    exp = load(tmp_path, BASE.replace("gpus: 8", "gpus: 2"))
    plan = build_plan(exp)
    layout = pack(exp, plan)
    schedule = SlotSchedule(plan, layout, set(), per_slot=True)
    assert schedule.targets == ["local/gpu0", "local/gpu1"]
    assert schedule.total_points == 2 + 7  # the baseline's point on each slot, each other point once
    a, b = (_Slot(s) for s in layout.slots[1])
    got_a = list(schedule.deployments_for_slot(a, going=lambda: True, skipped=lambda: None))
    got_b = list(schedule.deployments_for_slot(b, going=lambda: True, skipped=lambda: None))
    assert got_a[0].variant == got_b[0].variant == "autoregressive"
    # gpu0 ran its hand and then took the rest of gpu1's from its tail: nothing is measured twice.
    others = [d.id for d in got_a[1:] + got_b[1:]]
    assert sorted(others) == sorted(d.id for d in plan.deployments if not d.baseline)
    assert got_b[1:] == []


def test_a_later_phase_waits_until_the_earlier_one_is_given_out(tmp_path: Path) -> None:
    from orchestrator.sweep.slots import SlotSchedule

    text = BASE.replace("gpus: 8", "gpus: 2").replace(
        "baselines:", '  big: {spec_args: "--algorithm ddtree", gpus_per_deployment: 2}\nbaselines:'
    )
    exp = load(tmp_path, text)
    plan = build_plan(exp)
    layout = pack(exp, plan)
    schedule = SlotSchedule(plan, layout, set(), per_slot=True)
    big = _Slot(layout.slots[2][0])
    going = threading.Event()
    going.set()
    calls = {"n": 0}

    def still(_: Any = None) -> bool:  # stop waiting after a few polls: the phase was never given out
        calls["n"] += 1
        return calls["n"] < 5

    assert list(schedule.deployments_for_slot(big, going=still, skipped=lambda: None)) == []
    for small in layout.slots[1]:
        list(schedule.deployments_for_slot(_Slot(small), going=lambda: True, skipped=lambda: None))
    got = list(schedule.deployments_for_slot(big, going=lambda: True, skipped=lambda: None))
    assert [d.variant for d in got] == ["autoregressive", "big"]


# -- clean GPUs -------------------------------------------------------------------------------------------


@pytest.fixture
def fake_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "gpus.json"
    monkeypatch.setenv("FAKE_GPU_STATE", str(state))
    monkeypatch.setenv("FAKE_GPUS", "8")
    monkeypatch.setenv("PATH", f"{STUB_DIR}{os.pathsep}{os.environ['PATH']}")
    return state


def test_wait_clean_names_the_process_that_holds_a_gpu(fake_gpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.hosts.gpuprocs import gpu_snapshot
    from orchestrator.hosts.local import LocalHost
    from orchestrator.launchers.gpuslots import wait_clean
    from orchestrator.sim import gpus

    host = LocalHost()
    before = gpu_snapshot(host).memory_mib
    holder = subprocess.Popen(["sleep", "60"])
    try:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
        gpus.claim(3000, pid=holder.pid, command="sleep 60")
        assert wait_clean(host, [2], before, tolerance_mib=512, timeout=1, stop=threading.Event(), what="x")["clean"]
        with pytest.raises(StartFailed) as info:
            wait_clean(host, [0, 1], before, tolerance_mib=512, timeout=0.2, stop=threading.Event(), what="slot")
        assert info.value.reason == "gpu_busy"
        assert f"PID {holder.pid} on GPU 0 (3000 MiB): sleep 60" in str(info.value)
    finally:
        holder.kill()
        holder.wait()
    # A holder that is gone frees its memory, as a driver frees a dead process's.
    assert wait_clean(host, [0], before, tolerance_mib=512, timeout=1, stop=threading.Event(), what="x")["clean"]


def test_a_second_claim_on_a_taken_gpu_fails_with_cudas_out_of_memory_message(
    fake_gpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.sim import gpus

    holder = subprocess.Popen(["sleep", "60"])
    try:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
        assert gpus.claim(60000, pid=holder.pid) == [3]
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
        with pytest.raises(gpus.GpuOutOfMemory) as info:
            gpus.claim(60000)
        message = info.value.lines[-1]
        assert message.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 58.59 GiB.")
        assert "GPU 1 has a total capacity of 79.65 GiB" in message  # the device as the process numbers it
        assert f"Process {holder.pid} has 58.59 GiB memory in use." in message
        assert [h["pid"] for h in gpus.holders(str(fake_gpus))] == [holder.pid]  # nothing half-claimed
    finally:
        holder.kill()
        holder.wait()


def test_shared_baselines_are_dealt_first_like_any_deployment(tmp_path: Path) -> None:
    from orchestrator.sweep.slots import SlotSchedule

    exp = load(tmp_path, BASE + "slots: {baselines: shared}\n")
    plan = build_plan(exp)
    layout = pack(exp, plan)
    schedule = SlotSchedule(plan, layout, set(), per_slot=False)
    assert schedule.targets == ["local"] and schedule.total_points == 8
    slots = [schedule.deployments_for_slot(_Slot(s), going=lambda: True, skipped=lambda: None) for s in layout.slots[1]]
    first = [next(slot).variant for slot in slots]  # the eight slots side by side: one deployment each
    assert first == ["autoregressive"] + ["linear"] * 7
    assert all(list(slot) == [] for slot in slots)


def _record(host: str, value: float, lo: float, hi: float) -> Any:
    from orchestrator.runs.store import Record

    return Record(
        run_id="r",
        experiment="e",
        deployment_id="d",
        point_id="p-1",
        config_hash="c",
        host=host,
        variant="autoregressive",
        mode="concurrency",
        concurrency=1,
        status="ok",
        started_at="2026-01-01T00:00:00Z",
        finished_at="2026-01-01T00:00:01Z",
        client={"output_tok_s": value},
        intervals={"figures": {"output_tok_s": {"value": value, "lo": lo, "hi": hi}}},
    )


def test_the_slot_equivalence_check_compares_the_baseline_slot_by_slot() -> None:
    from orchestrator.sweep.slots import equivalence_check

    records = [_record("h/gpu0", 100, 95, 105), _record("h/gpu1", 102, 97, 107), _record("h/gpu2", 130, 125, 135)]
    pairs = equivalence_check(records, "autoregressive")
    assert [(p["slots"][1], p["equivalent"]) for p in pairs] == [("h/gpu1", True), ("h/gpu2", False)]
    assert "beyond noise" in pairs[1]["why"]


def test_doctor_checks_the_declared_gpus_and_who_holds_them(fake_gpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.hosts.local import LocalHost
    from orchestrator.launchers.gpuslots import doctor_check
    from orchestrator.sim import gpus

    class Spec:
        gpus = 8

    host = LocalHost()
    assert doctor_check(Spec(), host)[0] == "ok"
    Spec.gpus = 16
    status, detail = doctor_check(Spec(), host)
    assert status == "fail" and "nvidia-smi lists 8" in detail
    Spec.gpus = 8
    holder = subprocess.Popen(["sleep", "60"])
    try:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
        gpus.claim(1000, pid=holder.pid, command="sleep 60")
        status, detail = doctor_check(Spec(), host)
        assert status == "warn" and f"PID {holder.pid} on GPU 5" in detail
    finally:
        holder.kill()
        holder.wait()


def test_a_slot_whose_gpus_are_held_retires_and_the_sweep_stops_only_when_all_are(tmp_path: Path) -> None:
    from orchestrator.sweep.slots import SlotFailureTracker, SlotSchedule

    exp = load(tmp_path, BASE.replace("gpus: 8", "gpus: 2"))
    plan = build_plan(exp)
    layout = pack(exp, plan)
    schedule = SlotSchedule(plan, layout, set(), per_slot=True)

    class Busy:
        def __init__(self, slot: GpuSlot) -> None:
            self.slot, self.name, self.blocked = slot, slot.target, True

        def failure_placement(self) -> None:
            return None

    slots = [Busy(s) for s in layout.slots[1]]
    told: list[str] = []
    tracker = SlotFailureTracker(exp.failure_policy, schedule, slots, told.append)
    baseline = plan.deployments[0]
    assert baseline.baseline
    assert tracker.failed("local/gpu0", baseline, "GPU 0 not clean: PID 7") is None  # not the sweep: the slot
    assert schedule.retired == {"local/gpu0"} and "local/gpu0 retired" in told[0]
    rest = list(schedule.deployments_for_slot(_Slot(layout.slots[1][1]), going=lambda: True, skipped=lambda: None))
    assert len(rest) == len(plan.deployments)  # the other slot: its baseline, its hand, and the retired one's
    halted = tracker.failed("local/gpu1", baseline, "GPU 1 not clean: PID 8")
    assert halted is not None and "every slot of 1 GPU(s)" in halted
    slots[0].blocked = False  # any other failure is the policy's: a baseline that cannot start stops it
    fresh = SlotFailureTracker(exp.failure_policy, SlotSchedule(plan, layout, set(), per_slot=True), slots, told.append)
    assert fresh.failed("local/gpu0", baseline, "exit 1") is not None


def test_gpus_auto_reads_the_count_from_nvidia_smi_when_the_run_opens(tmp_path: Path, fake_gpus: Path) -> None:
    from orchestrator.launchers.gpuslots import GpuSlotLauncher

    exp = load(tmp_path, BASE.replace("gpus: 8", "gpus: auto"))
    launcher = GpuSlotLauncher(exp, build_plan(exp), lock_label="test")
    assert launcher.layout.gpus == {"local": 8} and not launcher.layout.notes
    assert [s.slot.name for s in launcher.slots()] == [f"local/gpu{i}" for i in range(7)]


# -- the slots' run lock and restore (issue 40: items 5, 6, 7) ------------------------------------------------


def _dead_lock(service: str) -> str:
    """A lock file as a run on this controller that has since died leaves it."""
    import json

    from orchestrator.services.hoststate import controller_identity

    gone = subprocess.Popen(["true"])
    gone.wait()
    info = {**controller_identity(), "pid": gone.pid, "pid_start": "", "label": "killed", "token": "t0"}
    return json.dumps({**info, "service": service}) + "\n"


def test_the_slots_run_lock_lives_in_the_logins_home_never_in_a_directory_named_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.hosts.local import LocalHost
    from orchestrator.launchers.gpuslots import HostGpus

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    monkeypatch.setenv("PATH", f"{tmp_path / 'no-gpus'}{os.pathsep}{os.environ['PATH']}")
    exp = load(tmp_path, BASE)
    gpus = HostGpus("local")
    gpus.open(LocalHost(), exp, "test run", False)
    lock = home / ".local" / "state" / "specsweep" / "slots-gpu.lock"
    try:
        assert lock.is_file()
        assert not (work / "~").exists()
    finally:
        gpus.close()
    assert not lock.exists()


@pytest.mark.parametrize(
    ("gpus_line", "instance"),
    [
        # An edit dropped configurations after a kill -9: slot 7 is no longer in the file's layout.
        pytest.param("gpus: 2", "7", id="instance-the-file-no-longer-plans"),
        # gpus: auto and nvidia-smi failing (a driver fault): restore asks no GPU query.
        pytest.param("gpus: auto", "0", id="gpus-auto-with-nvidia-smi-failing"),
    ],
)
def test_restore_undoes_the_slot_instances_the_host_holds_and_the_run_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus_line: str, instance: str
) -> None:
    from orchestrator.launchers.restore import restore_experiment

    home = tmp_path / "home"
    state = home / ".local" / "state" / "specsweep"
    state.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    broken = tmp_path / "bin"
    broken.mkdir()
    smi = broken / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the driver' >&2\nexit 9\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{broken}{os.pathsep}{os.environ['PATH']}")
    (state / f"slots-gpu{instance}.lock").write_text(_dead_lock(f"slots-gpu{instance}"))
    (state / "slots-gpu.lock").write_text(_dead_lock("slots-gpu"))
    exp = load(tmp_path, BASE.replace("gpus: 8", gpus_line))
    outcomes = restore_experiment(exp)
    assert not [o.error for o in outcomes if o.error], [o.error for o in outcomes]
    assert not (state / f"slots-gpu{instance}.lock").exists()
    assert not (state / "slots-gpu.lock").exists()
    assert {f"slots-gpu{instance}", "slots-gpu"} <= {o.service for o in outcomes if o.leftover is not None}


def test_a_resume_with_fewer_gpus_measures_no_finished_point_again(tmp_path: Path) -> None:
    """Four slots measured every point, then a GPU dropped out (``gpus: auto`` gives 2): the resumed run's
    slots are others, yet nothing is left to measure (resume is by point, never by slot)."""
    from orchestrator.sweep.slots import SlotSchedule

    four = load(tmp_path, BASE.replace("gpus: 8", "gpus: 4"))
    plan = build_plan(four)
    targets = [slot.target for slot in pack(four, plan).all_slots()]
    assert len(targets) == 4
    final = {(t, p.id) for d in plan.deployments if d.baseline for t in targets for p in d.load_points}
    others = [d for d in plan.deployments if not d.baseline]
    final |= {(targets[i % 4], p.id) for i, d in enumerate(others) for p in d.load_points}  # dealt over 4 slots
    two = load(tmp_path, BASE.replace("gpus: 8", "gpus: 2"))
    layout = pack(two, build_plan(two))
    resumed = SlotSchedule(plan, layout, final, per_slot=True)
    assert resumed.pending_count() == 0
    again = [
        (slot.target, d.label)
        for slot in layout.all_slots()
        for d in resumed.deployments_for_slot(_Slot(slot), going=lambda: True, skipped=lambda: None)
        if resumed.pending_points(slot.target, d)
    ]
    assert again == []
