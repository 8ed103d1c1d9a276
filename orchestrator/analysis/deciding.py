"""Whether the winner at each load is decided, and what the sweep's extra rounds spent (``load.decide``).

The rule is the answer's own (:func:`orchestrator.analysis.compare.best_per_load` with the significance rule of
``checks.confidence``): a load is *decided* when the interval of winner / runner-up - 1 excludes zero, or when
only one configuration is ranked there. Otherwise the configurations still *in contention* are the winner, those
tied with it, and the runner-up when the rule could not judge it (no interval yet): the ones a further round
measures (the others are already beaten beyond noise, and more of their requests would change nothing).

:func:`load_states` applies it to the answer's table of winners; the sweep (``orchestrator/sweep/deciding.py``)
asks it after every round, and keeps what the rounds spent in the run directory's ``decide.json``;
:func:`decision_lines` turns both into the answer's one line per load: ``decided``, or ``budget ran out (N s of
extra rounds, M requests measured by the contenders; why)``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.analysis.result import Analysis

__all__ = [
    "DECIDE_FILE",
    "LoadState",
    "decision_lines",
    "decision_text",
    "decisions",
    "load_key",
    "load_states",
    "read_decide_log",
]

#: What the sweep's extra rounds did and spent (written by ``orchestrator/sweep/deciding.py``).
DECIDE_FILE = "decide.json"

#: (workload, mode, load) of one load, as the analysis frame holds it ("" for no named workload).
LoadKey = tuple[str, str, float]


def load_key(workload: Any, mode: Any, load: Any) -> LoadKey:
    return (str(workload or ""), str(mode), float(load))


@dataclass(frozen=True)
class LoadState:
    """One load, as the rule sees it after a round."""

    host: str
    key: LoadKey
    load_label: str
    winner: str
    decided: bool
    #: The labels a further round measures at this load (empty when decided).
    contenders: list[str] = field(default_factory=list)
    basis: str = ""


def _labels(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def load_states(best: pd.DataFrame) -> list[LoadState]:
    """Each load of the winners' table (``Analysis.best``), decided or not, with its contenders."""
    states = []
    for row in best.to_dict("records"):
        runner_up = row.get("runner_up")
        verdict = row.get("decided")
        decided = runner_up is None or (isinstance(runner_up, float) and math.isnan(runner_up)) or verdict is True
        contenders: list[str] = []
        if not decided:
            contenders = [str(row["label"]), *_labels(row.get("tied"))]
            if verdict is None and str(runner_up) not in contenders:
                contenders.append(str(runner_up))
        states.append(
            LoadState(
                host=str(row.get("host")),
                key=load_key(row.get("workload"), row.get("mode"), row.get("load")),
                load_label=str(row.get("load_label")),
                winner=str(row.get("label")),
                decided=bool(decided),
                contenders=list(dict.fromkeys(contenders)),
                basis=str(row.get("basis") or ""),
            )
        )
    return states


def read_decide_log(run_dir: str | Path) -> dict[str, Any] | None:
    """``decide.json`` of a run (None: the run had no ``load.decide``, or it is unreadable)."""
    try:
        data = json.loads((Path(run_dir) / DECIDE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _requests_spent(analysis: Analysis, key: LoadKey, labels: list[str]) -> int:
    """Requests sent at one load by ``labels`` (every window of each; all configurations when none named)."""
    frame = analysis.frame
    if frame.empty or "requests" not in frame.columns:
        return 0
    spent = 0
    for row in frame[frame["alias_of"].isna()].to_dict("records"):
        if load_key(row.get("workload"), row.get("mode"), row.get("load")) != key:
            continue
        if labels and str(row.get("label")) not in labels:
            continue
        value = row.get("requests")
        if isinstance(value, int | float) and not math.isnan(value):
            spent += int(value)
    return spent


def _windows(analysis: Analysis, key: LoadKey, labels: list[str]) -> dict[str, int]:
    """How many windows each of ``labels`` has at one load (its planned ones and the rounds')."""
    frame = analysis.frame
    out = dict.fromkeys(labels, 0)
    if frame.empty or "windows" not in frame.columns:
        return out
    for row in frame[frame["alias_of"].isna()].to_dict("records"):
        label = str(row.get("label"))
        if label in out and load_key(row.get("workload"), row.get("mode"), row.get("load")) == key:
            value = row.get("windows")
            if isinstance(value, int | float) and not math.isnan(value):
                out[label] += int(value)
    return out


def _planned_windows(analysis: Analysis) -> int:
    """The windows the plan measures of each point (``load.repeats`` x ``load.repeats_across_restarts``)."""
    experiment = getattr(getattr(analysis, "run", None), "experiment", None) or {}
    load = experiment.get("load") if isinstance(experiment, dict) else None
    load = load if isinstance(load, dict) else {}
    repeats, restarts = load.get("repeats") or 1, load.get("repeats_across_restarts") or 1
    return int(repeats) * int(restarts) if isinstance(repeats, int) and isinstance(restarts, int) else 1


def decisions(analysis: Analysis) -> list[dict[str, Any]]:
    """One entry per load of a run that ran with ``load.decide``: ``status`` ``decided``, ``budget`` (the budget
    ran out first) or ``stopped`` (the run ended before the rounds did), with the rounds, seconds and requests
    spent there; empty for a run without it."""
    log = read_decide_log(analysis.path)
    if log is None:
        return []
    kept_loads = log.get("loads")
    loads: dict[str, Any] = kept_loads if isinstance(kept_loads, dict) else {}
    out = []
    planned = _planned_windows(analysis)
    for state in load_states(analysis.best):
        kept = loads.get(state.load_label) or {}
        rounds = int(kept.get("rounds") or 0)
        windows = _windows(analysis, state.key, state.contenders)
        if state.decided:
            status = "decided"
        elif log.get("ended") == "budget":
            status = "budget"
        else:
            status = "stopped"
        out.append(
            {
                "host": state.host,
                "load": state.load_label,
                "status": status,
                "winner": state.winner,
                "contenders": state.contenders,
                "extra_rounds": rounds,
                "seconds": round(float(kept.get("seconds") or 0.0), 1),
                "requests": _requests_spent(analysis, state.key, state.contenders),
                "why": log.get("why") if status != "decided" else None,
                # each contender's windows there, and those the rounds never measured again (the plan's only):
                # a configuration can join the tie after the round that would have measured it
                "windows": windows,
                "not_remeasured": [label for label, n in windows.items() if rounds and n <= planned],
            }
        )
    return out


def decision_text(entry: dict[str, Any]) -> str:
    """One load of :func:`decisions` as the answer says it: ``C=1: decided after 2 extra rounds (linear)`` or
    ``C=4: budget ran out (41 s of extra rounds, 48 requests measured by the contenders; why); still tied: a (3
    windows), b (1 window); not measured again by the extra rounds (the plan's windows only): b`` (a
    configuration that joined the tie after the last round that measured the load)."""
    rounds = entry["extra_rounds"]
    after = f"after {rounds} extra round{'s' if rounds != 1 else ''}" if rounds else "in the planned round"
    if entry["status"] == "decided":
        return f"{entry['load']}: decided {after} ({entry['winner']})"
    spent = f"{entry['seconds']:g} s of extra rounds, {entry['requests']} requests measured by the contenders"
    what = "budget ran out" if entry["status"] == "budget" else "not decided (the run ended before its rounds)"
    why = entry["why"] or "no reason kept"
    windows = entry.get("windows") or {}
    tied = ", ".join(
        f"{label} ({_count(windows[label])})" if label in windows else label for label in entry["contenders"]
    )
    text = f"{entry['load']}: {what} ({spent}; {why}); still tied: {tied}"
    left = entry.get("not_remeasured") or []
    if left:
        text += f"; not measured again by the extra rounds (the plan's windows only): {', '.join(left)}"
    return text


def _count(windows: int) -> str:
    return f"{windows} window{'s' if windows != 1 else ''}"


def decision_lines(entries: list[dict[str, Any]], run_dir: str | Path) -> list[str]:
    """The answer's line per load of a run with ``load.decide`` (``entries``: ``Answer.decisions``, made by
    :func:`decisions`; ``run_dir`` for the budget ``decide.json`` names): decided, or why not, with what was
    spent."""
    if not entries:
        return []
    log = read_decide_log(run_dir) or {}
    return [f"decide (load.decide; {log.get('budget') or 'budget unknown'}):"] + [
        "  " + decision_text(entry) for entry in entries
    ]
