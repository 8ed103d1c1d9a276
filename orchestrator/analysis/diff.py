"""What changed between two runs of the same experiment: per point, figure by figure, and in the findings.

Points are matched on (host, configuration label, mode, load), not on point ids, so a run whose load settings
changed (new ids) still lines up with the old one. ``change`` is the relative change b / a - 1; a point has
*changed* when its status differs or any compared figure moved by at least ``threshold`` (5% by default);
``changed_figures`` names the figures that did, so a reader sees *what* changed (often a latency, while the
throughput moved by less than 1%). Latencies are compared too, where lower is better, so read their sign
accordingly. Where both runs give a figure its interval (``<figure>_se``), a move counts only when it is
also significant: the interval of the relative change excludes zero (``<figure>_significant``, the change's
``<figure>_change_lo``/``_hi``); a 6% move inside the noise of either run is not a change. ``compare_runs`` warns
(``notes``) when the runs' provenance differs: specsweep, the experiment file, the engine, the GPUs, the command
running on the host (``orchestrator/runs/provenance.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from orchestrator.analysis.checks import Finding
from orchestrator.analysis.intervals import difference
from orchestrator.analysis.result import Analysis

__all__ = ["DIFF_FIGURES", "FIGURE_NAMES", "RunComparison", "compare_frames", "compare_runs"]

DIFF_KEYS = ["host", "workload", "label", "mode", "load"]
DIFF_FIGURES = [
    "output_tok_s",
    "per_user_tok_s",
    "accept_len",
    "speedup_vs_ar",
    "speedup_vs_linear",
    "ttft_ms_p50",
    "itl_ms_p50",
]
#: How each compared figure is named to a reader (tables, the ``changed`` column).
FIGURE_NAMES = {
    "output_tok_s": "tok/s",
    "per_user_tok_s": "user tok/s",
    "accept_len": "accept len",
    "speedup_vs_ar": "×AR",
    "speedup_vs_linear": "×linear",
    "ttft_ms_p50": "TTFT p50 ms",
    "itl_ms_p50": "ITL p50 ms",
}


@dataclass
class RunComparison:
    """Run A against run B. ``table`` has one row per point of either run."""

    run_a: str
    run_b: str
    experiment_a: str
    experiment_b: str
    table: pd.DataFrame
    threshold: float
    findings_new: list[Finding] = field(default_factory=list)
    findings_gone: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> pd.DataFrame:
        return self.table[self.table["changed"]]

    def figure_counts(self) -> dict[str, int]:
        """How many points changed by at least the threshold in each figure (most first), and in status."""
        counts: dict[str, int] = {}
        for figures in self.changed["changed_figures"]:
            for figure in figures:
                counts[figure] = counts.get(figure, 0) + 1
        both = self.table["presence"] == "both"
        status = int(((self.table["status_a"] != self.table["status_b"]) & both).sum())
        if status:
            counts["status"] = status
        return dict(sorted(counts.items(), key=lambda kv: -kv[1]))

    @property
    def only_in_a(self) -> pd.DataFrame:
        return self.table[self.table["presence"] == "only_a"]

    @property
    def only_in_b(self) -> pd.DataFrame:
        return self.table[self.table["presence"] == "only_b"]


def compare_frames(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    threshold: float = 0.05,
    figures: list[str] | None = None,
    level: float = 0.95,
) -> pd.DataFrame:
    """Pure arithmetic on two analysed frames: ``<fig>_a``, ``<fig>_b``, ``<fig>_delta`` (b - a) and
    ``<fig>_change`` (b / a - 1) per figure, ``status_a``/``status_b``, ``presence`` (both/only_a/only_b),
    ``changed`` and ``changed_figures`` (the figures that moved by at least ``threshold``, in ``figures``
    order). ``level``: the confidence of the change's interval (run B's ``checks.confidence``, the level of its
    answer)."""
    figures = figures or DIFF_FIGURES

    def pick(frame: pd.DataFrame) -> pd.DataFrame:
        measured = frame[frame["alias_of"].isna()] if "alias_of" in frame.columns else frame
        if "workload" not in measured.columns:
            measured = measured.assign(workload="")
        columns = DIFF_KEYS + ["load_label", "status"] + [f for f in figures if f in measured.columns]
        columns += [f"{f}_se" for f in figures if f"{f}_se" in measured.columns]
        picked = measured[columns].drop_duplicates(DIFF_KEYS, keep="last").copy()
        for fig in figures:
            for column in (fig, f"{fig}_se"):
                if column not in picked.columns:
                    picked[column] = float("nan")
                picked[column] = pd.to_numeric(picked[column], errors="coerce")
        return picked

    merged = pick(a).merge(pick(b), on=DIFF_KEYS, how="outer", suffixes=("_a", "_b"), indicator=True)
    merged["presence"] = merged["_merge"].map({"both": "both", "left_only": "only_a", "right_only": "only_b"})
    merged["load_label"] = merged["load_label_a"].fillna(merged["load_label_b"])
    changed = merged["presence"] != "both"
    changed |= (merged["status_a"] != merged["status_b"]) & (merged["presence"] == "both")
    ordered = [*DIFF_KEYS, "load_label", "presence", "status_a", "status_b"]
    moved: list[list[str]] = [[] for _ in range(len(merged))]
    for fig in figures:
        left, right = merged[f"{fig}_a"], merged[f"{fig}_b"]
        merged[f"{fig}_delta"] = right - left
        merged[f"{fig}_change"] = (right / left - 1).where(left != 0)
        lows, highs, significant = [], [], []
        for value_b, se_b, value_a, se_a in zip(right, merged[f"{fig}_se_b"], left, merged[f"{fig}_se_a"], strict=True):
            diff = difference(value_b, se_b, value_a, se_a, level=level)
            lows.append(diff.lo if diff is not None and diff.lo is not None else float("nan"))
            highs.append(diff.hi if diff is not None and diff.hi is not None else float("nan"))
            significant.append(diff.significant if diff is not None else None)
        merged[f"{fig}_change_lo"] = lows
        merged[f"{fig}_change_hi"] = highs
        merged[f"{fig}_significant"] = pd.Series(significant, index=merged.index, dtype=object)
        over = (merged[f"{fig}_change"].abs().fillna(0) >= threshold) & (
            merged[f"{fig}_significant"].map(lambda v: v is not False)
        )
        changed |= over
        for position, flag in enumerate(over):
            if flag:
                moved[position].append(fig)
        ordered += [
            f"{fig}_a",
            f"{fig}_b",
            f"{fig}_delta",
            f"{fig}_change",
            f"{fig}_change_lo",
            f"{fig}_change_hi",
            f"{fig}_significant",
        ]
    merged["changed"] = changed.astype(bool)
    merged["changed_figures"] = pd.Series(moved, index=merged.index, dtype=object)
    merged = merged[[*ordered, "changed", "changed_figures"]]
    # Configurations in the order the runs measured them (baselines first), loads ascending.
    order = {label: i for i, label in enumerate(dict.fromkeys([*a["label"], *b["label"]]))}
    merged = merged.assign(_order=merged["label"].map(order))
    merged = merged.sort_values(["host", "_order", "mode", "load"], kind="stable").drop(columns="_order")
    return merged.reset_index(drop=True)


def _finding_key(finding: Finding) -> tuple[str, str | None, str | None, str | None, str]:
    return (finding.check, finding.host, finding.config, finding.load, finding.severity)


def compare_runs(a: Analysis, b: Analysis, *, threshold: float = 0.05) -> RunComparison:
    """Run B against run A (A is the reference); a run without records is refused (a StoreError)."""
    from orchestrator.runs.identity import require_points

    for run in (a, b):
        if run.frame.empty:
            require_points(run.path, "compare")
    notes: list[str] = []
    if a.experiment_name != b.experiment_name:
        notes.append(
            f"different experiments ({a.experiment_name} and {b.experiment_name}): only points with the same "
            "host, configuration and load are compared"
        )
    if a.metric != b.metric:
        notes.append(f"throughput measured as {a.metric} in A and {b.metric} in B")
    hosts_a, hosts_b = set(a.frame["host"]), set(b.frame["host"])
    if hosts_a != hosts_b:
        notes.append(f"hosts differ: A ran on {sorted(hosts_a)}, B on {sorted(hosts_b)}")
    from orchestrator.runs.provenance import provenance_differences

    notes += [f"provenance differs: {line}" for line in provenance_differences(a.run.provenance, b.run.provenance)]
    table = compare_frames(a.frame, b.frame, threshold=threshold, level=b.settings.confidence)
    keys_a = {_finding_key(f) for f in a.findings}
    keys_b = {_finding_key(f) for f in b.findings}
    return RunComparison(
        run_a=a.run_id,
        run_b=b.run_id,
        experiment_a=a.experiment_name,
        experiment_b=b.experiment_name,
        table=table,
        threshold=threshold,
        findings_new=[f for f in b.findings if _finding_key(f) not in keys_a],
        findings_gone=[f for f in a.findings if _finding_key(f) not in keys_b],
        notes=notes,
    )
