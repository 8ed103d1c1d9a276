"""A draft-length schedule from a sweep: per measured concurrency the draft length k to run, and vLLM's
``num_speculative_tokens_per_batch_size`` made of it (issue 39, first part; docs/schedule.md).

Made from the run's answer alone (:func:`orchestrator.analysis.answer.answer`: per load the winner, those tied
with it, those it beats, the margin over the runner-up and its interval); nothing here computes a statistic.

The rule (:mod:`orchestrator.analysis.schedule_fit`), over one speculative variant whose configurations
differ in k alone, per measured load of a closed-loop (concurrency) sweep: the k of the variant's measured
configurations that fits the measured figures best while never growing with the load (an isotonic fit,
weighted by how precisely each load was measured). k = 0 is a configuration of the variant only where the
sweep measured one (a speculative server drafting nothing is not the autoregressive server); the autoregressive
baseline is a static configuration of its own. The schedule is recommended only where it is expected to beat
the best static configuration, its total's interval over that one's excluding zero; otherwise that
configuration is, when it is told apart from autoregressive, else nothing is (measure longer), and the schedule
is shown for reference. The run's contamination (``Answer.contamination``) is repeated with it.

Ranges: consecutive measured loads with the same k form one range. The first starts at 1 (vLLM requires it:
``vllm/v1/spec_decode/dynamic/utils.py`` lines 67-72). Where the chosen k changes between two measured loads
``a < b``, the change lies somewhere in ``(a, b]``, the measurements bracket it and say no more; the boundary
is put at ``a + 1``: a closed-loop point at ``C = b`` runs batches of up to ``b`` (fewer while requests start and
end), all of which ran ``b``'s k when it was measured, while the point at ``a`` never ran a batch above ``a``.
The last range runs to the engine's maximum batch size (vLLM carries
the last k on up to ``max_num_seqs`` anyway: ``utils.py`` lines 140-146). Ranges are inclusive at both ends
(``utils.py`` lines 12-14; ``vllm/config/speculative.py`` lines 524-529) and k = 0 is allowed (``utils.py``
lines 52-55).
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.analysis.breakeven import frame_roles
from orchestrator.analysis.intervals import Difference
from orchestrator.analysis.roles import chain_length, speculative_configs
from orchestrator.analysis.schedule_fit import Measured, fit_schedule
from orchestrator.engines.registry import get_engine
from orchestrator.errors import ConfigError, SpecsweepError

if TYPE_CHECKING:
    from orchestrator.analysis.answer import Answer, LoadAnswer

__all__ = [
    "LoadChoice",
    "Range",
    "Schedule",
    "ScheduleError",
    "flag_text",
    "schedule",
    "schedule_text",
    "vllm_speculative_config",
]

#: vLLM's default ``max_num_seqs`` (``vllm/config/scheduler.py`` line 43, 0.33.0): the end of the last range
#: when the command does not set ``--max-num-seqs``.
VLLM_DEFAULT_MAX_NUM_SEQS = 128

_MAX_NUM_SEQS = re.compile(r"--max[-_]num[-_]seqs(?:=|\s+)(\d+)")
_SIM_ENGINE = re.compile(r"--engine(?:=|\s+)(\w+)")


def no_schedule(engine: str) -> str | None:
    """Why ``engine`` takes no draft length per batch size, so the recommendation stays per load (the engine's
    own ``no_batch_schedule``, through the registry; docs/schedule.md has the engine source lines); None when
    it takes one, or when no engine of that name is installed here (the schedule is written as vLLM's)."""
    try:
        return get_engine(engine).no_batch_schedule
    except ConfigError:
        return None


class ScheduleError(SpecsweepError):
    """The run cannot give a schedule (what is missing, and where)."""


@dataclass(frozen=True)
class LoadChoice:
    """The k chosen at one measured load, and why."""

    load: int
    load_label: str
    k: int
    label: str  # the configuration chosen
    winner: str
    tied: list[str]
    beats_ar: bool | None  # True: the winner beats autoregressive beyond noise; None: no AR at this load
    runner_up: str | None
    margin: float | None
    margin_lo: float | None
    margin_hi: float | None
    decided: bool | None
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Range:
    """One inclusive batch-size range ``[start, end]`` run with ``k`` drafts, and the loads that chose it."""

    start: int
    end: int
    k: int
    evidence: list[LoadChoice]

    @property
    def entry(self) -> list[int]:
        return [self.start, self.end, self.k]

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "k": self.k,
            "measured_loads": [c.load for c in self.evidence],
            "evidence": [c.to_dict() for c in self.evidence],
        }


@dataclass
class Schedule:
    """A schedule for one (host, workload, variant)."""

    host: str
    workload: str
    variant: str
    ar: str | None  # the autoregressive baseline (a static configuration), None when the run has none
    metric: str
    max_batch_size: int
    ranges: list[Range]
    base_config: dict[str, Any] | None = None  # the variant's --speculative-config, when its command has one
    notes: list[str] = field(default_factory=list)
    engine: str = "vllm"  # whose dialect the run spoke (the simulator's --engine for a simulator run)
    #: "schedule"; "static": run ``static`` at every batch size instead; "none": nothing is told apart from
    #: autoregressive at these loads, measure longer (schedule_fit.py)
    recommend: str = "schedule"
    static: str | None = None  # the best static configuration (schedule_fit.py)
    why: str = ""  # why the recommendation is what it is
    scores: dict[str, float] = field(default_factory=dict)  # the schedule's and each static one's weighted total
    gain: Difference | None = None  # the schedule's total over the best static one's, with its interval
    reference: str | None = None  # what the best static configuration is told apart from
    static_gain: Difference | None = None  # the best static configuration's total over the reference's
    #: The run's contamination (the answer's findings that taint every figure: ``Answer.contamination``).
    contamination: list[str] = field(default_factory=list)

    @property
    def unsupported(self) -> str | None:
        """Why the engine cannot run this schedule (None: it can)."""
        return no_schedule(self.engine)

    @property
    def entries(self) -> list[list[int]]:
        """``num_speculative_tokens_per_batch_size``."""
        return [r.entry for r in self.ranges]

    @property
    def speculates(self) -> bool:
        return any(r.k > 0 for r in self.ranges)

    @property
    def constant(self) -> bool:
        """One configuration at every measured load: no schedule, a static configuration."""
        return len({c.label for r in self.ranges for c in r.evidence}) <= 1

    def recommendation_text(self) -> str:
        if self.recommend == "static":
            return f"run {self.static} at every batch size (a static configuration), not a schedule: {self.why}"
        if self.recommend == "none":
            return f"nothing to deploy yet: {self.why}"
        return f"the schedule: {self.why}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "workload": self.workload,
            "variant": self.variant,
            "autoregressive": self.ar,
            "metric": self.metric,
            "max_batch_size": self.max_batch_size,
            "engine": self.engine,
            "engine_takes_schedule": self.unsupported is None,
            "why_per_load": self.unsupported,
            "num_speculative_tokens_per_batch_size": self.entries,
            "speculative_config": vllm_speculative_config(self) if self.unsupported is None else None,
            "flag": flag_text(self),
            "ranges": [r.to_dict() for r in self.ranges],
            "notes": list(self.notes),
            "recommendation": {
                "kind": self.recommend,
                "configuration": {"static": self.static, "schedule": "schedule"}.get(self.recommend),
                "best_static": self.static,
                "why": self.why,
                "text": self.recommendation_text(),
                "scores": dict(self.scores),
                "schedule_over_best_static": _gain_dict(self.gain),
                "reference": self.reference,
                "best_static_over_reference": _gain_dict(self.static_gain),
            },
            "contamination": list(self.contamination),
        }


def _gain_dict(gain: Difference | None) -> dict[str, Any] | None:
    if gain is None:
        return None
    return {
        "relative": gain.relative,
        "lo": gain.lo,
        "hi": gain.hi,
        "level": gain.level,
        "significant": gain.significant,
    }


def vllm_speculative_config(sched: Schedule) -> dict[str, Any] | None:
    """The ``--speculative-config`` object that runs ``sched`` (None: run without speculation).

    ``num_speculative_tokens`` is the largest k of the schedule: vLLM caps each range's k at it
    (``utils.py`` lines 113-126) and refuses 0 with a schedule (lines 91-92), so a schedule of k = 0 everywhere is
    no speculative configuration at all."""
    if not sched.speculates:
        return None
    base = dict(sched.base_config or {})
    base["num_speculative_tokens"] = max(r.k for r in sched.ranges)
    base["num_speculative_tokens_per_batch_size"] = sched.entries
    return base


def flag_text(sched: Schedule) -> str | None:
    """The engine's own flag text that runs ``sched`` (None where the engine takes no schedule)."""
    if sched.unsupported is not None:
        return None
    config = vllm_speculative_config(sched)
    if config is None:
        return "(no --speculative-config: run autoregressive at every batch size)"
    return "--speculative-config '" + json.dumps(config, separators=(", ", ": ")) + "'"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.1f}%"


def schedule_text(sched: Schedule) -> str:
    """The schedule as a person reads it: the flag, then each range with its evidence, then the notes."""
    where = f"{sched.host}" + (f" {sched.workload}" if sched.workload else "")
    lines = [f"# draft-length schedule of variant {sched.variant} on {where} ({sched.metric})"]
    lines.append(f"# recommended: {sched.recommendation_text()}")
    lines += [f"# contaminated: {c}" for c in sched.contamination]
    if sched.unsupported is not None:
        lines.append(f"# the recommendation stays per load on {sched.engine}: {sched.unsupported}")
    elif sched.recommend != "schedule":
        lines.append(f"# the fitted schedule, for reference: {flag_text(sched) or ''}")
    else:
        lines.append(flag_text(sched) or "")
        if sched.base_config is None and sched.speculates:
            lines.append("# the variant's command has no --speculative-config: add its method (and model) to the JSON")
    for r in sched.ranges:
        lines.append(f"batch sizes {r.start}..{r.end}: k = {r.k}")
        for c in r.evidence:
            margin = ""
            if c.runner_up is not None:
                margin = (
                    f"; winner {c.winner} over runner-up {c.runner_up}: {_pct(c.margin)} "
                    f"[{_pct(c.margin_lo)} … {_pct(c.margin_hi)}]"
                )
            tied = f"; tied: {', '.join(c.tied)}" if c.tied else ""
            lines.append(f"  measured at {c.load_label}: {c.label} ({c.why}){margin}{tied}")
    lines += [f"# {n}" for n in sched.notes]
    return "\n".join(lines) + "\n"


def _engine(ans: Answer, command: str | None) -> str:
    engine = str((getattr(getattr(ans.analysis, "run", None), "experiment", None) or {}).get("engine") or "")
    if engine == "sim":
        found = _SIM_ENGINE.search(command or "")
        return found.group(1) if found else "sglang"  # orchestrator/sim/config.py: --engine defaults to sglang
    return engine or "vllm"


def _base_config(command: str | None) -> dict[str, Any] | None:
    return next(speculative_configs(command), None)


def schedule(
    ans: Answer,
    *,
    variant: str | None = None,
    host: str | None = None,
    workload: str | None = None,
    max_batch_size: int | None = None,
) -> Schedule:
    """The schedule of ``variant`` (default: the one speculative variant of the run whose k varies) on one
    host and workload (default: the only one). Raises :class:`ScheduleError` naming what is missing."""
    frame_rows = frame_roles(ans.analysis.frame)
    points = [p for p in ans.points if p.mode == "concurrency"]
    if not points:
        raise ScheduleError(f"{ans.path}: no closed-loop (concurrency) point; a batch-size schedule needs loads C=N")
    hosts = sorted({p.host for p in points})
    workloads = sorted({p.workload for p in points})
    host = host or (hosts[0] if len(hosts) == 1 else None)
    workload = workload if workload is not None else (workloads[0] if len(workloads) == 1 else None)
    if host is None or host not in hosts:
        raise ScheduleError(f"{ans.path}: pick a host, one of {', '.join(hosts)}")
    if workload is None or workload not in workloads:
        raise ScheduleError(f"{ans.path}: pick a workload, one of {', '.join(w or '(default)' for w in workloads)}")
    points = [p for p in points if p.host == host and p.workload == workload]

    ar_labels = {p.label for p in points if frame_rows.get(p.label, {}).get("role") == "ar"}
    ar = sorted(ar_labels)[0] if ar_labels else None

    k_of: dict[str, int] = {}
    by_variant: dict[str, dict[str, Any]] = {}
    for p in points:
        if p.baseline:
            continue
        k = chain_length(p.params, frame_rows.get(p.label, {}).get("command"))
        if k is None:
            continue
        k_of[p.label] = k
        by_variant.setdefault(p.variant, {})[p.label] = p
    varying = sorted(v for v, labels in by_variant.items() if len({k_of[lb] for lb in labels}) > 1)
    if variant is None:
        if len(varying) != 1:
            found = ", ".join(varying) or "none"
            fixed = ", ".join(f"{v} (k={sorted({k_of[lb] for lb in by_variant[v]})[0]})" for v in sorted(by_variant))
            raise ScheduleError(
                f"{ans.path}: a schedule is made over one variant whose draft length varies; found {found}"
                + (
                    ": pick one with --variant"
                    if varying
                    else (f" ({fixed}: one draft length each)" if fixed else "")
                    + "; sweep a matrix over the draft length (sweeps/vllm-cpu.yaml does, k = 1, 2, 4) and "
                    "recommend --schedule that run"
                )
            )
        variant = varying[0]
    if variant not in by_variant:
        raise ScheduleError(
            f"{ans.path}: variant {variant!r} has no speculative configuration with a draft length "
            f"(known: {', '.join(sorted(by_variant)) or 'none'})"
        )
    labels = by_variant[variant]
    seen_k: dict[int, str] = {}
    for label in sorted(labels):
        k = k_of[label]
        if k in seen_k:
            raise ScheduleError(
                f"{ans.path}: variant {variant!r} has two configurations with k = {k} ({seen_k[k]}, {label}); "
                "a schedule changes k alone, so the variant's matrix must vary k alone"
            )
        seen_k[k] = label
    candidates = {label: k_of[label] for label in labels}

    command = next((frame_rows[lb]["command"] for lb in sorted(labels) if frame_rows.get(lb, {}).get("command")), None)
    base = _base_config(command)
    if base is not None:
        base.pop("num_speculative_tokens_per_batch_size", None)
    if max_batch_size is None:
        found_seqs = _MAX_NUM_SEQS.search(command or "")
        max_batch_size = int(found_seqs.group(1)) if found_seqs else VLLM_DEFAULT_MAX_NUM_SEQS

    loads = sorted(
        (lv for lv in ans.loads if lv.host == host and lv.workload == workload and lv.mode == "concurrency"),
        key=lambda lv: lv.load,
    )
    values = {
        (int(p.load), p.label): Measured(f.value, f.lo, f.hi, f.se)
        for p in points
        if (f := p.figures.get(ans.metric)) is not None and (p.label in candidates or p.label == ar)
    }
    notes: list[str] = []
    measured = [lv for lv in loads if any((int(lv.load), label) in values for label in candidates)]
    for lv in loads:
        if lv not in measured:
            notes.append(f"{lv.load_label}: no configuration of variant {variant!r} measured there; left out")
    by_load = {int(lv.load): lv for lv in measured}

    def beats(load: int, a: str, b: str) -> bool:
        lv = by_load[load]
        return lv.winner == a and b in lv.beats

    statics = sorted(candidates) + ([ar] if ar is not None else [])
    level = float(getattr(getattr(ans.analysis, "settings", None), "confidence", 0.95))
    fit = fit_schedule(list(by_load), candidates, statics, values, beats, ar=ar, level=level)
    choices = [
        _choice(by_load[load], pick, best, candidates, ar, values)
        for load, pick, best in zip(fit.loads, fit.picks, fit.best_here, strict=True)
    ]
    for load, pick in zip(fit.loads, fit.picks, strict=True):
        other = max(statics, key=lambda lb: values[(load, lb)].value if (load, lb) in values else 0.0)
        if (
            other not in candidates
            and (load, other) in values
            and values[(load, other)].value > values[(load, pick)].value
        ):
            noise = "beyond noise" if beats(load, other, pick) else "within noise"
            notes.append(
                f"{by_load[load].load_label}: {other} measured "
                f"{(values[(load, other)].value / values[(load, pick)].value - 1) * 100:+.1f}% over the schedule's "
                f"{pick} ({noise}); a range the variant did not measure (k = 0 in this server) cannot run it"
            )
    if not choices:
        raise ScheduleError(f"{ans.path}: no measured load of variant {variant!r} to make a schedule from")
    if choices[-1].load > max_batch_size:
        raise ScheduleError(
            f"{ans.path}: the largest measured load C={choices[-1].load} is above the maximum batch size "
            f"{max_batch_size}; pass a larger one"
        )

    groups: list[list[LoadChoice]] = []
    for c in choices:
        if groups and groups[-1][-1].k == c.k:
            groups[-1].append(c)
        else:
            groups.append([c])
    ranges: list[Range] = []
    for i, group in enumerate(groups):
        start = 1 if i == 0 else groups[i - 1][-1].load + 1
        end = group[-1].load if i + 1 < len(groups) else max_batch_size
        ranges.append(Range(start=start, end=end, k=group[0].k, evidence=group))
    for a, b in itertools.pairwise(groups):
        notes.append(
            f"k changes from {a[-1].k} to {b[0].k} between the measured loads C={a[-1].load} and C={b[0].load}: "
            f"the boundary is placed at C={a[-1].load + 1} (the change lies in ({a[-1].load}, {b[0].load}], not "
            f"measured; a point at C={b[0].load} runs batches of up to {b[0].load}, so its k from C={a[-1].load + 1})"
        )
    if ranges[0].evidence[0].load > 1:
        below = ranges[0].evidence[0].load - 1
        notes.append(f"batch sizes 1..{below} were not measured; they take the k of the lowest load")
    if ranges[-1].end > choices[-1].load:
        notes.append(
            f"batch sizes {choices[-1].load + 1}..{ranges[-1].end} were not measured; "
            "they take the k of the highest load"
        )
    return Schedule(
        host=host,
        workload=workload,
        variant=variant,
        ar=ar,
        metric=ans.metric,
        max_batch_size=max_batch_size,
        ranges=ranges,
        base_config=base,
        notes=notes,
        engine=_engine(ans, command),
        recommend=fit.recommend,
        static=fit.static,
        why=fit.why,
        scores={"schedule": fit.score, **fit.scores},
        gain=fit.gain,
        reference=fit.reference,
        static_gain=fit.static_gain,
        contamination=ans.contamination,
    )


def _choice(
    lv: LoadAnswer, label: str, best: str, k_of: dict[str, int], ar: str | None, values: dict[tuple[int, str], Measured]
) -> LoadChoice:
    """The k the fit chose at one load, and why."""
    if ar is None or ar not in {lv.winner, *lv.tied, *lv.beats}:
        beats_ar: bool | None = None
    else:
        beats_ar = lv.winner != ar and ar in lv.beats
    mine, theirs = values.get((int(lv.load), label)), values.get((int(lv.load), best))
    if mine is None or theirs is None:
        why = "not measured at this load; the neighbouring loads' k carried (k may only fall as the batch grows)"
    elif label == best:
        why = "the best figure of the variant at this load"
        why += " (beats autoregressive beyond noise)" if beats_ar else ""
    else:
        here, top = mine.value, theirs.value
        why = (
            f"the non-increasing fit ({best} measured {(top / here - 1) * 100:+.1f}% here, but k may only fall "
            "as the batch grows)"
        )
    return LoadChoice(
        load=int(lv.load),
        load_label=lv.load_label,
        k=k_of[label],
        label=label,
        winner=lv.winner,
        tied=list(lv.tied),
        beats_ar=beats_ar,
        runner_up=lv.runner_up,
        margin=lv.margin,
        margin_lo=lv.margin_lo,
        margin_hi=lv.margin_hi,
        decided=lv.decided,
        why=why,
    )
