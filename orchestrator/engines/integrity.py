"""Whether a window is whole, and how exact each of its figures is: the words every source uses to say so.

A figure comes only from a whole window, computed as the engine computes it (docs/engines.md, "Whole windows").
Each source of a record's server figures (the log window, two ``/metrics`` scrapes, the responses) carries

``integrity``
    ``{"whole": bool, "reasons": [{"reason": NAME, "detail": TEXT}], "part": PART | None}``: ``whole`` is False
    when anything inside the window breaks what the figures assume, each reason one of :data:`REASONS`;
    ``part`` names the part the figures still come from (``"since_restart"``: the last process's lines only),
    None when the figures cover the whole window (or there are none).
``exactness``
    ``{figure: {"kind": KIND, "resolution": float | None, "bounds": [low, high] | None, "note": TEXT}}`` for
    every figure the source gives, ``kind`` one of :data:`KINDS`.

:class:`Integrity` and :func:`exactness` build these; nothing here reads a log or a scrape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["KINDS", "REASONS", "Integrity", "exactness"]

Kind = Literal["exact", "rounded", "gauge", "bounded"]

#: What a figure's ``exactness.kind`` says.
KINDS: dict[str, str] = {
    "exact": "from integer counts over exactly the window, by the engine's own formula",
    "rounded": "from values the engine printed or exported rounded; 'resolution' is the rounding step",
    "gauge": "the engine's last-interval gauge at the end of the window, not a figure of the whole window",
    "bounded": "the source does not hold what the engine's denominator needs: 'bounds' hold the true value",
}

#: Why a window is not whole.
REASONS: dict[str, str] = {
    "restart": "the server process started again inside the window (two process starts)",
    "counter_reset": "a counter went down between the scrapes (the server restarted, or the counter was reset)",
    "cut_pair": "a line that belongs with another one lost its partner at the window's edge",
    "missing_intervals": "the log does not show every interval of the window (some are logged below its level)",
    "inconsistent": "the source's figures contradict each other",
    "lost_lines": "the log says it dropped lines inside the window (journald's rate limit, a full journal, syslog)",
    "open_interval": "the window ended before the engine logged its last stats interval (the log is short by it)",
    "duplicate_series": "a scrape holds one series twice (the same name and labels): which value counts is not known",
    "non_finite": "a counter's value is NaN or infinite in a scrape: no difference can be taken over it",
    "unlogged_requests": "a request the engine counted ended without its figures in the log (cancelled in flight)",
}


@dataclass
class Integrity:
    """A source's verdict on its window (module docstring)."""

    reasons: list[dict[str, str]] = field(default_factory=list)
    part: str | None = None

    @property
    def whole(self) -> bool:
        return not self.reasons

    def broken(self, reason: str, detail: str) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown integrity reason {reason!r}")
        entry = {"reason": reason, "detail": detail}
        if entry not in self.reasons:
            self.reasons.append(entry)

    def names(self) -> list[str]:
        return [r["reason"] for r in self.reasons]

    def describe(self) -> str | None:
        """One line for a warning, or None when the window is whole."""
        if self.whole:
            return None
        what = "; ".join(f"{r['reason']}: {r['detail']}" for r in self.reasons)
        where = f" (figures from the {self.part.replace('_', ' ')} part only)" if self.part else " (no figures)"
        return f"window not whole: {what}{where}"

    def to_dict(self) -> dict[str, Any]:
        return {"whole": self.whole, "reasons": [dict(r) for r in self.reasons], "part": self.part}


def exactness(
    kind: Kind,
    note: str,
    *,
    resolution: float | None = None,
    bounds: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """One figure's ``exactness`` entry (module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"unknown exactness kind {kind!r}")
    return {
        "kind": kind,
        "resolution": resolution,
        "bounds": list(bounds) if bounds is not None else None,
        "note": note,
    }
