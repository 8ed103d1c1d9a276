"""A playbook against its experiment: deployments and point ids as a sweep would give them, and errors that
point into the playbook file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import Experiment, load_experiment
from orchestrator.plan.deployments import build_plan
from orchestrator.playbooks import apply_vars, load_playbook, prepare, resolve, select_host

ROOT = Path(__file__).resolve().parents[2]
SIM_CHAIN = ROOT / "playbooks" / "experiments" / "sim-chain.yaml"

POOL = """\
name: pool
hosts: [{ssh: "root@a.invalid", name: a}, {ssh: "root@b.invalid", name: b}]
service: {kind: systemd, unit: x.service, exec_start: "/bin/server {args}"}
server: {url: "http://{host}:8000"}
engine: sglang
variants: {ar: {args: ""}}
load: {concurrency: [1]}
"""


@pytest.fixture
def experiment() -> Experiment:
    return load_experiment(SIM_CHAIN)


@pytest.fixture
def playbook_file(write_yaml: Callable[..., Path]) -> Callable[[str], Path]:
    def write(steps: str) -> Path:
        return write_yaml(f"name: t\nexperiment: {SIM_CHAIN}\nsteps:\n{steps}", "pb.yaml")

    return write


def test_the_single_chain_check_has_the_ids_a_sweep_gives_the_same_points(experiment: Experiment) -> None:
    program = resolve(load_playbook(ROOT / "playbooks" / "single-chain-check.yaml"), experiment)
    assert [d.label for d in program.plan.deployments] == ["linear", "ddtree(budget=7, topk=1)"]
    assert program.plan.restarts == 2
    sweep = {d.label: d for d in build_plan(experiment).deployments}
    for dep in program.plan.deployments:
        assert dep.config_hash == sweep[dep.label].config_hash
        (point,) = dep.load_points
        assert point.concurrency == 1 and point.requests == 16
        # C=1 with the experiment's own request count is the sweep's C=1 point, id and all.
        assert point.id in {p.id for p in sweep[dep.label].load_points}
    assert [s.text for s in program.steps][:3] == ["deploy linear", "load C=1 (16 requests)", "measure linear"]
    assert program.measured == {"linear": 1, "tree": 4}


def test_a_bare_load_runs_the_experiments_points_and_cannot_be_measured(
    experiment: Experiment, playbook_file: Callable[[str], Path]
) -> None:
    program = resolve(load_playbook(playbook_file("  - deploy: {variant: linear}\n  - load\n")), experiment)
    assert [p.label for p in program.steps[1].points] == ["C=1", "C=4"]
    path = playbook_file("  - deploy: {variant: linear}\n  - load\n  - measure: m\n")
    with pytest.raises(ConfigError, match=r"pb.yaml:6:5: steps.2.measure: the load before this step runs the "):
        resolve(load_playbook(path), experiment)


def test_repeated_loads_of_one_configuration_get_their_own_points(
    experiment: Experiment, playbook_file: Callable[[str], Path]
) -> None:
    steps = (
        "  - deploy: {variant: linear}\n  - load: {concurrency: 1}\n  - measure: before\n"
        "  - deploy: {variant: autoregressive}\n  - load: {concurrency: 2, requests: 3}\n"
        "  - deploy: {variant: linear}\n  - load: {concurrency: 1}\n  - measure: after\n"
    )
    program = resolve(load_playbook(playbook_file(steps)), experiment)
    assert [d.label for d in program.plan.deployments] == ["linear", "autoregressive"]
    linear = program.plan.deployments[0]
    assert len(linear.load_points) == 2
    first, second = linear.load_points
    assert second.id == f"{first.id}-s6"
    ar_point = program.plan.deployments[1].load_points[0]
    assert (ar_point.concurrency, ar_point.requests) == (2, 3)
    assert program.steps[5].deployment == linear  # the step carries the plan's full deployment


def test_baselines_step_deploys_each_baseline_at_every_point(
    experiment: Experiment, playbook_file: Callable[[str], Path]
) -> None:
    program = resolve(load_playbook(playbook_file("  - baselines\n  - restore\n")), experiment)
    sweep = [d for d in build_plan(experiment).deployments if d.baseline]
    assert [(d.id, [p.id for p in d.load_points]) for d in program.plan.deployments] == [
        (d.id, [p.id for p in d.load_points]) for d in sweep
    ]
    assert all(d.baseline for d in program.plan.deployments)
    assert program.steps[0].text == "baselines autoregressive, linear at C=1, C=4"


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        pytest.param(
            "  - deploy: {variant: lineer}\n",
            r"steps.0.deploy.variant: experiment 'sim-chain' has no variant 'lineer'; did you mean 'linear'\?",
            id="variant",
        ),
        pytest.param(
            "  - deploy: {variant: ddtree, params: {budget: 7, topK: 1}}\n",
            r"steps.0.deploy.params.topK: 'topK' is not a matrix key of variant 'ddtree'; did you mean 'topk'\?",
            id="param-typo",
        ),
        pytest.param(
            "  - deploy: {variant: ddtree, params: {budget: 7}}\n",
            r"steps.0.deploy.params: variant 'ddtree' needs params for its matrix keys: missing topk",
            id="param-missing",
        ),
        pytest.param(
            "  - deploy: {variant: ddtree}\n",
            r"steps.0.deploy.variant: variant 'ddtree' needs params for its matrix keys: missing budget, topk",
            id="no-params",
        ),
        pytest.param(
            "  - deploy: {variant: linear, params: {budget: 7}}\n",
            r"variant 'linear' has no matrix, so it takes no params",
            id="params-on-plain-variant",
        ),
    ],
)
def test_steps_the_experiment_cannot_satisfy(
    experiment: Experiment, playbook_file: Callable[[str], Path], steps: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        resolve(load_playbook(playbook_file(steps)), experiment)
    assert info.value.line == 4 and info.value.exit_code == 2


def test_baselines_need_baselines(write_yaml: Callable[..., Path], playbook_file: Callable[[str], Path]) -> None:
    exp = load_experiment(write_yaml(POOL))
    with pytest.raises(ConfigError, match="experiment 'pool' names no baselines"):
        resolve(load_playbook(playbook_file("  - baselines\n")), exp)


def test_vars_override_only_existing_vars(experiment: Experiment) -> None:
    faulty = apply_vars(experiment, {"faults": "--fault commit-bug"})
    tree = resolve(load_playbook(ROOT / "playbooks" / "single-chain-check.yaml"), faulty).plan.deployments[1]
    assert tree.command is not None and tree.command.endswith("--fault commit-bug")
    assert experiment.vars["faults"] == ""  # the original is untouched
    with pytest.raises(ConfigError, match=r"'fault' is not a var of experiment 'sim-chain'; did you mean 'faults'\?"):
        apply_vars(experiment, {"fault": "x"})


def test_playbook_vars_errors_point_at_the_playbook(write_yaml: Callable[..., Path]) -> None:
    path = write_yaml(f"name: t\nexperiment: {SIM_CHAIN}\nvars: {{profil: tiny}}\nsteps: [restore]\n", "pb.yaml")
    with pytest.raises(ConfigError, match=r"pb.yaml:3:8: vars.profil: 'profil' is not a var .* did you mean 'profile'"):
        prepare(path)


def test_select_host_keeps_one_host_of_a_pool(write_yaml: Callable[..., Path]) -> None:
    exp = load_experiment(write_yaml(POOL))
    assert [h.display_name for h in select_host(exp, None).host_specs()] == ["a"]
    assert [h.display_name for h in select_host(exp, "b").host_specs()] == ["b"]
    with pytest.raises(ConfigError, match=r"no host named 'c' .*"):
        select_host(exp, "c")


def test_prepare_uses_the_playbooks_experiment_or_the_override(write_yaml: Callable[..., Path]) -> None:
    program = prepare(ROOT / "playbooks" / "single-chain-check.yaml", variables={"profile": "tiny"})
    assert program.experiment.name == "sim-chain" and program.experiment.vars["profile"] == "tiny"
    with pytest.raises(ConfigError, match="this playbook names no experiment: pass one with --experiment FILE"):
        prepare(ROOT / "playbooks" / "host-check.yaml")
    checked = prepare(ROOT / "playbooks" / "host-check.yaml", experiment_file=SIM_CHAIN)
    assert [s.kind for s in checked.steps] == ["doctor", "smoke"]
    assert checked.plan.restarts == 0


def test_the_public_interface() -> None:
    import orchestrator.playbooks
    import orchestrator.sweep.baselines

    assert sorted(orchestrator.playbooks.__all__) == sorted(
        [
            "CHECK_INPUTS", "EXPECTATIONS_FILE", "STEP_KINDS", "Measurement", "Outcome", "OutcomeReady", "Playbook",
            "PlaybookOptions", "PlaybookResult", "PlaybookStarted", "Program", "ResolvedStep", "StepStarted",
            "apply_vars", "load_playbook", "metric_value", "parse_playbook", "prepare", "resolve", "run_playbook",
            "select_host",
        ]
    )  # fmt: skip
    assert sorted(orchestrator.sweep.baselines.__all__) == [
        "BaselineReuse",
        "COMPARED_SETTINGS",
        "adopt_reused",
        "baselines_source",
        "reuse_baselines",
    ]
    for module in (orchestrator.playbooks, orchestrator.sweep.baselines):
        for name in module.__all__:
            assert hasattr(module, name), name
