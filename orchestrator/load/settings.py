"""What one load run is asked to do: the target, the loop (closed or open), the workload and the timeouts.

``LoadSettings`` is a plain frozen dataclass so that the runner can build one per load point cheaply; it checks
itself on construction and raises :class:`~orchestrator.errors.LoadError` (never a bare ``ValueError``).

The load generator knows no engine: what an engine needs in a request beyond the API's own fields comes in
``extra_body`` (merged into the top level of every request body). :func:`engine_request_extras` is the one
place that knows what each engine offers, for the caller to pass on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from orchestrator.errors import LoadError

if TYPE_CHECKING:
    from orchestrator.load.datasets import WorkloadSource

__all__ = ["API_PATHS", "Api", "LoadSettings", "engine_request_extras"]

Api = Literal["chat", "completions", "generate", "llamacpp"]

# The request path of each API, relative to the server's base URL.
API_PATHS: dict[str, str] = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "generate": "/generate",  # SGLang's native API
    "llamacpp": "/completion",  # llama.cpp's native API
}

# engine -> its request_extras(api): the body fields that ask it for per-response speculative figures.
# The body fields the client sets itself, per API; ``extra_body`` may not override them.
_OPENAI_FIELDS = frozenset({"model", "max_tokens", "temperature", "stream", "stream_options", "ignore_eos"})
_OWN_FIELDS: dict[str, frozenset[str]] = {
    "chat": _OPENAI_FIELDS | {"messages"},
    "completions": _OPENAI_FIELDS | {"prompt"},
    "generate": frozenset({"text", "sampling_params", "stream"}),
    "llamacpp": frozenset({"prompt", "n_predict", "temperature", "stream", "ignore_eos"}),
}


def engine_request_extras(engine: str | None, api: str) -> dict[str, Any]:
    """The request-body fields that make ``engine`` return its per-response speculative figures on ``api``
    (each engine's ``request_extras``, ``orchestrator/engines/<name>/responses.py``, says which and why; an
    engine without one needs nothing). ``sim`` asks as SGLang, the simulator's default dialect (its other
    dialects ignore the fields)."""
    from orchestrator.engines.registry import get_engine, is_engine

    return get_engine(engine).request_extras(api) if engine is not None and is_engine(engine) else {}


@dataclass(frozen=True, slots=True)
class LoadSettings:
    """One load point. ``rate`` set means open loop (Poisson arrivals), else closed loop at ``concurrency``.

    The run stops after ``requests`` measured requests or ``duration_s`` seconds, whichever comes first
    (``requests`` alone, if neither is given, defaults to 4 x concurrency, at least 16). In open loop,
    ``max_in_flight`` (or ``concurrency`` when that is set) caps the requests in flight. ``workers`` above 1
    shares the point's load between that many processes (never more than its concurrency or requests).
    """

    url: str
    model: str | None = None  # None: ask GET /v1/models and take the first id
    api: Api = "chat"
    concurrency: int | None = None
    rate: float | None = None
    max_in_flight: int | None = None
    requests: int | None = None
    duration_s: float | None = None
    warmup: int = 3
    # The measured requests send the warm-up prompts (the end of the seeded order, Workload.warmup_prompt): a
    # sweep's warm-up of a new server, which must not answer beforehand the prompts its points measure (a drafter
    # that keeps a corpus, SGLang's NGRAM, would draft them from those answers: orchestrator/sweep/corpus.py).
    warmup_prompts: bool = False
    max_tokens: int = 256
    # Send each prompt's own max_tokens where its file gives one (at most max_tokens): load.prompt_max_tokens.
    prompt_max_tokens: bool = False
    temperature: float = 0.0
    # A workload spec (builtin:NAME, synthetic:..., a path) or a WorkloadSource (a format, a category, a cap).
    prompts: str | WorkloadSource = "builtin:chat"
    ignore_eos: bool = False
    seed: int = 0
    # Processes that share the load (orchestrator/load/workers.py): one clock, one merged result.
    workers: int = 1
    connect_timeout: float = 10.0
    first_token_timeout: float = 300.0
    total_timeout: float = 900.0
    # Seconds without a byte mid-stream before the request counts as stalled; None leaves it to the others.
    idle_timeout: float | None = None
    api_key: str | None = field(default=None, repr=False)
    stream: bool = True
    # Ask OpenAI-style servers for usage in every chunk (vLLM, SGLang): exact tokens per chunk.
    continuous_usage: bool = True
    # More top-level request-body fields, e.g. ``engine_request_extras(engine, api)``; JSON values only.
    extra_body: Mapping[str, Any] = field(default_factory=dict, hash=False)
    # Adaptive stopping (orchestrator/load/adaptive.py): stop once the interval of ``until_figure`` is within
    # ``until_rel_ci`` of it (at least ``until_min_requests`` requests; ``requests``/``duration_s`` cap it).
    until_rel_ci: float | None = None
    until_figure: str = "output_tok_s"
    until_min_requests: int = 16
    until_level: float = 0.95

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise LoadError(f"load: the server URL must look like http://host:port, got {self.url!r}")
        if self.api not in API_PATHS:
            raise LoadError(f"load: unknown api {self.api!r}; choose one of {', '.join(API_PATHS)}")
        if self.rate is None and self.concurrency is None:
            raise LoadError("load: set a concurrency (closed loop) or a rate (open loop)")
        _positive_int("concurrency", self.concurrency)
        _positive_int("max_in_flight", self.max_in_flight)
        _positive_int("requests", self.requests)
        _positive_int("max_tokens", self.max_tokens)
        _positive_int("workers", self.workers)
        if self.rate is not None and not (self.rate > 0 and math.isfinite(self.rate)):
            raise LoadError(f"load: rate must be a positive number of requests per second, got {self.rate!r}")
        if self.warmup < 0:
            raise LoadError(f"load: warmup cannot be negative, got {self.warmup}")
        if self.temperature < 0:
            raise LoadError(f"load: temperature cannot be negative, got {self.temperature}")
        for name in ("duration_s", "connect_timeout", "first_token_timeout", "total_timeout", "idle_timeout"):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise LoadError(f"load: {name} must be a positive number of seconds, got {value!r}")
        if self.until_rel_ci is not None:
            if not 0 < self.until_rel_ci < 1:
                raise LoadError(f"load: until_rel_ci must be between 0 and 1, got {self.until_rel_ci!r}")
            if self.requests is None and self.duration_s is None:
                raise LoadError("load: adaptive stopping needs a cap: requests and/or duration_s")
        self._check_extra_body()

    def _check_extra_body(self) -> None:
        extra = self.extra_body
        if not isinstance(extra, Mapping):
            raise LoadError(f"load: extra_body must be a mapping of body fields, got {type(extra).__name__}")
        bad = [key for key in extra if not isinstance(key, str)]
        if bad:
            raise LoadError(f"load: extra_body field names must be strings, got {bad[0]!r}")
        clash = sorted(set(extra) & _OWN_FIELDS[self.api])
        if clash:
            raise LoadError(
                f"load: extra_body cannot set {', '.join(clash)}: the load client sets them for api {self.api!r}"
            )
        try:
            json.dumps(dict(extra), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise LoadError(f"load: extra_body must hold JSON values only ({exc})") from None
        # A read-only copy: the settings are frozen, and the caller's dict may change afterwards.
        object.__setattr__(self, "extra_body", MappingProxyType(dict(extra)))

    @property
    def open_loop(self) -> bool:
        return self.rate is not None

    @property
    def in_flight_cap(self) -> int | None:
        """The most requests in flight at once (None: no cap, open loop only)."""
        if self.open_loop:
            return self.max_in_flight or self.concurrency
        return self.concurrency

    @property
    def request_budget(self) -> int | None:
        """How many measured requests to send (None: until ``duration_s``)."""
        if self.requests is not None:
            return self.requests
        if self.duration_s is not None:
            return None
        return max(16, 4 * (self.concurrency or 4))

    @property
    def endpoint(self) -> str:
        """The full URL of the API's request path (a base URL ending in /v1 is not doubled)."""
        base = self.url.rstrip("/")
        path = API_PATHS[self.api]
        if path.startswith("/v1/") and base.endswith("/v1"):
            base = base[: -len("/v1")]
        return base + path

    @property
    def base_url(self) -> str:
        base = self.url.rstrip("/")
        return base[: -len("/v1")] if base.endswith("/v1") else base


def _positive_int(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise LoadError(f"load: {name} must be a whole number of at least 1, got {value!r}")
