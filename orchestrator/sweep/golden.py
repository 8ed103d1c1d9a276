"""A point's golden figures: what the model itself predicts for it, beside what the engine reported.

Where the engine can say (``Engine.golden``; SGLang's STANDALONE with the target as its own draft,
orchestrator/engines/sglang/golden.py), the point's successful requests, with the prompts the load sent them
(the point's workload and seed, request by request) and the output lengths their responses had, go to the
engine's own Python (``checks.golden_python``), which runs the model over them; the record keeps the block as
``server.golden`` and the analysis holds every self-drafted chain to it (``golden`` check). The engine's tree
shape, as configured and as served, is kept as ``server.spec_shape`` for every point.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from orchestrator.engines.registry import get_engine
from orchestrator.load import LoadSettings
from orchestrator.load.workloads import load_workload

__all__ = ["golden_requests", "point_golden", "point_shape"]


def point_shape(engine: str, command: str, settings: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The tree or chain the deployment asked for and the one the server runs (None without one)."""
    return get_engine(engine).spec_shape(command, settings)


def golden_requests(requests: Iterable[Any], settings: LoadSettings) -> list[dict[str, Any]]:
    """The point's successful measured requests as the golden probe reads them: the prompt each was sent (the
    point's workload, its seed and the request's index, as load/run.py chose it), its output length and the
    speculative figures of its response."""
    workload = load_workload(settings.prompts, seed=settings.seed)
    chosen = workload.warmup_prompt if settings.warmup_prompts else workload.prompt
    found = []
    for request in requests:
        if getattr(request, "warmup", False) or not getattr(request, "ok", False) or not request.output_tokens:
            continue
        prompt = chosen(request.index)
        spec = request.spec.to_dict() if request.spec is not None else None
        found.append(
            {
                "key": str(request.index),
                "messages": prompt.as_messages() if settings.api == "chat" else None,
                "text": None if settings.api == "chat" else prompt.as_text(),
                "tokens": int(request.output_tokens),
                "spec": spec,
            }
        )
    return found


def point_golden(
    engine: str,
    command: str,
    settings: Mapping[str, Any] | None,
    requests: Iterable[Any],
    load: LoadSettings,
    python: str | None,
    cache: dict[str, Any],
) -> dict[str, Any] | None:
    """The point's golden block, or None where there is none (no ``checks.golden_python``, or not a point the
    engine can predict)."""
    if not python:
        return None
    return get_engine(engine).golden(command, settings, golden_requests(requests, load), python, cache)
