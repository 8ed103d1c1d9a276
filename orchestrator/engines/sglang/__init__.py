"""SGLang: everything specsweep knows about it, each definition with the SGLang source file it comes from.

``log`` (the scheduler's ``Decode batch`` lines: parser and window aggregation), ``overshoot`` (the drafts
those lines count past a request's end), ``prometheus`` (the
tokenizer's counters and the scheduler's gauges), ``responses`` (``sglext.spec_tokens_details`` and
``meta_info``, and the request field that asks for them), ``simdialect`` (the simulator's imitation of it).
``ENGINE`` is SGLang as the registry gives it; ``SIM`` is specsweep's simulator, which speaks SGLang's formats
unless told otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.engines.base import ADDRESS, Call, Edges, EngineBase, WindowFigures

if TYPE_CHECKING:
    from orchestrator.engines.responses import ResponseFields
    from orchestrator.engines.samples import ParseResult
    from orchestrator.engines.starter import Starter
    from orchestrator.sim.dialects.base import Dialect

__all__ = ["ENGINE", "SIM", "SGLang"]


@dataclass(frozen=True)
class SGLang(EngineBase):
    """SGLang's formats (and the simulator's, which imitates them)."""

    def drafter_corpus(self, settings: Mapping[str, Any], command: str) -> str | None:
        """NGRAM keeps one corpus for all requests: speculative/ngram_worker.py ``_update_ngram_corpus`` inserts
        every request's verified tokens after each verify step and ``_prepare_for_speculative_decoding`` drafts
        from it for any request; only ``clear_cache_pool`` (called by managers/scheduler.py ``flush_cache``,
        i.e. ``/flush_cache``) empties it (0.5.23)."""
        if self.name != "sglang":  # the simulator's drafts come from its configured truth, not a corpus
            return None
        algorithm = settings.get("speculative_algorithm")
        if not isinstance(algorithm, str):
            found = _SPEC_ALGORITHM.search(command)
            algorithm = found.group(1) if found else None
        if algorithm is None or algorithm.upper() != "NGRAM":
            return None
        return (
            "SGLang's NGRAM drafter keeps one n-gram corpus for all requests (speculative/ngram_worker.py "
            "_update_ngram_corpus), emptied only by /flush_cache (managers/scheduler.py flush_cache -> "
            "clear_cache_pool)"
        )

    def command_problems(self, command: str) -> list[str]:
        """A draft tree or chain (EAGLE, EAGLE3, STANDALONE) that SGLang would refuse or silently change at
        start-up (tree.py, from arg_groups/speculative_hook.py and speculative/eagle_utils.py)."""
        from orchestrator.engines.sglang.tree import shape_problems

        return shape_problems(command)

    def spec_shape(self, command: str, settings: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The tree a deployment asked for (its command) and the one the server runs (``/server_info``'s
        resolved arguments: speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens)."""
        from orchestrator.engines.sglang.tree import TreeShape

        configured = TreeShape.from_command(command)
        served = TreeShape.from_settings(settings)
        if configured is None and served is None:
            return None
        keys = ("algorithm", "depth", "topk", "budget")
        agree = None
        if configured is not None and served is not None:
            agree = all(getattr(configured, k) == getattr(served, k) for k in keys)
        return {
            "configured": configured.to_dict() if configured is not None else None,
            "served": served.to_dict() if served is not None else None,
            "configured_label": configured.label if configured is not None else None,
            "served_label": served.label if served is not None else None,
            "agree": agree,
        }

    def golden(
        self,
        command: str,
        settings: Mapping[str, Any] | None,
        requests: list[dict[str, Any]],
        python: str,
        cache: dict[str, Any],
    ) -> dict[str, Any] | None:
        """A self-drafted STANDALONE point's accept length as the model predicts it (golden.py)."""
        if self.name != "sglang":
            return None
        from orchestrator.engines.sglang.golden import point_golden
        from orchestrator.engines.sglang.tree import TreeShape

        shape = TreeShape.from_settings(settings) or TreeShape.from_command(command)
        if shape is None or not shape.self_draft:
            return None
        return point_golden(shape, requests, python, cache)

    def version_from_log(self, text: str) -> str | None:
        """``0.5.12+`` when the log holds SGLang's start line in its dict form, ``server_args={...}``
        (entrypoints/engine.py ``_launch_subprocesses``: ``logger.info(f"server_args={_server_args_for_logging(
        server_args)}")`` in 0.5.22 and 0.5.23; ``logger.info(f"{server_args=}")``, ``server_args=ServerArgs(...)``,
        up to 0.5.11 at least): a version whose 'accept rate' counts drafts only (log.py DRAFTS_ONLY_SINCE).
        Not the simulator's."""
        if self.name != "sglang" or _DICT_START.search(text) is None:
            return None
        return "0.5.12+"

    def flush_cache(self, call: Call) -> tuple[bool, str | None] | None:
        from orchestrator.engines.sglang.control import flush_cache

        return flush_cache(call)

    def response_fields(self) -> ResponseFields:
        from orchestrator.engines.sglang.responses import FIELDS

        return FIELDS

    def starter(self, host: str) -> Starter:
        from orchestrator.engines.sglang.starter import sglang_starter, sim_starter

        return sim_starter(host) if self.name == "sim" else sglang_starter(host)

    def sim_dialect(self) -> type[Dialect]:
        from orchestrator.engines.sglang.simdialect import SGLangDialect

        return SGLangDialect

    def parse_log(self, text: str) -> ParseResult:
        from orchestrator.engines.sglang.log import parse_sglang

        return parse_sglang(text)

    def aggregate(self, result: ParseResult, *, edges: Edges, version: str | None) -> WindowFigures:
        from orchestrator.engines.sglang.log import DEFINITIONS, aggregate_sglang
        from orchestrator.engines.sglang.samples import SglangDecodeSample

        every = [s for s in result.samples if isinstance(s, SglangDecodeSample)]
        decode, dropped, kept = edges(every)
        figures = aggregate_sglang(decode, version=version, context=every)
        return WindowFigures(figures, dict(DEFINITIONS), dropped, kept)

    def derive_prometheus(self, window: Any, after: Any, generated: float | None, version: str | None) -> None:
        from orchestrator.engines.sglang.prometheus import derive

        derive(window, after, generated, version)

    def request_extras(self, api: str) -> dict[str, Any]:
        from orchestrator.engines.sglang.responses import request_extras

        return request_extras(api)

    def reconcile_log(self, window: Any, spec: Mapping[str, Any]) -> None:
        """SGLang's Decode line counts drafts accepted past a request's end (overshoot.py): less them where the
        responses say how many, else the log's figures are labelled bounded. Not the simulator's lines, which
        count only committed tokens."""
        if self.name != "sglang":
            return
        from orchestrator.engines.sglang.overshoot import correct_log

        correct_log(window, spec)


_DICT_START = re.compile(r"\bserver_args=\{'")
_SPEC_ALGORITHM = re.compile(r"--speculative[-_]algorithm[= ]+['\"]?([A-Za-z0-9_]+)")


def _sglang(name: str, summary: str) -> SGLang:
    from orchestrator.engines.sglang.log import MARKER
    from orchestrator.engines.sglang.prometheus import DEFINITIONS, PREFIX

    return SGLang(
        name=name,
        family="sglang",
        summary=summary,
        markers=(MARKER,),
        prometheus_prefix=PREFIX,
        prometheus_definitions=DEFINITIONS,
        # python/sglang/srt/entrypoints/http_server.py flush_cache (0.5.23)
        flush_path="/flush_cache",
        # /server_info (0.4.7 and later), /get_server_info before; the version under "version"
        health_paths=("/health", "/v1/models"),
        info_paths=("/server_info", "/get_server_info"),
        version_key="version",
        # python/sglang/srt/server_args.py field names worth keeping beside the version
        info_settings=(
            "model_path",
            "tp_size",
            "dp_size",
            "pp_size",
            "ep_size",
            "enable_dp_attention",
            "decode_log_interval",
            "enable_metrics",
            "speculative_algorithm",
            "speculative_draft_model_path",
            "speculative_num_steps",
            "speculative_eagle_topk",
            "speculative_num_draft_tokens",
            # 0.5.23: the draft length changes per batch (speculative/adaptive_runtime_state.py
            # activate_step_by_batch), so no one draft count per verify step (engines/sglang/prometheus.py)
            "speculative_adaptive",
        ),
        # http_server.py: uvicorn's own line once the socket is bound; _wait_and_warmup's line once it serves
        listening_patterns=(("uvicorn", re.compile(r"Uvicorn running on " + ADDRESS)),),
        ready_patterns=(("sglang", re.compile(r"The server is fired up and ready to roll!")),),
        # Once per process start: entrypoints/engine.py Engine._launch_subprocesses logs the server arguments
        # (0.5.23: logger.info(f"server_args={_server_args_for_logging(server_args)}"), a dict; 0.5.10:
        # logger.info(f"{server_args=}"), "server_args=ServerArgs(...)"), called once by http_server.py
        # launch_server before the scheduler processes start.
        start_patterns=(("sglang", re.compile(r"server_args=(?:ServerArgs\(|\{)")),),
        no_batch_schedule=(
            "SGLang takes no fixed draft length per batch size: its --speculative-adaptive with "
            "--speculative-adaptive-config (0.5.23) keys candidate step counts by batch size and picks among them "
            "by the acceptance it observes at run time, which is not this schedule; specsweep does not write it"
        ),
    )


ENGINE = _sglang("sglang", "SGLang (sglang.launch_server): Decode batch lines, sglang: metrics")
SIM = _sglang("sim", "specsweep's simulator (python -m orchestrator.sim), speaking SGLang's formats")
