"""The experiment is resolved once per sweep and carried in the opened run (issue 51): opening, resuming,
reusing baselines and the loop read ``OpenedRun.resolved`` instead of resolving it again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.plan.deployments import build_plan
from orchestrator.runs import identity
from orchestrator.sweep import baselines, opening, resume, runner
from orchestrator.sweep.opening import OpenOptions, open_run
from tests.unit.launch_fakes import make_experiment


def test_a_run_is_resolved_once_when_opened_new_resumed_or_with_baselines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = make_experiment(tmp_path)
    plan = build_plan(exp)
    expected = identity.resolved_experiment(exp)
    calls: list[str] = []

    def counted(where: str) -> Any:
        def resolve(experiment: Any) -> dict[str, Any]:
            if experiment is exp:  # (a resume also resolves the run's stored experiment, to compare: another one)
                calls.append(where)
            return identity.resolved_experiment(experiment)

        return resolve

    for module in (opening, resume, baselines, runner):
        monkeypatch.setattr(module, "resolved_experiment", counted(module.__name__.rsplit(".", 1)[-1]))
    root = tmp_path / "results"
    first = open_run(exp, plan, OpenOptions(results_root=root))
    first.store.release()
    assert first.resolved == expected and calls == ["opening"]
    calls.clear()
    again = open_run(exp, plan, OpenOptions(results_root=root, resume="latest"))
    again.store.release()
    assert again.resolved == expected and calls == ["opening"]  # not again to find the run, nor to compare it
    calls.clear()
    reused = open_run(exp, plan, OpenOptions(results_root=root, baselines_from=str(first.store.path)))
    reused.store.release()
    assert reused.resolved == expected and calls == ["opening"]  # nor to compare the baselines' source
