"""One line of ``records.jsonl``: a finished (deployment, load point) on one host, and the schema version every
line and run.json carry. Its validation refuses a figure no measurement gives (orchestrator/runs/plausible.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.runs.plausible import impossible_figure

__all__ = ["RUN_SCHEMA_VERSION", "Record"]

# One version for run.json and for every line of records.jsonl: bump it when a reader of the old shape
# would misread the new one (adding an optional field does not need a bump).
RUN_SCHEMA_VERSION = 1

Scalar = str | int | float | bool


class Record(BaseModel):
    """One finished (deployment, load point) on one host: one line of ``records.jsonl``.

    ``client`` is the load generator's ``LoadResult.to_dict()``, ``server`` the metrics'
    ``WindowMetrics.to_dict()``; both stay plain dicts here so the store never depends on those packages.
    Unknown extra fields are kept, so a newer runner adding an optional field does not break older readers.
    """

    model_config = ConfigDict(extra="allow")

    schema_version: int = RUN_SCHEMA_VERSION
    run_id: str
    experiment: str
    deployment_id: str
    point_id: str
    config_hash: str
    host: str
    variant: str
    params: dict[str, Scalar] = Field(default_factory=dict)
    aliases: list[dict[str, Any]] = Field(default_factory=list)
    baseline: bool = False
    # A run directory when the baseline was reused from an earlier run instead of measured in this one.
    baseline_source: str | None = None
    mode: Literal["concurrency", "rate"]
    concurrency: int | None = None
    rate: float | None = None
    status: Literal["ok", "failed", "skipped"]
    attempt: int = 1
    started_at: str
    finished_at: str
    client: dict[str, Any] | None = None
    server: dict[str, Any] | None = None
    error: dict[str, Any] | None = None  # {kind, message, evidence: [lines]}
    window_file: str | None = None
    # The engine's version and settings as the server reported them (orchestrator/engines/info.py).
    engine_info: dict[str, Any] | None = None
    # Which measurement of its load this is (load.repeats) and which deployment of its configuration
    # (load.repeats_across_restarts); both 1 in runs made before repeats existed.
    repeat: int = 1
    restart: int = 1
    # The window's confidence intervals ({level, method, figures: {name: {value, lo, hi, se, n}}}) and the
    # file of its requests (``requests/<point id>.jsonl``, relative to the run directory).
    intervals: dict[str, Any] | None = None
    requests_file: str | None = None
    # What emptying the prefix cache before the point answered (load.flush_cache), and the GPU telemetry of
    # the window (orchestrator/hosts/telemetry.py).
    cache_flush: dict[str, Any] | None = None
    telemetry: dict[str, Any] | None = None
    # The other specsweep controllers that ran on the controller's machine during the point (pid, machine,
    # experiment, hosts, run_dir, since; orchestrator/sweep/overlap.py): both runs' figures are contaminated.
    overlapped: list[dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _plausible(self) -> Record:  # no figure a measurement cannot give (orchestrator/runs/plausible.py)
        if why := impossible_figure({"client": self.client, "server": self.server, "intervals": self.intervals}):
            raise ValueError(why)
        return self

    @property
    def key(self) -> tuple[str, str]:
        """What identifies a point across attempts and resumes: (host, point id)."""
        return (self.host, self.point_id)
