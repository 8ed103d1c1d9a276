"""Analysis of a run directory (pandas): the tidy frame, baseline comparisons, winners, the Pareto front,
consistency checks, and the difference between two runs. Reads only what the store wrote.

    analyse(run_dir) -> Analysis          everything below, in one call (reports and notebooks use this)
    load_run(run_dir) -> DataFrame        the tidy frame: one row per point (``frame`` module docstring)
    add_baseline_comparisons / best_per_load / pareto_front      (``compare``)
    CHECKS, run_checks, Finding, CheckSettings                   (``checks``)
    compare_runs(analysis_a, analysis_b) -> RunComparison        (``diff``)
"""

from orchestrator.analysis.checks import (
    CHECKS,
    CheckContext,
    CheckSettings,
    Finding,
    findings_frame,
    run_checks,
)
from orchestrator.analysis.compare import (
    THROUGHPUT,
    add_baseline_comparisons,
    best_per_load,
    pareto_front,
)
from orchestrator.analysis.diff import RunComparison, compare_frames, compare_runs
from orchestrator.analysis.frame import RunData, config_label, load_run, open_run, tidy_frame
from orchestrator.analysis.result import Analysis, analyse, analyse_run_data
from orchestrator.analysis.roles import BaselineRoles, baseline_roles, chain_length, tree_shape

__all__ = [
    "CHECKS",
    "THROUGHPUT",
    "Analysis",
    "BaselineRoles",
    "CheckContext",
    "CheckSettings",
    "Finding",
    "RunComparison",
    "RunData",
    "add_baseline_comparisons",
    "analyse",
    "analyse_run_data",
    "baseline_roles",
    "best_per_load",
    "chain_length",
    "compare_frames",
    "compare_runs",
    "config_label",
    "findings_frame",
    "load_run",
    "open_run",
    "pareto_front",
    "run_checks",
    "tidy_frame",
    "tree_shape",
]
