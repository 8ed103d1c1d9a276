"""Drafters that learn across requests: whether a point's measured prompts met a corpus that already knew them.

Some drafters keep what they have seen across requests (SGLang's NGRAM: every verified token goes into one
corpus shared by all requests, :meth:`orchestrator.engines.base.EngineBase.drafter_corpus` says which and why).
The same prompts sent again then draft from their own earlier answers: on a real SGLang 0.5.23 the accept length
of a repeated set went from 1.63 to 3.23. A point measures the drafter only when its corpus did not hold these
prompts' answers: emptied before the point (``load.flush_cache``; SGLang's ``/flush_cache`` empties the corpus
too), with warm-up prompts distinct from the measured ones (the warm-up draws from the other end of the seeded
order, orchestrator/load/workloads.py) and no prompt sent twice in the point. :func:`corpus_note` says, per
point, whether that held and, if not, why; the record keeps it as ``server.drafter_corpus`` and the analysis
gives every point that did not as a finding (``drafter_corpus``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["corpus_note", "point_corpus"]


def point_corpus(
    engine: str,
    engine_info: Mapping[str, Any] | None,
    command: str,
    flush: Mapping[str, Any] | None,
    client: Mapping[str, Any],
    settings: Any,
    warmup: int = 0,
) -> dict[str, Any] | None:
    """:func:`corpus_note` for one measured point: the engine's word on its drafter (``engine_info`` settings,
    else the deployment's ``command``), the point's flush, the server's warm-up requests (``warmup``: the
    experiment's ``load.warmup``, sent once per deployment) and the point's own (its client's), its measured
    requests, and the distinct prompts of its workload (``settings``: the point's LoadSettings)."""
    from orchestrator.engines.registry import get_engine, is_engine
    from orchestrator.load.workloads import load_workload

    if not is_engine(engine):
        return None
    reported = (engine_info or {}).get("settings")
    reason = get_engine(engine).drafter_corpus(reported if isinstance(reported, Mapping) else {}, command)
    if reason is None:
        return None
    return corpus_note(
        reason,
        flush=flush,
        warmup=warmup + int(client.get("warmup_requests") or 0),
        requests=int(client.get("requests") or 0),
        distinct=load_workload(settings.prompts, settings.seed).size,
    )


def corpus_note(
    reason: str | None,
    *,
    flush: Mapping[str, Any] | None,
    warmup: int,
    requests: int,
    distinct: int,
) -> dict[str, Any] | None:
    """The point's ``drafter_corpus`` block, or None when the drafter keeps no corpus (``reason`` None).

    ``flush``: what emptying the cache before the point answered (None: not asked). ``warmup``/``requests``: the
    point's warm-up and measured requests. ``distinct``: the workload's distinct prompts (0: every prompt is new,
    a synthetic workload)."""
    if reason is None:
        return None
    flushed = bool(flush.get("ok")) if isinstance(flush, Mapping) else False
    issues: list[str] = []
    if not flushed:
        why = "load.flush_cache is off" if flush is None else f"emptying it was refused ({flush.get('note')})"
        issues.append(
            f"the corpus was not emptied before the point ({why}): it may hold this point's prompts and their "
            "answers from earlier requests to this server (earlier points, the warm-up of another point, the "
            "lossless check, an earlier run), and then measures them, not the drafter"
        )
    if distinct and warmup + requests > distinct:
        issues.append(
            f"{warmup} warm-up and {requests} measured requests over {distinct} distinct prompts: some prompt is "
            "sent twice in the point, the second time into a corpus that holds its first answer"
        )
    return {
        "keeps_corpus": reason,
        "flushed": flushed,
        "distinct_prompts": distinct or None,
        "clean": not issues,
        "note": "; ".join(issues) if issues else None,
    }
