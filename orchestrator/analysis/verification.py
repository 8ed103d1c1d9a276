"""A deployed draft-length schedule against the best static configuration (issue 39, the verification stage).

A run that holds a configuration deployed with a batch-size schedule (a command whose ``--speculative-config``
has ``num_speculative_tokens_per_batch_size``: ``specsweep verify-schedule`` makes such a run, docs/schedule.md)
gets, per (host, workload, scheduled configuration), at each of its loads (closed-loop concurrencies and the
open-loop ramp, whose batch size moves through the ranges):

- whether the schedule ``beats``, ``ties`` or ``loses`` to the best static configuration measured beside it,
  read off the answer's winners (``orchestrator/analysis/compare.py`` ``best_per_load``, its one significance
  rule: the winner, those tied with it, those it beats beyond noise); nothing here computes a statistic;
- at each concurrency, the k the engine ran there by its own counters (``orchestrator/analysis/drafts.py``):
  draft tokens per draft against the schedule's k, so a schedule the engine ignored is caught (the
  ``schedule_ignored`` check says the same as a finding).

:func:`orchestrator.analysis.answer.answer_of` calls :func:`verdicts` once; the answer carries them
(``Answer.schedule_verdicts``) and ``report``, ``recommend``, ``verify-schedule`` and every ``--json`` render them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from orchestrator.analysis.drafts import KUsed, command_schedule, k_used

__all__ = ["LoadVerdict", "ScheduleVerdict", "verdict_text", "verdicts"]


@dataclass(frozen=True)
class LoadVerdict:
    """The schedule against the best static configuration at one load."""

    mode: str
    load: float
    load_label: str
    outcome: str  # beats | ties | loses | not_judged
    best_static: str | None
    winner: str
    runner_up: str | None
    margin: float | None  # the answer's: the winner over the runner-up
    margin_lo: float | None
    margin_hi: float | None
    k: KUsed | None = None  # closed-loop loads: the k the engine ran

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "k"}
        out["k"] = self.k.to_dict() if self.k is not None else None
        return out

    @property
    def text(self) -> str:
        pct = lambda v: "-" if v is None else f"{v * 100:+.1f}%"  # noqa: E731
        margin = ""
        if self.runner_up is not None and self.margin is not None:
            margin = (
                f" (winner {self.winner} over {self.runner_up}: {pct(self.margin)} "
                f"[{pct(self.margin_lo)} … {pct(self.margin_hi)}])"
            )
        words = {"beats": "beats", "ties": "ties with", "loses": "loses to", "not_judged": "is not judged against"}
        line = f"{self.load_label}: the schedule {words[self.outcome]} {self.best_static or 'the static ones'}{margin}"
        if self.k is not None:
            mark = {True: "ran", False: "NOT run", None: "cannot tell"}[self.k.ran]
            line += f"; scheduled k = {self.k.scheduled_k}, {mark}: {self.k.why}"
        return line


@dataclass(frozen=True)
class ScheduleVerdict:
    """One scheduled configuration's verdict on one host and workload."""

    host: str
    workload: str
    label: str
    num_speculative_tokens: int
    schedule: list[list[int]]
    loads: list[LoadVerdict] = field(default_factory=list)  # closed-loop concurrencies
    ramp: list[LoadVerdict] = field(default_factory=list)  # open-loop rates

    @property
    def ignored_at(self) -> list[int]:
        """The concurrencies where the engine's counters show it did not run the schedule."""
        return [int(v.load) for v in self.loads if v.k is not None and v.k.ran is False]

    def summary(self) -> str:
        parts = []
        for name, items in (("at", self.loads), ("over the ramp", self.ramp)):
            for outcome in ("beats", "ties", "loses", "not_judged"):
                where = [v.load_label for v in items if v.outcome == outcome]
                if where:
                    word = {"beats": "beats", "ties": "ties", "loses": "loses", "not_judged": "not judged"}[outcome]
                    parts.append(f"{word} {name} {', '.join(where)}")
        text = f"{self.label}: " + ("; ".join(parts) or "no load measured beside a static configuration")
        if self.ignored_at:
            text += "; the engine did not run the schedule at " + ", ".join(f"C={c}" for c in self.ignored_at)
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "workload": self.workload,
            "label": self.label,
            "num_speculative_tokens": self.num_speculative_tokens,
            "num_speculative_tokens_per_batch_size": self.schedule,
            "loads": [v.to_dict() for v in self.loads],
            "ramp": [v.to_dict() for v in self.ramp],
            "ignored_at": self.ignored_at,
            "summary": self.summary(),
        }


def _judge(lv: Any, schedule_label: str, statics: set[str]) -> tuple[str, str | None]:
    """(outcome, best static) at one load from the answer's winner, tied and beaten."""
    if lv.winner == schedule_label:
        tied = [t for t in lv.tied if t in statics]
        if tied:
            return "ties", tied[0]
        beaten = [b for b in lv.beats if b in statics]
        best = lv.runner_up if lv.runner_up in statics else (beaten[0] if beaten else None)
        return ("beats", best) if beaten else ("not_judged", None)
    if lv.winner in statics:
        if schedule_label in lv.tied:
            return "ties", lv.winner
        if schedule_label in lv.beats:
            return "loses", lv.winner
        return "not_judged", lv.winner
    return "not_judged", None


def verdicts(points: Iterable[Any], loads: Iterable[Any], frame: pd.DataFrame) -> list[ScheduleVerdict]:
    """Every scheduled configuration's verdict (see the module docstring); ``points`` and ``loads`` are the
    answer's, ``frame`` the point frame they were made from (commands, counters)."""
    points, loads = list(points), list(loads)
    if frame.empty or "command" not in frame.columns:
        return []
    # Most runs hold no schedule: tell so without making records of a wide frame (bench/scale.py).
    if not frame["command"].astype(str).str.contains("num_speculative_tokens_per_batch_size", regex=False).any():
        return []
    rows = [{str(k): v for k, v in r.items()} for r in frame.to_dict("records")]

    specs = {str(r["label"]): command_schedule(r.get("command")) for r in rows if isinstance(r.get("command"), str)}
    scheduled = {label: spec for label, spec in specs.items() if spec is not None}
    out: list[ScheduleVerdict] = []
    for label, spec in sorted(scheduled.items()):
        keys = sorted({(p.host, p.workload) for p in points if p.label == label})
        for host, workload in keys:
            here = [p for p in points if (p.host, p.workload) == (host, workload)]
            statics = {p.label for p in here if p.label not in scheduled}
            verdict = ScheduleVerdict(host, workload, label, spec[0], [list(e) for e in spec[1]])
            measured = {p.load_label for p in here if p.label == label}
            for lv in sorted(
                (lv for lv in loads if (lv.host, lv.workload) == (host, workload) and lv.load_label in measured),
                key=lambda lv: (lv.mode, lv.load),
            ):
                outcome, best = _judge(lv, label, statics)
                used = None
                if lv.mode == "concurrency":
                    row = next(
                        (
                            r
                            for r in rows
                            if r.get("label") == label
                            and r.get("host") == host
                            and str(r.get("workload") or "") == workload
                            and r.get("load_label") == lv.load_label
                        ),
                        None,
                    )
                    if row is not None and row.get("status") in ("ok", "degraded"):
                        used = k_used(row, int(lv.load), spec)
                item = LoadVerdict(
                    lv.mode,
                    lv.load,
                    lv.load_label,
                    outcome,
                    best,
                    lv.winner,
                    lv.runner_up,
                    lv.margin,
                    lv.margin_lo,
                    lv.margin_hi,
                    used,
                )
                (verdict.loads if lv.mode == "concurrency" else verdict.ramp).append(item)
            out.append(verdict)
    return out


def verdict_text(items: Iterable[ScheduleVerdict]) -> str:
    """The verdicts as a person reads them: a summary line, then a line per load."""
    lines: list[str] = []
    for v in items:
        where = f"{v.host}" + (f" {v.workload}" if v.workload else "")
        lines.append(f"# schedule {v.schedule} (num_speculative_tokens {v.num_speculative_tokens}) on {where}")
        lines.append(f"# verdict: {v.summary()}")
        lines += [f"  {lv.text}" for lv in [*v.loads, *v.ramp]]
    return "\n".join(lines) + ("\n" if lines else "")
