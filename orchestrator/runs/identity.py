"""What a run is made of, as a run directory keeps it: the resolved experiment, its file, and its hosts; and
what kind of run it is, what it measured, and (a playbook's) its verdict.

Resuming (``orchestrator.sweep.resume``), reusing baselines (``orchestrator.sweep.baselines``) and opening a run
(``orchestrator.sweep.opening``) all compare a stored run with the current experiment in these terms, so they live
here, below all three: this module imports none of them (and the experiment model only for its types).

A run's kind (:data:`RUN_KINDS`): ``sweep`` (``specsweep sweep`` over a plan's grid), ``search`` (``specsweep
sweep`` of an experiment with ``search:``: the strategy chose the points) or ``playbook`` (``specsweep
playbook``). ``run.json`` keeps it as ``kind``; a run made before it did is known by its files
(:func:`run_kind`). ``latest`` and ``specsweep ls`` mean the sweeps and searches (:data:`DEFAULT_KINDS`): the runs
that answer "which configuration is best".
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from orchestrator.errors import StoreError
from orchestrator.files import bounded_lines, read_bounded
from orchestrator.redaction import redact
from orchestrator.runs.reading import parse_json

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment

__all__ = [
    "DEFAULT_KINDS",
    "RUN_KINDS",
    "PlaybookVerdict",
    "PointCounts",
    "experiment_file",
    "host_identities",
    "host_table",
    "parse_kinds",
    "playbook_verdict",
    "point_counts",
    "require_points",
    "resolved_experiment",
    "resumed_at",
    "run_kind",
    "running_seconds",
]

RUN_KINDS = ("sweep", "search", "playbook")
DEFAULT_KINDS = frozenset({"sweep", "search"})
# A resolved experiment is written with yaml.safe_dump: its top-level keys start their lines.
_SEARCH_KEY = re.compile(r"^search:", re.MULTILINE)


def resolved_experiment(experiment: Experiment) -> dict[str, Any]:
    """The experiment as it will run, with defaults filled in and secrets redacted: by reference they are their
    references already; written inline they become ``[redacted]`` (orchestrator/redaction.py)."""
    return cast("dict[str, Any]", redact(experiment.model_dump(mode="json", exclude_none=True)))


def experiment_file(experiment: Experiment) -> str | None:
    """The experiment file's absolute path, as runs record it."""
    return str(experiment.source.resolve()) if experiment.source is not None else None


def host_table(resolved: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """display name -> (kind, how it is reached), from a resolved experiment (stored or current)."""
    specs = resolved.get("hosts") or ([resolved["host"]] if resolved.get("host") else [{"kind": "local"}])
    out: dict[str, tuple[str, str]] = {}
    for spec in specs:
        if not isinstance(spec, dict):
            continue
        kind = str(spec.get("kind", "local"))
        reach = str(spec.get("ssh", "this machine")) if kind == "ssh" else "this machine"
        name = spec.get("name") or (spec.get("ssh") if kind == "ssh" else "local")
        out[str(name)] = (kind, reach)
    return out


def host_identities(resolved: dict[str, Any]) -> list[str]:
    """``name (how it is reached)`` for every host of a resolved experiment (stored or current), in order."""
    return [
        f"{name} ({reach if kind == 'ssh' else 'this machine'})" for name, (kind, reach) in host_table(resolved).items()
    ]


def _json_object(path: Path) -> dict[str, Any] | None:
    try:
        value = parse_json(read_bounded(path, 64 * 1024 * 1024).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def run_kind(run_dir: str | Path) -> str:
    """``sweep``, ``search`` or ``playbook``: ``kind`` in run.json; for a run made before run.json kept it, a
    ``playbook.json`` beside it makes a playbook run, a ``search:`` section in its experiment.yaml a search."""
    run_dir = Path(run_dir)
    info = _json_object(run_dir / "run.json") or {}
    if info.get("kind") in RUN_KINDS:
        return str(info["kind"])
    if (run_dir / "playbook.json").is_file():
        return "playbook"
    try:
        experiment = read_bounded(run_dir / "experiment.yaml", 64 * 1024 * 1024).decode("utf-8", errors="replace")
    except OSError:
        experiment = ""
    return "search" if _SEARCH_KEY.search(experiment) or (run_dir / "search").is_dir() else "sweep"


def parse_kinds(text: str | None) -> frozenset[str]:
    """The kinds a ``--kind`` value names: one of :data:`RUN_KINDS`, several joined by commas, or ``all``;
    None: :data:`DEFAULT_KINDS`. An unknown name is a StoreError that lists the known ones."""
    if text is None or text == "":
        return DEFAULT_KINDS
    names = {part.strip() for part in text.split(",") if part.strip()}
    if "all" in names:
        return frozenset(RUN_KINDS)
    unknown = sorted(names - set(RUN_KINDS))
    if unknown or not names:
        raise StoreError(f"--kind {text}: not a kind of run (kinds: {', '.join(RUN_KINDS)}, or all)")
    return frozenset(names)


@dataclass(frozen=True)
class PointCounts:
    """A run's points by the status of their last record (records.jsonl; a run that never ended has no counts
    in run.json), and the failed ones' causes (``error.kind`` -> how many)."""

    ok: int = 0
    failed: int = 0
    skipped: int = 0
    causes: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.ok + self.failed + self.skipped

    def causes_text(self) -> str:
        """``http_500: 16, startup: 2``, the commonest first."""
        return ", ".join(f"{kind}: {n}" for kind, n in sorted(self.causes.items(), key=lambda kv: (-kv[1], kv[0])))


def point_counts(run_dir: str | Path) -> PointCounts:
    """:class:`PointCounts` of a run directory; lines that cannot be read are left out, as the store leaves
    them out. Streamed, bounded line by line, keeping only each point's last status and cause, never the
    records (``ls`` of a results root of 100 runs of 5,000 points each)."""
    latest: dict[tuple[str, str], tuple[str, str | None]] = {}
    try:
        for line in bounded_lines(Path(run_dir) / "records.jsonl"):
            try:
                record = parse_json(line.decode("utf-8", errors="replace"))
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                status = str(record.get("status"))
                cause = _cause(record) if status == "failed" else None
                latest[(str(record.get("host")), str(record.get("point_id")))] = (status, cause)
    except OSError:
        return PointCounts()
    statuses = Counter(status for status, _ in latest.values())
    causes = Counter(cause for status, cause in latest.values() if status == "failed" and cause is not None)
    return PointCounts(statuses["ok"], statuses["failed"], statuses["skipped"], dict(causes))


def _cause(record: dict[str, Any]) -> str:
    """``all_requests_failed/http_500``: the record's error kind, and the requests' own where the client kept them."""
    error, client = record.get("error"), record.get("client")
    kind = str(error.get("kind") or "unknown") if isinstance(error, dict) else "unknown"
    by_kind = client.get("errors_by_kind") if isinstance(client, dict) else None
    return "/".join([kind, *sorted(str(k) for k in by_kind)]) if isinstance(by_kind, dict) and by_kind else kind


@dataclass(frozen=True)
class PlaybookVerdict:
    """A playbook run's verdict, from its ``expectations.json``: passed, the outcomes by status, and the title
    of each expectation that failed."""

    passed: bool
    state: str
    counts: dict[str, int]
    failures: list[str]

    @property
    def word(self) -> str:
        """``PASS`` or ``FAIL`` (a run that did not end reads as its state: ``interrupted``)."""
        if self.state not in ("done", "failed"):
            return self.state
        return "PASS" if self.passed else "FAIL"

    def sentence(self) -> str:
        """``FAIL: 2 of 2 checks failed (tree.accept_len equal linear.accept_len (±10%); depth_vs_commit on tree)``."""
        checks = sum(self.counts.values())
        if self.passed:
            return f"PASS: {checks} of {checks} check(s) passed"
        failed = self.counts.get("fail", 0)
        text = f"{self.word}: {failed} of {checks} check(s) failed"
        return text + (f" ({'; '.join(self.failures)})" if self.failures else "")

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.word, "passed": self.passed, "counts": dict(self.counts), "failures": self.failures}


def playbook_verdict(run_dir: str | Path) -> PlaybookVerdict | None:
    """The verdict of a playbook run (None for another kind of run); a playbook run without a readable
    ``expectations.json`` (killed before it ended) has failed: nothing says its checks held."""
    run_dir = Path(run_dir)
    if run_kind(run_dir) != "playbook":
        return None
    info = _json_object(run_dir / "run.json") or {}
    data = _json_object(run_dir / "expectations.json")
    if data is None:
        return PlaybookVerdict(False, str(info.get("state", "?")), {}, ["no expectations.json: the run did not end"])
    raw_counts, raw_outcomes = data.get("counts"), data.get("outcomes")
    counts: dict[Any, Any] = raw_counts if isinstance(raw_counts, dict) else {}
    outcomes: list[Any] = raw_outcomes if isinstance(raw_outcomes, list) else []
    failures = [
        str(o.get("title") or o.get("step")) for o in outcomes if isinstance(o, dict) and o.get("status") == "fail"
    ]
    return PlaybookVerdict(
        passed=data.get("passed") is True,
        state=str(data.get("state") or info.get("state", "?")),
        counts={str(k): int(v) for k, v in counts.items() if isinstance(v, int)},
        failures=failures,
    )


def _event_lines(run_dir: Path) -> list[str]:
    """The lines of the run's events.jsonl, a regular file's only (a FIFO there never blocks), each bounded."""
    try:
        return [line.decode("utf-8", errors="replace") for line in bounded_lines(run_dir / "events.jsonl")]
    except OSError:
        return []


def resumed_at(run_dir: Path) -> list[str]:
    """When the run was resumed (``--resume``), oldest first: its ``start`` events that say ``resumed``."""
    lines = _event_lines(run_dir)
    times = []
    for line in lines:
        try:
            event = parse_json(line)  # a forged line nested too deep is a bad line (runs/reading.py)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("kind") == "start" and event.get("resumed") is True:
            times.append(str(event.get("time") or "?"))
    return times


def running_seconds(run_dir: Path) -> float | None:
    """The seconds a controller ran the run: each opening's span, from its ``start`` event to the last event
    before the next opening (the ``end`` event of one that ended; the last thing a killed one wrote), summed; a
    resumed run's pause between two openings is not in it (issue 59). None: no ``start`` event with a time."""
    from datetime import datetime

    total, span = 0.0, None
    for line in _event_lines(run_dir):
        try:
            event = parse_json(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or not isinstance(event.get("time"), str):
            continue
        try:
            moment = datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
        if event.get("kind") == "start":
            if span is not None:
                total += span[1] - span[0]
            span = (moment, moment)
        elif span is not None:
            span = (span[0], max(span[1], moment))
    if span is None:
        return None
    return total + span[1] - span[0]


def _ending_error(run_dir: Path) -> str | None:
    """``ended before its first point: <the error>`` from the run's last ``end`` event, when it names one."""
    for line in reversed(_event_lines(run_dir)):
        try:
            event = parse_json(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("kind") == "end":
            error = event.get("error")
            return f"ended before its first point: {error}" if isinstance(error, str) and error else None
    return None


def require_points(run_dir: str | Path, doing: str, *, usable: bool = False) -> PointCounts:
    """The run's :class:`PointCounts`, or a StoreError (one clear line) when it has no record at all, or, with
    ``usable``, when none of its points succeeded: ``doing`` says what cannot be done (``report``,
    ``recommend from``, ``compare``)."""
    run_dir = Path(run_dir)
    counts = point_counts(run_dir)
    info = _json_object(run_dir / "run.json") or {}
    kind = run_kind(run_dir)
    state = str(info.get("state", "?"))
    if counts.total == 0:
        why = {
            "running": "still running, or killed before its first point",
            "interrupted": "interrupted before its first point",
            "failed": _ending_error(run_dir) or "ended before its first point; its events.jsonl says why",
        }.get(state, "no point measured")
        if kind == "playbook":
            why = "its steps measured nothing: doctor, smoke or shell steps only"
        raise StoreError(f"{run_dir}: nothing to {doing}: this {kind} run has no records (state {state}: {why})")
    if usable and counts.ok == 0:
        causes = counts.causes_text()
        raise StoreError(
            f"{run_dir}: nothing to {doing}: none of its {counts.total} point(s) succeeded"
            + (f" ({causes})" if causes else "")
            + "; `specsweep report` of it says why each failed"
        )
    return counts
