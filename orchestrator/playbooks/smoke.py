"""The smoke test: a few requests to the server as it runs now, nothing deployed, nothing changed.

It answers "does the current unit serve?" before a sweep touches it. When the requests fail, the service's
state on the host (read only) says why: a stopped unit and a broken one look alike from the client side.
"""

from __future__ import annotations

import contextlib
from typing import Any

from orchestrator.errors import SpecsweepError
from orchestrator.experiment import Experiment, LocalHostSpec, SSHHostSpec
from orchestrator.hosts import connect_host
from orchestrator.playbooks.expectations import OutcomeStatus, format_number
from orchestrator.runner import StopSignal, _point_settings, _run_async_load
from orchestrator.services import make_service

__all__ = ["smoke_test"]


def _service_state(experiment: Experiment, spec: SSHHostSpec | LocalHostSpec) -> str:
    host: Any = None
    try:
        host = connect_host(spec)
        return make_service(experiment, host).state().describe()
    except SpecsweepError as exc:
        return f"unknown ({exc})"
    finally:
        if host is not None:
            with contextlib.suppress(Exception):
                host.close()


def smoke_test(
    experiment: Experiment, spec: SSHHostSpec | LocalHostSpec, requests: int, stop: StopSignal
) -> tuple[OutcomeStatus, str, list[str]]:
    """(status, detail, evidence) of ``requests`` sequential requests to the experiment's server on ``spec``."""
    url = experiment.server_url(spec)
    settings = _point_settings(experiment, url, None, concurrency=1, requests=requests)
    try:
        result = _run_async_load(settings, stop, None)
    except SpecsweepError as exc:
        return "fail", f"{url}: the load generator could not run: {exc}", []
    figures = result.figures
    completed = int(figures.get("completed") or 0)
    if completed == requests:
        ttft = (figures.get("ttft_ms") or {}).get("p50")
        detail = (
            f"{url}: {completed}/{requests} answered, {figures.get('output_tokens')} tokens, "
            f"{format_number(figures.get('output_tok_s'))} tok/s, TTFT p50 {format_number(ttft)} ms"
        )
        return "pass", detail, []
    errors = [f"{r.error_kind}: {r.error}" for r in result.records if r.error_kind is not None]
    state = _service_state(experiment, spec)
    name = getattr(experiment.service, "unit", None) or "the service"
    detail = f"{url}: {completed}/{requests} answered; {name} is {state}"
    return "fail", detail, errors[:5]
