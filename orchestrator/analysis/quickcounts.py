"""A run's point counts (planned, ok, degraded, failed, skipped) without its answer: what ``ls`` shows of a run
that has no current ``answer.json`` (killed before its ending, or never reported).

Making the answer reads every record into a model, builds the frame, bootstraps every interval and runs every
check: seconds per run of thousands of points, so ``ls`` of a results root of many such runs took minutes
(bench/RESULTS-scale.md). The counts need only each record's identity, status and request counts: each line of
``records.jsonl`` is decoded (msgspec, in C) and the answer's own rules are applied to those few fields:

- the records ``plan.json`` does not hold are left out (``orchestrator/runs/planned.py``, ``within_plan``);
- each (host, point id) counts by its last attempt (``RunStore.latest_records``);
- the windows of one point (host, workload, configuration, load: ``intervals.GROUP_KEYS``) are combined as
  ``intervals.aggregate_windows`` combines them: a point with an ok window is one ok point and each of its
  other windows a point of its own status; a point without one is its last window's status;
- an ok point that lost more than ``checks.degraded_requests`` of its requests is degraded
  (``result.mark_degraded``, ``lost_requests``; its ok windows' requests summed as the frame sums them).

A line the store would skip as a record no measurement gives (a figure that is not finite, beyond
``plausible.MAX_FIGURE``, or a negative count: orchestrator/runs/plausible.py) is skipped here too: a line whose
text holds a number that could be one (:func:`_may_be_refused`: a number with a positive exponent or of 19 digits
and more, or a ``COUNTED`` key with a negative value; the quick reading refuses non-finite numbers itself) is read
by the store's own rule (``store.read_record_line``), and counted only if the store would keep it.

Any line this reading is not sure of (not JSON, not an object, another schema, a field of another type: lines
the store skips or refuses) gives None, and the caller makes the whole answer instead, so the counts are the
answer's counts (``tests/unit/test_quickcounts.py`` holds them equal)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, NamedTuple

import msgspec

from orchestrator.analysis.frame import config_label
from orchestrator.analysis.result import lost_requests
from orchestrator.analysis.statuses import STATUSES
from orchestrator.files import bounded_lines
from orchestrator.runs.layout import planned_points, read_layout
from orchestrator.runs.plausible import COUNTED
from orchestrator.runs.store import Record, read_record_line

__all__ = ["quick_counts"]


class _Unsure(Exception):
    """A line the quick reading does not read as the store would: make the whole answer instead."""


def _json(path: Path) -> Any:
    try:
        return msgspec.json.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None


def _threshold(experiment: Any) -> float | None:
    checks = experiment.get("checks") if isinstance(experiment, dict) else None
    if not isinstance(checks, dict) or "degraded_requests" not in checks:
        return 0.10  # CheckSettings.degraded_requests' default
    value = checks["degraded_requests"]
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1
    return float(value) if ok else None


#: The screen reads the line with every digit made ``0`` and all whitespace taken out (one ``bytes.translate``, in
#: C), then looks for a few byte strings: a regex over the whole line cost about 25 us a line (ls of 100 runs of
#: 4,875 points: 8.7 -> 23.1 CPU s, bench/RESULTS-scale.md).
#: ``E`` is made ``e`` and ``+`` taken out as well, so one find covers ``1e5``, ``1e+5``, ``1E5`` and ``1E+5``: the
#: screen may only find more than the numbers it looks for (then the store's rule decides), never less.
_ZEROS = bytes.maketrans(b"123456789E", b"000000000e")
_SPACE = b" \t\r\n+"
#: A ``plausible.COUNTED`` key: the screen looks for one followed by a negative value (``"key":-``).
_COUNTED_KEYS = frozenset(key.encode() for keys in COUNTED.values() for key in keys)
#: A number written with a positive exponent, or 19 digits and more before its point: the only numbers that can
#: pass ``plausible.MAX_FIGURE`` (1e18).
_EXPONENTS = (b"0e0",)
_LONG = b"0" * 19
_NUMBER = frozenset(b"0.-e")
_BEFORE = frozenset(b":[,")


def _number_start(text: bytes, at: int) -> int:
    """Where the JSON number holding ``text[at]`` starts (after ``:``, ``[`` or ``,``), -1 when the characters
    there are not a number's (a string's: ``"a3e5"``)."""
    start = at
    while start > 0 and text[start - 1] in _NUMBER:
        start -= 1
    return start if start > 0 and text[start - 1] in _BEFORE else -1


def _may_be_refused(line: bytes) -> bool:
    """Whether ``line`` (a line the quick reading decoded, so without NaN or Infinity) holds a figure
    ``plausible.impossible_figure`` could refuse: when not, the store keeps the line as far as its figures go."""
    if b"\\u" in line:
        return True  # a key may be written with escapes (``"\\u0072equests"``): the store's rule decides
    text = line.translate(_ZEROS, _SPACE)
    at = text.find(b'":-')
    while at != -1:
        if text[text.rfind(b'"', 0, at) + 1 : at] in _COUNTED_KEYS:
            return True
        at = text.find(b'":-', at + 1)
    for marker in _EXPONENTS:
        at = text.find(marker)
        while at != -1:
            if _number_start(text, at) != -1:
                return True
            at = text.find(marker, at + 1)
    at = text.find(_LONG)
    while at != -1:
        start = _number_start(text, at)
        if start != -1 and text[start:at] in (b"", b"-"):  # the digits before the number's point
            return True
        at = text.find(_LONG, at + 1)
    return False


class _Client(msgspec.Struct):
    errors: Any = None
    cancelled: Any = None
    requests: Any = None


class _Line(msgspec.Struct):
    """The fields of a record the counts read, of the types the record's model allows (``runs/record.py``); the
    rest of the line is skipped unread (in C)."""

    host: str
    point_id: str
    status: Literal["ok", "failed", "skipped"]
    variant: str
    mode: Literal["concurrency", "rate"]
    schema_version: Literal[1] = 1  # runs/record.py RUN_SCHEMA_VERSION (held by the tests); another: not counted
    # as written (its label is made once per distinct text, the text decoded then: :meth:`_Reader.window`)
    params: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))
    concurrency: int | None = None
    rate: int | float | None = None
    workload: str | None = None
    baseline_source: Any = None
    client: _Client | None = None


_DECODER = msgspec.json.Decoder(_Line)
_PARAMS = msgspec.json.Decoder(dict[str, Any])
#: Lines read and screened together (:meth:`_Reader.windows`).
_CHUNK_LINES = 4096
_NO_CLIENT = _Client()


class _Reader:
    """Each line of records.jsonl as the fields the counts read, configuration labels made once each."""

    def __init__(self) -> None:
        self.labels: dict[tuple[str, bytes], str] = {}

    def windows(self, path: Path) -> Iterator[_Window]:
        """Every line of ``path`` (records.jsonl) but the blank ones (the store skips them); :class:`_Unsure` for
        a line not read surely. The lines are read in chunks of :data:`_CHUNK_LINES`: a chunk whose text the
        screen passes (no number the store could refuse anywhere in it: the screen of a chunk finds all that the
        screens of its lines find) is decoded in one call (``Decoder.decode_lines``) when it gives one record per
        line; any other chunk is read line by line, as the store reads it (bench/RESULTS-scale.md)."""
        chunk: list[bytes] = []
        for line in bounded_lines(path):
            chunk.append(line)
            if len(chunk) == _CHUNK_LINES:
                yield from self._chunk(chunk, path)
                chunk = []
        if chunk:
            yield from self._chunk(chunk, path)

    def _chunk(self, lines: list[bytes], path: Path) -> Iterator[_Window]:
        text = b"".join(lines)
        if not _may_be_refused(text):
            try:
                raws = _DECODER.decode_lines(text)
            except (msgspec.DecodeError, msgspec.ValidationError):
                raws = None  # the line that fails is found, and judged, line by line
            if raws is not None and len(raws) == sum(1 for line in lines if line.strip()):
                for raw in raws:
                    yield self.window(raw)
                return
        for line in lines:
            text = line.strip().strip(b"\x00").strip()
            if not text:
                continue
            try:
                raw = _DECODER.decode(text)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:  # not a record's JSON, or not its types
                raise _Unsure from exc
            if _may_be_refused(text) and not isinstance(
                read_record_line(text.decode("utf-8", errors="replace"), 0, path), Record
            ):
                continue  # the store skips it (a figure no measurement gives, or another field it refuses)
            yield self.window(raw)

    def window(self, raw: _Line) -> _Window:
        named = (raw.variant, bytes(raw.params))
        label = self.labels.get(named)
        if label is None:
            try:  # a mapping, as the record's model has it; else not read surely
                params = _PARAMS.decode(raw.params)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise _Unsure from exc
            label = self.labels[named] = config_label(raw.variant, params)
        load = raw.concurrency if raw.mode == "concurrency" else raw.rate
        client = raw.client or _NO_CLIENT
        point = (raw.host, raw.workload or "", label, raw.mode, float(load or 0))
        return _Window(
            (raw.host, raw.point_id),
            point,
            raw.status,
            raw.baseline_source,
            client.errors,
            client.cancelled,
            client.requests,
        )


class _Window(NamedTuple):
    key: tuple[str, str]
    point: tuple[str, str, str, str, float]
    status: str
    baseline_source: Any
    errors: Any
    cancelled: Any
    requests: Any


def _planned_ids(plan: Any, kind: Any) -> set[Any] | None:
    """The point ids ``plan`` holds (``within_plan``'s rule), None when every record is kept."""
    deployments = plan.get("deployments") if isinstance(plan, dict) else None
    if kind not in (None, "sweep") or not isinstance(deployments, list) or not deployments:
        return None
    planned: set[Any] = {
        point.get("id")
        for dep in deployments
        if isinstance(dep, dict)
        for point in dep.get("load_points") or []
        if isinstance(point, dict)
    }
    planned.update(plan.get("decide_point_ids") or [])
    return planned


def _summed(values: list[Any]) -> float | None:
    present = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool) and v == v]
    return sum(present) if present else None


def quick_counts(run_dir: str | Path) -> dict[str, int] | None:
    """The run's counts as its answer has them (``Counts.to_dict``), or None when a line cannot be read as
    surely as the store reads it (then make the answer)."""
    path = Path(run_dir)
    info, plan = _json(path / "run.json"), _json(path / "plan.json")
    if not isinstance(info, dict):
        return None
    import yaml

    try:
        experiment = yaml.safe_load((path / "experiment.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        experiment = {}
    threshold = _threshold(experiment)
    if threshold is None:
        return None
    kind = info.get("kind")
    planned_ids = _planned_ids(plan if isinstance(plan, dict) else {}, kind)
    latest: dict[tuple[str, str], _Window] = {}
    reader = _Reader()
    try:
        for window in reader.windows(path / "records.jsonl"):
            if planned_ids is not None and window.key[1] not in planned_ids and not window.baseline_source:
                continue
            latest[window.key] = window
    except (_Unsure, OSError):
        return None
    groups: dict[tuple[Any, ...], list[_Window]] = {}
    for window in latest.values():
        groups.setdefault(window.point, []).append(window)
    statuses: Counter[str] = Counter()
    for windows in groups.values():
        ok = [w for w in windows if w.status == "ok"]
        if not ok:
            statuses[windows[-1].status] += 1
            continue
        statuses.update(w.status for w in windows if w.status != "ok")
        row: dict[str, object] = {
            "errors": _summed([w.errors for w in ok]),
            "cancelled": _summed([w.cancelled for w in ok]),
            "requests": _summed([w.requests for w in ok]),
        }
        lost, sent = lost_requests(row)
        statuses["degraded" if sent and lost / sent > threshold else "ok"] += 1
    points: dict[str, Any] = info["points"] if isinstance(info.get("points"), dict) else {}
    if kind == "search" and isinstance(points.get("planned"), int):
        planned = int(points["planned"])
    else:
        planned = planned_points(plan if isinstance(plan, dict) else {}, read_layout(path))
    return {"planned": planned, **{s: int(statuses.get(s, 0)) for s in STATUSES}}
