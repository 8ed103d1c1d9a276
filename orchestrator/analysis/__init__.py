"""Analysis of a run directory (pandas): the tidy frame, baseline comparisons, winners, the Pareto front,
consistency checks, and the difference between two runs. Reads only what the store wrote.

    analyse(run_dir) -> Analysis          everything below, in one call (reports and notebooks use this)
    load_run(run_dir) -> DataFrame        the tidy frame: one row per point (``frame`` module docstring)
    add_baseline_comparisons / best_per_load / pareto_front      (``compare``)
    CHECKS, run_checks, Finding, CheckSettings                   (``checks``)
    compare_runs(analysis_a, analysis_b) -> RunComparison        (``diff``)

The names above load on first use (``from orchestrator.analysis import analyse`` as before): importing one module
of the package (``ls``'s ``quickcounts`` and ``answerfile``, the CLI's ``deciding``) imports no pandas, about
0.6 CPU s of every ``ls`` (bench/RESULTS-scale.md, tests/unit/test_ls_imports.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.faces import lazy_face

if TYPE_CHECKING:
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

# The face loads on first use (PEP 562): importing one module of the package never imports the others.
_LAZY = {
    "CHECKS": "orchestrator.analysis.checks",
    "CheckContext": "orchestrator.analysis.checks",
    "CheckSettings": "orchestrator.analysis.checks",
    "Finding": "orchestrator.analysis.checks",
    "findings_frame": "orchestrator.analysis.checks",
    "run_checks": "orchestrator.analysis.checks",
    "THROUGHPUT": "orchestrator.analysis.compare",
    "add_baseline_comparisons": "orchestrator.analysis.compare",
    "best_per_load": "orchestrator.analysis.compare",
    "pareto_front": "orchestrator.analysis.compare",
    "RunComparison": "orchestrator.analysis.diff",
    "compare_frames": "orchestrator.analysis.diff",
    "compare_runs": "orchestrator.analysis.diff",
    "RunData": "orchestrator.analysis.frame",
    "config_label": "orchestrator.analysis.frame",
    "load_run": "orchestrator.analysis.frame",
    "open_run": "orchestrator.analysis.frame",
    "tidy_frame": "orchestrator.analysis.frame",
    "Analysis": "orchestrator.analysis.result",
    "analyse": "orchestrator.analysis.result",
    "analyse_run_data": "orchestrator.analysis.result",
    "BaselineRoles": "orchestrator.analysis.roles",
    "baseline_roles": "orchestrator.analysis.roles",
    "chain_length": "orchestrator.analysis.roles",
    "tree_shape": "orchestrator.analysis.roles",
}


__getattr__ = lazy_face(__name__, _LAZY)


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
