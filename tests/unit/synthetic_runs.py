"""Runs made of known figures, for tests of what is computed and shown from a run (the answer, tables, figures):
one successful point appended at a time, every figure given, so the test knows the ranking it should see."""

from __future__ import annotations

from typing import Any

from orchestrator.runs.store import Record, RunStore

__all__ = ["append_point", "plan_of"]


def plan_of(
    configs: list[tuple[str, dict[str, Any], bool]],
    loads: list[int],
    command: Any = None,
) -> dict[str, Any]:
    """plan.json of ``configs`` ((variant, params, baseline) each, configuration ``i`` as :func:`append_point`
    names it) at the concurrencies ``loads``; ``command(params)`` gives each deployment's server command."""
    return {
        "deployments": [
            {
                "id": f"d-{i}",
                "variant": variant,
                "params": params,
                "baseline": baseline,
                "config_hash": f"c-{i}",
                **({"command": command(params)} if command is not None else {}),
                "load_points": [
                    {"id": f"p-{i}-{c}-1", "mode": "concurrency", "concurrency": c, "rate": None} for c in loads
                ],
            }
            for i, (variant, params, baseline) in enumerate(configs)
        ]
    }


def append_point(
    store: RunStore,
    experiment: str,
    *,
    index: int,
    variant: str,
    params: dict[str, Any],
    load: int,
    repeat: int,
    tok_s: float,
    baseline: bool,
    rel_se: float = 0.001,
    requests: int = 64,
    server: dict[str, Any] | None = None,
) -> None:
    """Append an ``ok`` point of configuration ``index`` (its deployment and hash are named by it) at concurrency
    ``load``: ``tok_s`` output tok/s with a standard error of ``rel_se`` of it, per-user figures to match."""
    store.append(
        Record(
            run_id=store.run_id,
            experiment=experiment,
            deployment_id=f"d-{index}",
            point_id=f"p-{index}-{load}-{repeat}",
            config_hash=f"c-{index}",
            host="gpu-box",
            variant=variant,
            params=params,
            mode="concurrency",
            concurrency=load,
            repeat=repeat,
            status="ok",
            started_at="2026-01-01T00:00:00Z",
            finished_at="2026-01-01T00:00:10Z",
            baseline=baseline,
            client={
                "requests": requests,
                "output_tok_s": tok_s,
                "output_tok_s_se": tok_s * rel_se,
                "per_user_tok_s": tok_s / load,
                "per_user_tok_s_se": tok_s / load * rel_se,
                "ttft_ms_p50": 20.0 * load,
                "itl_ms_p50": 10.0,
            },
            server=server,
        )
    )
