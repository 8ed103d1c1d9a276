"""A run directory as one tidy pandas frame: one row per point, every figure in its own named column.

Columns (a missing figure is NaN / None, never absent when another row has it; ``CORE_FIGURES`` exist even
in an empty or all-failed run):

- identity: ``run_id experiment host variant label baseline baseline_source alias_of deployment_id point_id
  config_hash command mode concurrency rate load load_label status attempt started_at finished_at
  error_kind error_message error_evidence window_file engine_version workload requests_file`` (the version
  the server reported, ``orchestrator/engines/info.py``). ``load`` is the concurrency or the rate (a number
  to plot against); ``label`` is ``variant(k=v, ...)``. ``workload`` is the point's name in
  ``load.workloads`` ("" in a run without workloads); its ``load_label`` then starts with it (``code C=8``),
  so every table keeps the workloads of one load apart.
- parameters: one column per matrix key under its own name (``budget``, ``topk``); a key that collides with
  a column above becomes ``param_<key>``.
- client (the load generator's figures): ``requests errors output_tokens duration_s output_tok_s
  steady_output_tok_s per_user_tok_s requests_per_s``, each latency as ``ttft_ms_p50`` (``mean p50 p90 p99``
  of ``ttft_ms itl_ms tpot_ms e2e_ms``), ``errors_by_kind`` as JSON text, the per-response speculative
  figures as ``client_accept_len client_verify_steps`` and ``client_<key>`` for llama.cpp's drafted and accepted
  counts (``DRAFTED_KEY``, ``ACCEPTED_KEY`` of ``orchestrator/engines/responses.py``, llama.cpp's names).
- server (the engine's own figures over the window, ``WindowMetrics.to_dict()``): ``server_<key>`` for
  scalars (``server_accept_len``, ``server_acceptance_rate``, ``server_gen_throughput``,
  ``server_lines_matched`` ...), DDTree averages as ``ddtree_<key>`` (``ddtree_avg_commit_len``,
  ``ddtree_avg_accepted_depth`` ...), the Prometheus window's scalars as ``prom_<key>``
  (``prom_accept_len``, ``prom_gen_throughput``, ``prom_details_drafts`` ...; raw counters, gauges and
  prose left out), per-source figures as ``source_<source>_<figure>`` and the figures the record's comparison
  flagged as ``source_disagreements`` (JSON text: each one's values and size); samples and prose are left to the
  window file. Whether each window is whole (orchestrator/engines/integrity.py): ``server_integrity_whole``,
  ``server_integrity_part`` and ``server_integrity_reasons`` (the reasons as JSON text) for the log window,
  ``prom_integrity_*`` for the ``/metrics`` one.
- ``draft_tokens_per_draft`` and ``draft_tokens_per_draft_source``: the engine's draft tokens per draft over the
  window (the mean k of the steps that drafted: ``orchestrator/analysis/drafts.py``), from ``/metrics``, else
  the log.
- ``accept_len``, ``accept_len_source`` and ``accept_len_exactness``: the accept length the analysis uses,
  tokens per verify step with the bonus token, from the most exact source that gives one (exact, then
  rounded, then bounded, then a last-interval gauge: orchestrator/engines/integrity.py), and among equally
  exact ones the server's log window figure, else the client's per-response one (exact counts), else the
  Prometheus window figure, else DDTree's ``avg_commit_len`` (what was actually committed per step); a value
  of 0 or less is no figure (an idle gauge). ``accept_len_exactness`` is the chosen source's word for it
  (None for records written before sources said).

- intervals: ``<figure>_lo``, ``<figure>_hi`` and ``<figure>_se`` for each figure of
  ``orchestrator.analysis.intervals.INTERVAL_FIGURES`` (the window's bootstrap over its requests, at
  ``ci_level``); the accept length's interval comes from the per-response figures and is carried over to the
  ``accept_len`` shown (the same relative width); ``repeat`` and ``restart`` say which measurement of its load a
  window is, ``stopped_by`` why its load ended, ``tokens_per_joule`` and ``gpu_*`` its GPU telemetry, ``cache_flushed``
  whether its prefix cache was emptied first, ``slot`` and ``gpus`` the GPU slot it ran in (docs/gpu-slots.md;
  None without slots), ``overlapped_with`` the other sweeps that ran on the controller's machine during it
  (orchestrator/sweep/overlap.py; None when it ran alone), ``machine_load`` the controller's machine's load
  average a CPU during it (orchestrator/sweep/machineload.py; None in a record without it).

``open_run`` returns the *point* frame: the windows of one load (repeats, restarts) combined into one row
with their combined intervals (``orchestrator/analysis/intervals.py``, ``windows``, ``ci_method``); ``RunData.windows``
keeps one row per window.

A point retried in the same run keeps only its last attempt (``all_attempts=True`` keeps every line). A
deployment that stood for several (variant, params) (``aliases``) gets one row per alias with ``alias_of``
naming the measured configuration, so a heatmap cell is never empty because the plan deduplicated it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.analysis.agreement import window_token_columns
from orchestrator.analysis.drafts import drafts_per_draft
from orchestrator.analysis.goodput import goodput_limits, with_goodput
from orchestrator.analysis.intervals import INTERVAL_FIGURES, aggregate_windows, interval_columns, z_value
from orchestrator.analysis.rowfacts import config_label
from orchestrator.engines.responses import ACCEPTED_KEY, DRAFTED_KEY
from orchestrator.quoting import visible
from orchestrator.runs.layout import planned_points, read_layout
from orchestrator.runs.planned import within_plan
from orchestrator.runs.store import Record, RunInfo, RunStore, SkippedLine

__all__ = [
    "IDENTITY_COLUMNS",
    "RunData",
    "config_label",
    "load_run",
    "open_run",
    "record_accept_len",
    "tidy_frame",
]

IDENTITY_COLUMNS = [
    "run_id",
    "experiment",
    "host",
    "variant",
    "label",
    "baseline",
    "baseline_source",
    "alias_of",
    "deployment_id",
    "point_id",
    "config_hash",
    "command",
    "mode",
    "concurrency",
    "rate",
    "load",
    "load_label",
    "status",
    "attempt",
    "started_at",
    "finished_at",
    "error_kind",
    "error_message",
    "error_evidence",
    "window_file",
    "engine_version",
    "repeat",
    "restart",
    "workload",
    "requests_file",
    "slot",
    "gpus",
]
_DERIVED = [
    "accept_len",
    "accept_len_source",
    "accept_len_exactness",
    "draft_tokens_per_draft",
    "draft_tokens_per_draft_source",
]
CORE_FIGURES = [
    "requests",
    "errors",
    "output_tok_s",
    "steady_output_tok_s",
    "per_user_tok_s",
    "ttft_ms_p50",
    "itl_ms_p50",
    "server_accept_len",
    "server_gen_throughput",
]
_LATENCY_STATS = ("mean", "p50", "p90", "p99")
_CLIENT_SPEC_KEYS = {"accept_len", "verify_steps", DRAFTED_KEY, ACCEPTED_KEY}
_DDTREE_TOP_LEVEL = {"budget", "bs", "topk"}
_NAME_RE = re.compile(r"[^0-9A-Za-z]+")
_SERVER_SKIPPED = {"definitions", "skipped_examples", "samples"}


@dataclass
class RunData:
    """Everything analysis needs from one run directory, read once."""

    path: Path
    info: RunInfo
    experiment: dict[str, Any]
    plan: dict[str, Any]
    frame: pd.DataFrame
    param_columns: list[str]
    skipped_lines: list[SkippedLine] = field(default_factory=list)
    records_total: int = 0
    #: One row per window (record); ``frame`` combines the windows of each point.
    windows: pd.DataFrame | None = None
    #: ``provenance.json`` of the run (None for runs made before it existed).
    provenance: dict[str, Any] | None = None

    @property
    def planned_points(self) -> int:
        """Points the plan holds, counted as the frame counts them: a configuration at a load (its repeats and
        restarts are windows of one point). A search measures what its budget allows, not its whole space (the
        plan's): the points its sweep planned, as run.json keeps them at its end."""
        points = self.info.points or {}
        if self.info.kind == "search" and isinstance(points.get("planned"), int):
            return int(points["planned"])
        # Once per target for a deployment measured per target (a baseline on each GPU slot or host of a pool),
        # as layout.json records what the run's slots ran (orchestrator/runs/layout.py).
        return planned_points(self.plan, read_layout(self.path))


def _shown(record: Record) -> Record:
    """``record`` with its names and error text escaped for display (``quoting.visible``), when they need it."""
    update: dict[str, Any] = {}
    for key in ("experiment", "host", "variant"):
        if (shown := visible(getattr(record, key))) != getattr(record, key):
            update[key] = shown
    error = record.error
    if isinstance(error, dict):
        shown_error = {k: visible(v) if isinstance(v, str) else v for k, v in error.items()}
        if isinstance(evidence := error.get("evidence"), list):
            shown_error["evidence"] = [visible(str(x)) for x in evidence]
        if shown_error != error:
            update["error"] = shown_error
    return record.model_copy(update=update) if update else record


def load_label(mode: str, concurrency: int | None, rate: float | None) -> str:
    if mode == "rate":
        return f"rate={rate:g}/s" if rate is not None else "rate=?"
    return f"C={concurrency}"


def open_run(path: str | Path, *, all_attempts: bool = False) -> RunData:
    """Read a run directory (refusing an unknown schema) into a ``RunData`` with its tidy frame."""
    store = RunStore.open(path)
    records = store.records(trim=_drop_unread)
    experiment = store.experiment()
    try:
        plan = store.plan()
    except Exception:  # a run killed before plan.json landed is still worth reading
        plan = {}
    commands = {d.get("id"): d.get("command") for d in plan.get("deployments", []) if isinstance(d, dict)}
    records, outside = within_plan(records, plan, store.info.kind)
    records_total = len(records)
    chosen = records if all_attempts else list({r.key: r for r in records}.values())
    del records
    # Each record let go of once its rows are made: a real sweep's record is tens of KB, and every record held
    # beside every row and the frame made recommend of 19,800 records take 3 GB (bench/RESULTS-scale.md).
    windows, params = tidy_frame(_consumed(chosen), commands=commands)
    checks = experiment.get("checks")
    confidence = checks.get("confidence") if isinstance(checks, dict) else None
    level = float(confidence) if isinstance(confidence, float) and 0.5 < confidence < 1 else 0.95
    # Goodput (the experiment's per-request limits) is a window figure like the others: combined the same way.
    windows = with_goodput(windows, path, goodput_limits(experiment), z=z_value(level))
    frame = windows if all_attempts else aggregate_windows(windows, level=level)
    return RunData(
        path=Path(path),
        info=store.info,
        experiment=experiment,
        plan=plan,
        frame=frame,
        param_columns=params,
        skipped_lines=list(store.skipped_lines) + outside,
        records_total=records_total,
        windows=windows,
        provenance=store.read_json("provenance.json"),
    )


def _drop_unread(record: Record) -> None:
    """Drop, from an accepted record, the parts of its server section the frame never reads
    (:func:`flatten_server`): its lists (the window's samples), its prose and the raw Prometheus series. A real
    sweep's record is mostly these (a demo record: about 26 of its 33 KB are the samples), and ``open_run``
    holds every record while it reads them: 19,800 such records took over 1 GB (bench/RESULTS-scale.md)."""
    server = record.server
    if not isinstance(server, dict):
        return
    for key in [k for k, v in server.items() if isinstance(v, list) or k in _SERVER_SKIPPED]:
        del server[key]
    prometheus = server.get("prometheus")
    if isinstance(prometheus, dict):
        for key in [k for k, v in prometheus.items() if isinstance(v, list) or (isinstance(v, dict) and k in _RAW)]:
            del prometheus[key]


#: The raw series and prose of a Prometheus window the frame does not read (:func:`flatten_server`).
_RAW = ("counters", "gauges", "definitions")


def _consumed(records: list[Record]) -> Iterator[Record]:
    """``records`` in order, each dropped from the list as it is given (the list is emptied)."""
    records.reverse()
    while records:
        yield records.pop()


def load_run(path: str | Path, *, all_attempts: bool = False) -> pd.DataFrame:
    """The tidy frame of a run directory: one row per point (last attempt), see the module docstring."""
    return open_run(path, all_attempts=all_attempts).frame


def tidy_frame(records: Iterable[Record], *, commands: dict[Any, Any] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Records -> (frame, parameter column names). Pure: tests build frames from hand-made records."""
    commands = commands or {}
    rows: list[dict[str, Any]] = []
    param_names: list[str] = []
    for record in records:
        for variant, params, alias_of in _configurations(record):
            for name in params:
                if name not in param_names:
                    param_names.append(name)
            rows.append(_row(record, variant, params, alias_of, commands.get(record.deployment_id)))
    # Parameters travel under a private key while rows are built; they keep their own names unless one would
    # overwrite a figure column of any row (then it becomes ``param_<name>``).
    taken = set(IDENTITY_COLUMNS) | set(_DERIVED)
    for row in rows:
        taken.update(row)
    rename = {n: (f"param_{n}" if n in taken or n.startswith("param_") else n) for n in param_names}
    for row in rows:
        for name, value in row.pop(_PARAM_KEY).items():
            row[rename[name]] = value
    param_columns = [rename[n] for n in param_names]
    frame = pd.DataFrame(rows)
    for column in IDENTITY_COLUMNS + param_columns + _DERIVED:
        if column not in frame.columns:
            frame[column] = None
    # Figures every consumer may ask for exist even when no record has them (an empty or all-failed run).
    for column in CORE_FIGURES:
        if column not in frame.columns:
            frame[column] = float("nan")
    ordered = IDENTITY_COLUMNS + param_columns + _DERIVED
    rest = [c for c in frame.columns if c not in ordered]
    frame = frame[ordered + rest]
    return frame.reset_index(drop=True), param_columns


_PARAM_KEY = "\x00params"


def _configurations(record: Record) -> list[tuple[str, dict[str, Any], str | None]]:
    measured = config_label(record.variant, record.params)
    out: list[tuple[str, dict[str, Any], str | None]] = [(record.variant, dict(record.params), None)]
    for alias in record.aliases:
        variant = alias.get("variant")
        if isinstance(variant, str):
            params = alias.get("params") or {}
            out.append((variant, dict(params) if isinstance(params, dict) else {}, measured))
    return out


def _row(record: Record, variant: str, params: dict[str, Any], alias_of: str | None, command: Any) -> dict[str, Any]:
    # Names and messages as every output shows them: a control character escaped (quoting.visible).
    params = {k: visible(v) if isinstance(v, str) else v for k, v in params.items()}
    record = _shown(record)
    error = record.error or {}
    evidence = error.get("evidence")
    workload = str(getattr(record, "workload", None) or "")
    row: dict[str, Any] = {
        "run_id": record.run_id,
        "experiment": record.experiment,
        "host": record.host,
        "variant": variant,
        "label": config_label(variant, params),
        "baseline": bool(record.baseline) if alias_of is None else False,
        "baseline_source": record.baseline_source,
        "alias_of": alias_of,
        "deployment_id": record.deployment_id,
        "point_id": record.point_id,
        "config_hash": record.config_hash,
        "command": command if isinstance(command, str) else None,  # data (schedule.py reads its JSON): shown escaped
        "mode": record.mode,
        "concurrency": record.concurrency,
        "rate": record.rate,
        "load": float((record.concurrency if record.mode == "concurrency" else record.rate) or 0),
        "load_label": (f"{workload} " if workload else "") + load_label(record.mode, record.concurrency, record.rate),
        "status": record.status,
        "attempt": record.attempt,
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "error_kind": error.get("kind"),
        "error_message": error.get("message"),
        "error_evidence": [str(x) for x in evidence] if isinstance(evidence, list) else None,
        "window_file": record.window_file,
        "engine_version": (record.engine_info or {}).get("version"),
        "repeat": record.repeat,
        "restart": record.restart,
        "workload": workload,
        "requests_file": record.requests_file,
        _PARAM_KEY: params,
    }
    row.update(flatten_client(record.client))
    row.update(flatten_server(record.server))
    row.update(_flatten_extras(record))
    row.update(window_token_columns(row))  # each source's tokens over this window (analysis/agreement.py)
    row.update(_placement(record))
    row["accept_len"], row["accept_len_source"], row["accept_len_exactness"] = _headline_accept_len(record, row)
    # The k the engine ran: its draft tokens per draft (orchestrator/analysis/drafts.py).
    row["draft_tokens_per_draft"], row["draft_tokens_per_draft_source"] = drafts_per_draft(row)
    intervals = (record.intervals or {}).get("figures") or {}
    for figure in INTERVAL_FIGURES:
        lo_col, hi_col, se_col = interval_columns(figure)
        entry = intervals.get(figure)
        row[lo_col] = row[hi_col] = row[se_col] = None
        if not isinstance(entry, dict):
            continue
        lo, hi, se, value = (_number(entry.get(k)) for k in ("lo", "hi", "se", "value"))
        shown = _number(row.get(figure))
        if lo is None or hi is None or value is None or shown is None:
            continue
        if figure == "accept_len" and value > 0 and shown != value:
            # The interval is the per-response figures'; the figure shown may be the server's window figure
            # over the same tokens: carry the relative width over.
            scale = shown / value
            lo, hi, se = lo * scale, hi * scale, (se or 0.0) * scale
        row[lo_col], row[hi_col], row[se_col] = lo, hi, se
    row["ci_level"] = (record.intervals or {}).get("level")
    return row


#: The accept length's sources, in the order they are preferred among equally exact ones.
_ACCEPT_SOURCES = (
    ("server_accept_len", "server"),
    ("client_accept_len", "client"),
    ("prom_accept_len", "prometheus"),
    ("ddtree_avg_commit_len", "ddtree_commit"),
)
#: An exact figure first, then a rounded one, then one the source only bounds, then a last-interval gauge
#: (orchestrator/engines/integrity.py, KINDS). A record written before sources said how exact they are
#: carries no kind: it ranks as exact, so the figures of older runs stay what they were.
_EXACTNESS_RANK = {"exact": 0, None: 0, "rounded": 1, "bounded": 2, "gauge": 3}


def _headline_accept_len(record: Record, row: dict[str, Any]) -> tuple[float | None, str | None, str | None]:
    """The accept length the analysis uses, its source and how exact it is: the most exact of the sources
    that give one (an SGLang log window's figure is only bounded, the responses' counts are exact), the
    order of ``_ACCEPT_SOURCES`` among equals. A value of 0 or less is no figure (an idle gauge)."""
    server = record.server if isinstance(record.server, dict) else {}
    client = record.client if isinstance(record.client, dict) else {}
    exactness_of = {
        "server": server.get("exactness"),
        "client": (client.get("spec") or {}).get("exactness") if isinstance(client.get("spec"), dict) else None,
        "prometheus": (server.get("prometheus") or {}).get("exactness")
        if isinstance(server.get("prometheus"), dict)
        else None,
        "ddtree_commit": None,
    }
    best: tuple[int, int, float, str, str | None] | None = None
    for order, (column, name) in enumerate(_ACCEPT_SOURCES):
        value = _number(row.get(column))
        # An accept length counts the bonus token, so it is at least 1; a 0 is an idle gauge, not a figure.
        if value is None or value <= 0:
            continue
        said = exactness_of[name]
        entry = said.get("accept_len") if isinstance(said, dict) else None
        kind = entry.get("kind") if isinstance(entry, dict) else None
        kind = kind if kind in _EXACTNESS_RANK else None
        candidate = (_EXACTNESS_RANK[kind], order, value, name, kind)
        if best is None or candidate[:2] < best[:2]:
            best = candidate
    if best is None:
        return None, None, None
    return best[2], best[3], best[4]


def record_accept_len(record: Record) -> tuple[float | None, str | None, str | None]:
    """(accept length, source, exactness) of one record as the analysis and every output show it (the live
    progress line too): the same choice as the frame's ``accept_len`` columns."""
    row = {**flatten_client(record.client), **flatten_server(record.server)}
    return _headline_accept_len(record, row)


def _placement(record: Record) -> dict[str, Any]:
    """``slot`` and ``gpus`` (comma-joined ids) of a record made in a GPU slot (its ``placement``,
    orchestrator/launchers/gpuslots.py); None for the others."""
    placement = (record.model_extra or {}).get("placement")
    if not isinstance(placement, dict) or not placement.get("slot"):
        return {"slot": None, "gpus": None}
    return {"slot": str(placement["slot"]), "gpus": ",".join(str(g) for g in placement.get("gpus") or [])}


def _flatten_extras(record: Record) -> dict[str, Any]:
    """The window's cache flush and GPU telemetry as columns (its stopping reason, ``stopped_by`` and
    ``until_*``, comes with the client's figures)."""
    out: dict[str, Any] = {}
    flush = record.cache_flush
    out["cache_flushed"] = bool(flush.get("ok")) if isinstance(flush, dict) else None
    telemetry = record.telemetry if isinstance(record.telemetry, dict) else {}
    for key, column in (
        ("tokens_per_joule", "tokens_per_joule"),
        ("utilization_pct_mean", "gpu_utilization_pct"),
        ("memory_used_mib_max", "gpu_memory_used_mib"),
        ("power_w_mean", "gpu_power_w"),
        ("energy_j", "gpu_energy_j"),
    ):
        out[column] = telemetry.get(key)
    out["overlapped_with"] = overlapped_with(record.overlapped)
    machine = record.machine if isinstance(record.machine, dict) else {}
    per_cpu = machine.get("load_per_cpu")
    out["machine_load"] = float(per_cpu) if isinstance(per_cpu, int | float) and not isinstance(per_cpu, bool) else None
    return out


def overlapped_with(entries: Any) -> str | None:
    """The other controllers a record was measured beside, as one text (``exp-a (pid 12, run …); …``)."""
    if not isinstance(entries, list):
        return None
    names = [
        f"{e.get('experiment', '?')} (pid {e.get('pid', '?')} on {e.get('machine', '?')}, run {e.get('run_dir', '?')})"
        for e in entries
        if isinstance(e, dict)
    ]
    return "; ".join(names) or None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return None if value != value else float(value)  # NaN is "no figure"
    return None


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


@functools.lru_cache(maxsize=4096)
def _clean(name: str) -> str:  # cached: a run's records repeat the same few hundred keys (a million calls a report)
    return _NAME_RE.sub("_", name).strip("_")


_CLIENT_RESERVED = set(IDENTITY_COLUMNS) | set(_DERIVED)


def flatten_client(client: dict[str, Any] | None) -> dict[str, Any]:
    """The load generator's figures as flat columns (see the module docstring for the names)."""
    if not client:
        return {}
    out: dict[str, Any] = {}
    for key, value in client.items():
        if key == "errors_by_kind":
            out["errors_by_kind"] = json.dumps(value, sort_keys=True) if value else None
        elif key == "spec":
            for sub, sub_value in (value or {}).items():
                if _scalar(sub_value):
                    out[f"client_{_clean(sub)}"] = sub_value
        elif isinstance(value, dict):
            for stat, stat_value in value.items():
                if _scalar(stat_value):
                    out[f"{_clean(key)}_{_clean(str(stat))}"] = stat_value
        elif _scalar(value):
            name = _clean(key)
            if name in _CLIENT_RESERVED or name in _CLIENT_SPEC_KEYS:
                name = f"client_{name}"
            out[name] = value
    return out


def flatten_server(server: dict[str, Any] | None) -> dict[str, Any]:
    """The engine's window figures as flat columns (see the module docstring for the names)."""
    if not server:
        return {}
    out: dict[str, Any] = {}
    for key, value in server.items():
        if isinstance(value, list) or key in _SERVER_SKIPPED:
            continue  # samples and prose: the window file and the aggregates carry what matters
        if key == "ddtree" and isinstance(value, dict):
            out.update({f"ddtree_{_clean(k)}": v for k, v in value.items() if _scalar(v)})
        elif key == "prometheus" and isinstance(value, dict):
            for k, v in value.items():
                if _scalar(v):
                    out[f"prom_{_clean(k)}"] = v
                elif isinstance(v, dict) and k not in _RAW:  # raw series, prose
                    out.update({f"prom_{_clean(k)}_{_clean(s)}": x for s, x in v.items() if _scalar(x)})
            out.update(_integrity_reasons("prom", value.get("integrity")))
        elif key == "disagreement" and isinstance(value, dict):
            out.update({f"disagreement_{_clean(k)}": v for k, v in value.items() if _scalar(v)})
        elif key in ("sources", "comparison") and isinstance(value, dict):
            out.update(_flatten_sources(value))
        elif isinstance(value, dict):
            out.update({f"server_{_clean(key)}_{_clean(k)}": v for k, v in value.items() if _scalar(v)})
            if key == "integrity":
                out.update(_integrity_reasons("server", value))
        elif key.startswith("avg_") or key in _DDTREE_TOP_LEVEL:
            out[f"ddtree_{_clean(key)}"] = value
        else:
            out[f"server_{_clean(key)}"] = value
    return out


def _integrity_reasons(prefix: str, integrity: Any) -> dict[str, Any]:
    """``<prefix>_integrity_reasons``: a window's integrity reasons (``[{"reason", "detail"}]``) as JSON text, None
    when it is whole (orchestrator/engines/integrity.py)."""
    reasons = integrity.get("reasons") if isinstance(integrity, dict) else None
    if not isinstance(reasons, list) or not reasons:
        return {f"{prefix}_integrity_reasons": None} if isinstance(integrity, dict) else {}
    return {f"{prefix}_integrity_reasons": json.dumps(reasons, sort_keys=True)}


def _flatten_sources(value: dict[str, Any]) -> dict[str, Any]:
    """Per-source figures as ``source_<source>_<figure>``, from either shape the metrics layer writes:
    ``compare_sources`` output (``{"figures": {fig: {"values": {source: v}}}}``) or ``{source: {fig: v}}``."""
    out: dict[str, Any] = {}
    figures = value.get("figures")
    if isinstance(figures, dict):
        for figure, entry in figures.items():
            values = entry.get("values") if isinstance(entry, dict) else None
            if isinstance(values, dict):
                for source, v in values.items():
                    if _scalar(v):
                        out[f"source_{_clean(str(source))}_{_clean(str(figure))}"] = v
        flagged = [f for f in value.get("disagreements") or () if isinstance(figures.get(f), dict)]
        keep = ("values", "max_rel_diff")  # what analysis/agreement.py shows of each flagged figure
        out["source_disagreements"] = (
            json.dumps({f: {**{k: figures[f].get(k) for k in keep}, "rel_tol": value.get("rel_tol")} for f in flagged})
            if flagged
            else None
        )
        return out
    for source, entry in value.items():
        if isinstance(entry, dict):
            out.update({f"source_{_clean(source)}_{_clean(k)}": v for k, v in entry.items() if _scalar(v)})
    return out
