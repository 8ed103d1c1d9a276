"""What one load run is asked to do: the target, the loop (closed or open), the workload and the timeouts.

``LoadSettings`` is a plain frozen dataclass so that the runner can build one per load point cheaply; it checks
itself on construction and raises :class:`~orchestrator.errors.LoadError` (never a bare ``ValueError``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from orchestrator.errors import LoadError

__all__ = ["API_PATHS", "Api", "LoadSettings"]

Api = Literal["chat", "completions", "generate", "llamacpp"]

# The request path of each API, relative to the server's base URL.
API_PATHS: dict[str, str] = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "generate": "/generate",  # SGLang's native API
    "llamacpp": "/completion",  # llama.cpp's native API
}


@dataclass(frozen=True, slots=True)
class LoadSettings:
    """One load point. ``rate`` set means open loop (Poisson arrivals), else closed loop at ``concurrency``.

    The run stops after ``requests`` measured requests or ``duration_s`` seconds, whichever comes first
    (``requests`` alone, if neither is given, defaults to 4 x concurrency, at least 16). In open loop,
    ``max_in_flight`` (or ``concurrency`` when that is set) caps the requests in flight.
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
    max_tokens: int = 256
    temperature: float = 0.0
    prompts: str = "builtin:chat"
    ignore_eos: bool = False
    seed: int = 0
    connect_timeout: float = 10.0
    first_token_timeout: float = 300.0
    total_timeout: float = 900.0
    # Seconds without a byte mid-stream before the request counts as stalled; None leaves it to the others.
    idle_timeout: float | None = None
    api_key: str | None = field(default=None, repr=False)
    stream: bool = True
    # Ask OpenAI-style servers for usage in every chunk (vLLM, SGLang): exact tokens per chunk.
    continuous_usage: bool = True

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
