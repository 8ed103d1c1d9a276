"""Playbooks: scripted diagnoses with expectations (the single-chain test, baseline capture, host check).

A sweep answers "which is best"; a playbook answers "is something wrong": ordered steps (deploy, load,
measure, expect, restore, baselines, doctor, smoke, shell) on one host of an experiment, each expectation a
pass or a fail with the numbers behind it, in a run directory like a sweep's.

    program = prepare("playbooks/single-chain-check.yaml", variables={"faults": "--fault commit-bug"})
    result = run_playbook(program)            # result.passed, result.outcomes, result.run_dir

Modules: ``schema`` (the file format and its errors), ``resolve`` (steps against the experiment: deployments
and load points), ``expectations`` (evaluating assertions), ``smoke`` (the smoke test), ``events``
(progress), ``runner`` (running it all, restoring the host on every way out).
"""

from orchestrator.playbooks.events import OutcomeReady, PlaybookStarted, StepStarted
from orchestrator.playbooks.expectations import CHECK_INPUTS, Measurement, Outcome, metric_value
from orchestrator.playbooks.resolve import Program, ResolvedStep, apply_vars, resolve, select_host
from orchestrator.playbooks.runner import (
    EXPECTATIONS_FILE,
    PlaybookOptions,
    PlaybookResult,
    prepare,
    run_playbook,
)
from orchestrator.playbooks.schema import STEP_KINDS, Playbook, load_playbook, parse_playbook

__all__ = [
    "CHECK_INPUTS",
    "EXPECTATIONS_FILE",
    "STEP_KINDS",
    "Measurement",
    "Outcome",
    "OutcomeReady",
    "Playbook",
    "PlaybookOptions",
    "PlaybookResult",
    "PlaybookStarted",
    "Program",
    "ResolvedStep",
    "StepStarted",
    "apply_vars",
    "load_playbook",
    "metric_value",
    "parse_playbook",
    "prepare",
    "resolve",
    "run_playbook",
    "select_host",
]
