"""Where speculation stops paying: per (host, workload, speculative variant) of a closed-loop run with an
autoregressive baseline, the lowest measured concurrency at which none of the variant's configurations beats
autoregressive beyond noise, bracketed by the highest measured load below it where one still did (issue 39).

Made from the winners the analysis already decided (``analysis.best``: per load the winner, those tied with
it, those it beats, by the one significance rule of ``orchestrator/analysis/compare.py``) and the frame's
roles; nothing here computes a statistic. :func:`orchestrator.analysis.answer.answer_of` calls it once and the
answer carries the result (``Answer.break_even``), which ``report``, ``recommend --schedule`` and every
``--json`` render.

At a load the variant beats autoregressive when one of its configurations wins and autoregressive is among
those the winner beats; it does not when autoregressive wins or is tied with the winner; when another variant
wins the answer does not say (``not_judged``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = ["BreakEven", "break_even", "break_even_text", "frame_roles"]


@dataclass(frozen=True)
class BreakEven:
    """Where one speculative variant stops paying on one host and workload (see the module docstring)."""

    host: str
    workload: str
    variant: str
    load: int | None  # None: it beats autoregressive at every judged load (break-even not reached)
    last_win: int | None  # the highest measured load below ``load`` where it beat autoregressive (None: none)
    judged: list[int]  # the measured loads where the answer says whether it beats autoregressive
    not_judged: list[int]  # loads where another variant won: the answer does not say
    wins_again: list[int] = field(default_factory=list)  # judged loads above ``load`` where it beats AR again

    @property
    def bracket(self) -> list[int | None] | None:
        """``[last_win, load]``: the crossing lies in ``(last_win, load]`` (None: no crossing measured)."""
        return None if self.load is None else [self.last_win, self.load]

    @property
    def text(self) -> str:
        again = ""
        if self.wins_again:
            loads = ", ".join(f"C={c}" for c in self.wins_again)
            again = f"; but it beats autoregressive again at {loads}: the measurements give no single crossing"
        return self._text() + again

    def _text(self) -> str:
        where = f"{self.variant} on {self.host}" + (f" {self.workload}" if self.workload else "")
        if not self.judged:
            return f"{where}: not judged (another configuration won at every measured load)"
        if self.load is None:
            top = self.judged[-1]
            return f"{where}: beats autoregressive up to the highest judged load C={top}; break-even not reached"
        if self.last_win is None:
            return f"{where}: no win over autoregressive beyond noise at the lowest judged load C={self.load}"
        return (
            f"{where}: break-even at C={self.load} (beats autoregressive beyond noise at C={self.last_win}, "
            f"not at C={self.load}; the crossing lies in ({self.last_win}, {self.load}])"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **{k: getattr(self, k) for k in self.__dataclass_fields__},
            "bracket": self.bracket,
            "text": self.text,
        }


def frame_roles(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """label -> its command, role and whether it speculates, from the analysis frame (first row of each)."""
    out: dict[str, dict[str, Any]] = {}
    for raw in frame.to_dict("records"):
        row = {str(k): v for k, v in raw.items()}
        label = str(row.get("label"))
        if label in out:
            continue
        command = row.get("command")
        role = row.get("role")
        out[label] = {
            "command": command if isinstance(command, str) else None,
            "role": role if isinstance(role, str) else None,
            "speculative": row.get("speculative") is True or row.get("speculative") == 1,
        }
    return out


def break_even(points: Iterable[Any], loads: Iterable[Any], frame: pd.DataFrame) -> list[BreakEven]:
    """The break-even load of every speculative variant. ``points`` and ``loads`` are the answer's
    (``PointAnswer``: ``label variant host workload mode``; ``LoadAnswer``: ``host workload mode load winner
    tied beats``), ``frame`` the analysis frame they were made from (its roles)."""
    points, loads = list(points), list(loads)
    rows = frame_roles(frame)
    ar_labels = {lb for lb, r in rows.items() if r["role"] == "ar"}
    if not ar_labels:
        return []
    variant_of = {p.label: p.variant for p in points}
    out: list[BreakEven] = []
    keys = sorted({(p.host, p.workload) for p in points if p.mode == "concurrency"})
    for host, workload in keys:
        variants = sorted(
            {
                p.variant
                for p in points
                if (p.host, p.workload) == (host, workload)
                and p.mode == "concurrency"
                and rows.get(p.label, {}).get("speculative")
                and p.label not in ar_labels
            }
        )
        here = sorted(
            (lv for lv in loads if (lv.host, lv.workload) == (host, workload) and lv.mode == "concurrency"),
            key=lambda lv: lv.load,
        )
        for variant in variants:
            judged: list[int] = []
            not_judged: list[int] = []
            found: int | None = None
            last_win: int | None = None
            again: list[int] = []
            for lv in here:
                load = int(lv.load)
                ar_loses = any(a in lv.beats for a in ar_labels)
                ar_holds = lv.winner in ar_labels or any(a in lv.tied for a in ar_labels)
                if ar_holds:
                    wins = False
                elif ar_loses and variant_of.get(lv.winner) == variant:
                    wins = True
                else:
                    not_judged.append(load)
                    continue
                judged.append(load)
                if wins and found is None:
                    last_win = load
                elif wins:
                    again.append(load)
                elif found is None:
                    found = load
            out.append(BreakEven(host, workload, variant, found, last_win, judged, not_judged, again))
    return out


def break_even_text(items: Iterable[BreakEven]) -> str:
    return "".join(f"# break-even: {b.text}\n" for b in items)
