"""What every deployment is measured with: the ``load:`` section (concurrency levels and request rates, the
prompts or named workloads, repeats, timeouts, adaptive stopping), the ``lossless:`` check and the GPU
``telemetry:`` of every point."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator

from orchestrator.experiment.common import _NAME, Duration, _no_control, _Strict
from orchestrator.experiment.validation import suggest

__all__ = [
    "UNTIL_FIGURES",
    "DecideSpec",
    "LoadSpec",
    "LosslessSpec",
    "TelemetrySpec",
    "TimeoutsSpec",
    "UntilSpec",
    "WorkloadSpec",
    "decide_problems",
]


MIN_RATE = 1e-3
MAX_RATE = 1e6


class TimeoutsSpec(_Strict):
    connect: Duration = 10.0
    first_token: Duration = 300.0
    total: Duration = 900.0


#: Figures ``load.until`` can steer by (the record's interval figures, ``orchestrator/load/uncertainty.py``).
UNTIL_FIGURES = ("output_tok_s", "accept_len", "ttft_ms_p50", "itl_ms_p50", "tpot_ms_p50", "e2e_ms_p50")


class UntilSpec(_Strict):
    """Adaptive stopping: keep a point running until the confidence interval of ``figure`` is within
    ``rel_ci`` of its value (half the interval's width over the figure: 0.02 is ±2%), at least
    ``min_requests`` requests and at most ``max_requests`` requests or ``max_duration`` seconds."""

    rel_ci: float = Field(0.02, gt=0, lt=1)
    figure: Literal["output_tok_s", "accept_len", "ttft_ms_p50", "itl_ms_p50", "tpot_ms_p50", "e2e_ms_p50"] = (
        "output_tok_s"
    )
    min_requests: int = Field(16, ge=2)
    max_requests: int | None = Field(None, ge=2)
    max_duration: Duration | None = None

    @model_validator(mode="after")
    def _capped(self) -> UntilSpec:
        if self.max_requests is None and self.max_duration is None:
            raise ValueError("until needs a cap: max_requests and/or max_duration")
        if self.max_duration is not None and self.max_duration <= 0:
            raise ValueError("max_duration must be positive")
        if self.max_requests is not None and self.max_requests < self.min_requests:
            raise ValueError(f"max_requests ({self.max_requests}) is below min_requests ({self.min_requests})")
        return self


class DecideSpec(_Strict):
    """Rounds until the winner at each load is decided (``orchestrator/sweep/deciding.py``): after the planned
    windows, each load where the answer's rule cannot tell the winner from the runner-up gets one more window (a
    repeat) of every configuration still in contention there, round after round, until every load is decided
    or the budget is spent. The budget: ``max_requests`` per point (a configuration at a load, all its windows
    together), ``max_duration`` of all the extra rounds together (restarts included; a round whose estimate
    would pass it is not started) and ``max_rounds``; at least one of the first two."""

    max_requests: int | None = Field(None, ge=2)
    max_duration: Duration | None = None
    max_rounds: int = Field(8, ge=1, le=100)

    @model_validator(mode="after")
    def _capped(self) -> DecideSpec:
        if self.max_requests is None and self.max_duration is None:
            raise ValueError("decide needs a budget: max_requests (per point) and/or max_duration (e.g. 20m)")
        if self.max_duration is not None and self.max_duration <= 0:
            raise ValueError("max_duration must be positive")
        return self


class WorkloadSpec(_Strict):
    """One named workload of ``load.workloads`` (``orchestrator/load/datasets.py`` reads it): ``source`` (or
    ``path``) is ``builtin:NAME``, ``synthetic:in=N,out=M`` or a file, relative to the experiment file;
    ``format`` how to read the file; ``category`` keeps the rows of that category only; ``max_tokens`` is every
    request's output length (default ``load.max_tokens``; a prompt's own limit only under
    ``load.prompt_max_tokens``). A plain string is a ``source``."""

    source: str = Field(validation_alias=AliasChoices("source", "path"))
    format: Literal["auto", "jsonl", "sharegpt", "specbench", "speedbench"] = "auto"
    category: str | None = None
    max_tokens: int | None = Field(None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"source": data} if isinstance(data, str) else data

    @field_validator("source", "category")
    @classmethod
    def _plain(cls, value: str | None) -> str | None:
        return _no_control(value, "a workload source (builtin:NAME or a path) or category")

    @field_validator("format", mode="before")
    @classmethod
    def _format(cls, value: Any) -> Any:
        formats = ["auto", "jsonl", "sharegpt", "specbench", "speedbench"]
        if isinstance(value, str) and value not in formats:
            raise ValueError(f"unknown format {value!r}{suggest(value, formats)} (formats: {', '.join(formats)})")
        return value


class LoadSpec(_Strict):
    """The client side of every deployment: concurrency levels and/or request rates, and the workload.

    ``repeats``: each load point is measured that many times within a deployment (interleaved: every load
    once, then every load again), each window with its own prompts (the workload seed plus the window's
    index), so the repeats together estimate the figure over more of the prompt set and show how much one
    window differs from the next. ``repeats_across_restarts``: each configuration is deployed that many times,
    interleaved with the others (all configurations, then all again), so restart-to-restart variance (CUDA
    graphs, memory layout) shows too. ``until``: adaptive stopping per point (see :class:`UntilSpec`).
    ``decide``: extra rounds until the winner at each load is decided, within a budget (:class:`DecideSpec`).
    ``flush_cache``: empty the server's prefix cache before every point (SGLang ``/flush_cache``, vLLM
    ``/reset_prefix_cache``, llama.cpp slot erase; ``orchestrator/engines/cache.py``).
    ``max_tokens`` is what every request asks for, whatever a prompts file says; ``prompt_max_tokens: true``
    opts in to each prompt's own limit where its file gives one (the builtin sets do), at most ``max_tokens``
    (``orchestrator/load/workloads.py`` sent_max_tokens). Each point records what was sent (``max_tokens_sent``).
    """

    concurrency: list[Annotated[int, Field(ge=1, le=100000)]] = Field(default_factory=list)
    #: Requests per second: finite, and at least one request in 1,000 s (a rate of 1e-300 waits for ever).
    rates: list[Annotated[float, Field(ge=MIN_RATE, le=MAX_RATE, allow_inf_nan=False)]] = Field(default_factory=list)
    max_in_flight: int | None = Field(None, ge=1)
    warmup: int = Field(3, ge=0)
    requests: int | None = Field(None, ge=1)
    duration: Duration | None = None
    max_tokens: int = Field(256, ge=1)
    prompt_max_tokens: bool = False
    temperature: float = Field(0.0, ge=0, allow_inf_nan=False)
    prompts: str = "builtin:chat"
    #: Named workloads, each a load point of every deployment (``WorkloadSpec``); none: ``prompts`` alone.
    workloads: dict[str, WorkloadSpec] | None = None
    ignore_eos: bool = False
    seed: int = 0
    stream: bool = True
    timeouts: TimeoutsSpec = Field(default_factory=TimeoutsSpec)
    repeats: int = Field(1, ge=1, le=1000)
    repeats_across_restarts: int = Field(1, ge=1, le=100)
    until: UntilSpec | None = None
    decide: DecideSpec | None = None
    flush_cache: bool = False

    @field_validator("concurrency", "rates", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return [value] if isinstance(value, int | float) and not isinstance(value, bool) else value

    @field_validator("prompts")
    @classmethod
    def _prompts(cls, value: str) -> str:
        return _no_control(value, "prompts (builtin:NAME or a path)") or value

    @model_validator(mode="after")
    def _complete(self) -> LoadSpec:
        if not self.concurrency and not self.rates:
            raise ValueError("set concurrency (a list like [1, 8, 32]) and/or rates (requests per second)")
        if len(set(self.concurrency)) != len(self.concurrency):
            raise ValueError("concurrency lists a level twice")
        if self.duration is not None and self.duration <= 0:
            raise ValueError("duration must be positive")
        if self.requests is None and self.duration is None:
            self.requests = 32
        if self.decide is not None and self.decide.max_requests is not None:
            if self.requests is None or self.until is not None:
                raise ValueError(
                    "decide.max_requests counts whole windows of load.requests requests: set load.requests "
                    "(not duration or until), or give decide a max_duration instead"
                )
            if self.decide.max_requests < self.requests * (self.repeats + 1):
                raise ValueError(
                    f"decide.max_requests ({self.decide.max_requests}) leaves no room for an extra round: the "
                    f"planned windows already send {self.requests * self.repeats} requests a point and a round "
                    f"{self.requests} more"
                )
        if self.workloads is not None:
            if not self.workloads:
                raise ValueError("workloads is empty; name at least one (code: builtin:code) or leave it out")
            # The default prompts are tolerated beside workloads: a stored experiment (defaults written out)
            # must validate again when a run is resumed.
            if "prompts" in self.model_fields_set and self.prompts != "builtin:chat":
                raise ValueError("set either prompts or workloads, not both (a workload can be a prompts file)")
            for name in self.workloads:
                if not _NAME.fullmatch(str(name)):
                    raise ValueError(f"workload name {name!r} must be letters, digits, '.', '_' or '-'")
        return self


class LosslessSpec(_Strict):
    """The lossless check (``orchestrator/sweep/lossless.py``): after warm-up, every deployment answers the same
    ``prompts`` prompts of the workload one at a time at temperature 0 (the autoregressive baseline twice, to
    see whether the server is deterministic at all), and each answer is compared with the baseline's."""

    enabled: bool = True
    prompts: int = Field(8, ge=1, le=256)
    max_tokens: int | None = Field(None, ge=1)


class TelemetrySpec(_Strict):
    """GPU telemetry through the window of every point, where the host has ``nvidia-smi``
    (``orchestrator/hosts/telemetry.py``): one long-running ``nvidia-smi ... -lms interval`` per point."""

    gpu: bool = True
    interval_ms: int = Field(500, ge=100, le=60000)


def decide_problems(exp: Any) -> list[tuple[tuple[str, ...], str]]:
    """What ``load.decide`` cannot run with: its rounds redeploy configurations on the one host the rule compares
    them on, one after another, as repeats of one restart."""
    if exp.load.decide is None:
        return []
    where: tuple[str, ...] = ("load", "decide")
    problems: list[tuple[tuple[str, ...], str]] = []
    if exp.search is not None and exp.search.strategy != "grid":
        problems.append((where, "decide rounds run on the grid; a search decides what to measure itself"))
    if len(exp.host_specs()) > 1 or exp.launcher is not None or exp.gpu_slots:
        problems.append((where, "decide rounds run on one host (not a pool, a scheduler or GPU slots)"))
    if exp.load.repeats_across_restarts > 1:
        problems.append((where, "decide adds repeats; drop load.repeats_across_restarts or decide"))
    return problems
