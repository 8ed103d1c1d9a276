"""Server-side metrics: parsers from engine text to typed samples, and per-window aggregation.

    parse_window(engine, text, user_parsers)   journal / log text of one window -> WindowMetrics
    scrape_delta(before, after, engine)        two /metrics scrapes -> PromWindow (counters by difference)
    response_figures(responses)                per-response metadata -> figures
    compare_sources({name: source, ...})       disagreement between the sources, per figure

Engines: ``sglang``, ``sim`` (SGLang's formats), ``vllm``, ``llamacpp``; ``DDTREE metrics:`` lines for all.
No parser raises on arbitrary text: what it cannot read it skips and counts.

The names, formats and formulas read here, with their engine source files: docs/engines.md.
"""

from orchestrator.engines.samples import Sample
from orchestrator.engines.userregex import UserParser, compile_user_parsers
from orchestrator.metrics.compare import compare_sources, response_figures
from orchestrator.metrics.prometheus import PromWindow, parse_exposition, scrape_delta
from orchestrator.metrics.window import WindowMetrics, parse_window

__all__ = [
    "PromWindow",
    "Sample",
    "UserParser",
    "WindowMetrics",
    "compare_sources",
    "compile_user_parsers",
    "parse_exposition",
    "parse_window",
    "response_figures",
    "scrape_delta",
]
