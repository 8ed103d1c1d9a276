"""Agreement between the sources of one point's figures, each pair compared over one window.

Two figures are compared only over the same window, or their difference is the windows', not the sources'
(at a point of a real vLLM run the client's steady tok/s was 58% above the log's tok/s over its stats rounds,
while the client, ``/metrics`` and the log counted the same 441 tokens: bench/RESULTS-checks.md). The
windows, and where each comes from:

- **client**: every token of the point's measured, successful requests (``output_tokens``, from the
  responses' usage: orchestrator/load/stats.py); its window is the load, from the first dispatch to the last
  end (``duration_s``).
- **prometheus** (``/metrics``): the difference of the engine's generation-token counter between the scrape
  before the load and the one after its window closed (``prom_details_generated``; seconds ``prom_elapsed_s``:
  orchestrator/metrics/prometheus.py). The scrapes enclose the load, so it counts the same tokens.
- **journal** (vLLM): the window's stats rounds (orchestrator/engines/vllm/log.py). Its ``gen_throughput`` is
  the rounds' tokens over the rounds' seconds, so its tokens are ``gen_throughput`` x rounds x the round's
  length (``server_details_log_rounds`` x ``server_details_log_interval_s``, the median timed round, else
  VLLM_LOG_STATS_INTERVAL). Not the spec lines' seconds (``server_details_spec_seconds``): a spec line's clock
  runs since that engine's previous printed spec line, so the window's first one also spans the idle round
  before the load (4.0 s for a 2 s round at a real vLLM point, 25% more tokens than were generated). The
  window opens and closes on the engine's ticks (orchestrator/sweep/closing.py) and encloses the load.

Throughput is compared as these token counts, each with its stated bound (:func:`token_counts`): the
client's and the counter's are exact (integers; a failed request may have generated up to ``max_tokens``
tokens the client does not count); the journal's rounds print throughput with one decimal
(``GEN_HALF`` tok/s per engine over each second) and each round is taken as long as the median one while
the stats loop's delay makes one longer or shorter: ``UNTIMED_ROUND_SLACK`` of the tokens. Two counts disagree
only when they are further apart than the sum of their bounds.

An engine whose journal gives no window seconds (SGLang prints its gen throughput per decode interval, and
only while it decodes) is compared on rates over the busy window: the client's steady window (every worker
in flight) against the mean of the lines, within ``checks.client_server_tolerance``, with at least
``MIN_WINDOW_LINES`` lines. Accept length is counted over the same requests by every source (responses:
each measured response; the counters and the journal: windows that enclose the load), so it is compared
directly, within the same tolerance.

:func:`record_disagreements` shows what each record's own comparison of its sources (``server.sources``:
orchestrator/metrics/compare.py, rates at a 5% tolerance, each over its own window) flagged, with its size,
and for throughput the token counts that tell a window's difference from a source's.
:func:`accept_len_by_source` is the per-point table of accept length by source that the answer carries.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from orchestrator.analysis.roles import finite

__all__ = [
    "MIN_WINDOW_LINES",
    "SUMMED_COLUMNS",
    "UNTIMED_ROUND_SLACK",
    "AcceptLenSources",
    "TokenCount",
    "accept_len_by_source",
    "counts_agree",
    "disagreements",
    "record_disagreement_figures",
    "record_disagreements",
    "token_counts",
    "window_token_columns",
]

# Below this many metric lines in a window, its ramp-up and drain intervals dominate the server's throughput.
MIN_WINDOW_LINES = 8
#: vLLM prints 'Avg generation throughput' with one decimal (loggers.py: %.1f; engines/vllm/rounds.py GEN_HALF).
GEN_HALF = 0.05
#: How far a stats round may be from the median round (the loop's delay: vllm server_utils.py _force_log
#: sleeps the interval, then logs), as a share of the tokens. Real vLLM windows on a busy 2-core machine
#: came within 0.5% (bench/RESULTS-checks.md); 5% leaves room for a slower loop.
UNTIMED_ROUND_SLACK = 0.05
#: The sources' names as a reader knows them.
SOURCE_NAMES = {"journal": "log", "prometheus": "/metrics", "responses": "responses", "client": "client"}


@dataclass(frozen=True)
class TokenCount:
    """The output tokens one source counted over its window, within ``bound`` tokens either way (``extra``:
    tokens the server may have generated beyond the count, for requests the client lost)."""

    source: str
    tokens: float
    bound: float
    window_s: float | None
    window: str
    extra: float = 0.0


#: Each source's tokens over one window (and its seconds, bound and rounds), computed on each window's row
#: (orchestrator/analysis/frame.py) and added up over a point's windows where the analysis pools them
#: (repeats, load.decide's rounds: orchestrator/analysis/intervals.py), as the client's ``output_tokens`` is:
#: a point of several windows compares sums with sums, never one window's count with all windows' tokens.
SUMMED_COLUMNS = (
    "source_client_s",
    "source_prom_tokens",
    "source_prom_s",
    "source_journal_tokens",
    "source_journal_bound",
    "source_journal_s",
    "source_journal_rounds",
)


def window_token_columns(row: dict[str, Any]) -> dict[str, float | None]:
    """One window's :data:`SUMMED_COLUMNS` from its row's raw figures."""
    prom = finite(row.get("prom_details_generated"))
    journal = _journal_window(row)
    return {
        "source_client_s": finite(row.get("duration_s")),
        "source_prom_tokens": prom,
        "source_prom_s": finite(row.get("prom_elapsed_s")) if prom is not None else None,
        "source_journal_tokens": journal[0] if journal else None,
        "source_journal_bound": journal[1] if journal else None,
        "source_journal_s": journal[2] if journal else None,
        "source_journal_rounds": journal[3] if journal else None,
    }


def token_counts(row: dict[str, Any]) -> list[TokenCount]:
    """Each source's output tokens over its own window (see the module docstring for the windows), added up
    over the point's windows."""
    sums = row if "source_prom_tokens" in row else window_token_columns(row)
    out: list[TokenCount] = []
    client = finite(row.get("output_tokens"))
    if client is not None:
        failed = (finite(row.get("errors")) or 0) + (finite(row.get("cancelled")) or 0)
        cap = finite(row.get("max_tokens")) or 0
        duration = finite(sums.get("source_client_s"))
        out.append(TokenCount("client", client, 0.0, duration, "the load (first dispatch to last end)", failed * cap))
    generated = finite(sums.get("source_prom_tokens"))
    if generated is not None:
        elapsed = finite(sums.get("source_prom_s"))
        out.append(TokenCount("prometheus", generated, 0.0, elapsed, "the scrapes before and after the load"))
    tokens = finite(sums.get("source_journal_tokens"))
    if tokens is not None:
        seconds = finite(sums.get("source_journal_s"))
        rounds = finite(sums.get("source_journal_rounds")) or 0
        how = f"{rounds:.0f} stats rounds, {seconds or 0:.2f} s"
        out.append(TokenCount("journal", tokens, finite(sums.get("source_journal_bound")) or 0.0, seconds, how))
    return out


def _journal_window(row: dict[str, Any]) -> tuple[float, float, float, float] | None:
    """One window's (tokens, bound, seconds, rounds) from vLLM's stats rounds; None for another engine's log."""
    rate = finite(row.get("server_gen_throughput"))
    rounds = finite(row.get("server_details_log_rounds"))
    if rate is None or not rounds:
        return None  # not vLLM's rounds: the journal says nothing of its window's seconds
    # Each engine prints its own line a round (data-parallel engines: engines/vllm/log.py), each rounded.
    engines = max(1.0, math.ceil((finite(row.get("server_details_engine_lines")) or 0) / rounds))
    interval = finite(row.get("server_details_log_interval_s"))
    if not interval:
        return None
    seconds = rounds * interval
    tokens = rate * seconds
    bound = GEN_HALF * engines * seconds + UNTIMED_ROUND_SLACK * tokens
    return tokens, bound, seconds, rounds


def _has_journal_tokens(row: dict[str, Any]) -> bool:
    return any(count.source == "journal" for count in token_counts(row))


def token_disagreements(row: dict[str, Any]) -> list[tuple[TokenCount, TokenCount, float]]:
    """Pairs of token counts further apart than their bounds allow, with how far beyond them."""
    counts = token_counts(row)
    out: list[tuple[TokenCount, TokenCount, float]] = []
    for i, a in enumerate(counts):
        for b in counts[i + 1 :]:
            # The server side (a counter, the log) may hold the tokens of requests the client lost.
            low, high = (a, b) if a.source == "client" else (b, a) if b.source == "client" else (a, b)
            gap = high.tokens - low.tokens
            allowed_up = a.bound + b.bound + (low.extra if low.source == "client" else 0.0)
            allowed_down = a.bound + b.bound
            beyond = gap - allowed_up if gap > 0 else -gap - allowed_down
            if beyond > 1e-6:
                out.append((a, b, beyond))
    return out


def disagreements(row: dict[str, Any], tolerance: float) -> list[tuple[str, str]]:
    """``client_vs_server``: (message, metric-line pattern hint) for each pair of sources of this point that
    disagree beyond the stated bounds of their figures over one window (see the module docstring)."""
    out: list[tuple[str, str]] = []
    for a, b, beyond in token_disagreements(row):
        message = (
            f"output tokens disagree over one window: {_name(a.source)} {a.tokens:.0f} ({a.window}) against "
            f"{_name(b.source)} {b.tokens:.0f} ({b.window}), {abs(a.tokens - b.tokens):.0f} apart, "
            f"{beyond:.0f} beyond their bounds (±{a.bound:.0f}, ±{b.bound:.0f})"
        )
        out.append((message, "tokens"))
    pairs = [("accept length", "client_accept_len", "server_accept_len")]
    if finite(row.get("prom_details_drafts")):
        pairs.append(("accept length", "prom_accept_len", "server_accept_len"))
    if not _has_journal_tokens(row) and _busy_window_comparable(row):
        client = "steady_output_tok_s" if finite(row.get("steady_output_tok_s")) else "output_tok_s"
        pairs.append(("throughput over the busy window (tok/s)", client, "server_gen_throughput"))
    for what, left, right in pairs:
        a_value, b_value = finite(row.get(left)), finite(row.get(right))
        if a_value is None or b_value is None or max(a_value, b_value) <= 0:
            continue
        gap = abs(a_value - b_value) / max(a_value, b_value)
        if gap > tolerance:
            message = (
                f"{what} disagrees: {left} {a_value:.2f} against {right} {b_value:.2f} ({gap:.0%} apart, "
                f"checks.client_server_tolerance is {tolerance:.0%})"
            )
            out.append((message, "rates"))
    return out


def _busy_window_comparable(row: dict[str, Any]) -> bool:
    lines = finite(row.get("server_details_decode_lines"))
    if lines is None:
        lines = finite(row.get("server_lines_matched"))
    return lines is not None and lines >= MIN_WINDOW_LINES


def uncompared_throughput(row: dict[str, Any]) -> bool:
    """The server's throughput is there but no window lets it be compared with the client's."""
    if finite(row.get("server_gen_throughput")) is None:
        return False
    return not _has_journal_tokens(row) and not _busy_window_comparable(row)


def record_disagreements(row: dict[str, Any]) -> list[str]:
    """What this point's record flagged when it compared its sources (``server.sources.disagreements``), one
    sentence a figure with each source's value and the size of the disagreement; for throughput, also each
    source's window and the tokens it counted, which say whether the sources or only their windows differ."""
    return [sentence for _figure, sentence in record_disagreement_figures(row)]


def record_disagreement_figures(row: dict[str, Any]) -> list[tuple[str, str]]:
    """:func:`record_disagreements` with the figure each sentence is about."""
    out: list[tuple[str, str]] = []
    for figure, entry in _flagged(row).items():
        entry = entry if isinstance(entry, dict) else {}
        values = {s: v for s, v in (entry.get("values") or {}).items() if finite(v) is not None}
        size = finite(entry.get("max_rel_diff"))
        said = ", ".join(f"{_name(s)} {_num(v)}" for s, v in values.items())
        tol = finite(entry.get("rel_tol"))
        sentence = f"{figure}: {said}" + (f", {size:.1%} apart" if size is not None else "")
        sentence += f" (the record's tolerance {tol:.0%})" if tol is not None else ""
        if figure == "gen_throughput":
            sentence += _windows_said(row)
        out.append((str(figure), sentence))
    return out


def _flagged(row: dict[str, Any]) -> dict[str, Any]:
    """The figures this point's record flagged (``source_disagreements``), each with what it kept of them."""
    text = row.get("source_disagreements")
    if not isinstance(text, str):
        return {}
    try:
        flagged = json.loads(text)
    except ValueError:
        return {}
    return flagged if isinstance(flagged, dict) else {}


def counts_agree(row: dict[str, Any], figure: str) -> bool:
    """Whether a rate the record flagged (``figure``) differs only because each source measured it over its own
    window, the counts under it agreeing: for throughput, at least two sources' output tokens over their windows
    and none apart beyond their bounds (:func:`token_disagreements`); for another figure (the acceptance rate: a
    gauge of the last interval on /metrics, the window's on the log), at least two sources' accept lengths, each
    the same requests' tokens over their verify steps, and the record itself not flagging accept length. False
    where nothing counted says so: the rates' difference stays a finding of its own."""
    if figure == "gen_throughput":
        return len(token_counts(row)) >= 2 and not token_disagreements(row)
    sources = [s for s in ACCEPT_SOURCES if finite(row.get(f"source_{s}_accept_len")) is not None]
    return figure != "accept_len" and len(sources) >= 2 and "accept_len" not in _flagged(row)


def _windows_said(row: dict[str, Any]) -> str:
    counts = token_counts(row)
    if len(counts) < 2:
        return ""
    windows = ", ".join(f"{_name(c.source)} {c.window_s:.2f} s" for c in counts if c.window_s is not None)
    tokens = ", ".join(f"{_name(c.source)} {c.tokens:.0f} ± {c.bound:.0f}" for c in counts)
    verdict = "beyond their bounds (client_vs_server)" if token_disagreements(row) else "within their bounds"
    return f"; rates over different windows ({windows}); as tokens over each window: {tokens}, {verdict}"


def _name(source: str) -> str:
    return SOURCE_NAMES.get(source, source)


def _num(value: Any) -> str:
    number = float(value)
    return f"{number:.0f}" if number.is_integer() and abs(number) >= 100 else f"{number:.4g}"


# ---- accept length by source ---------------------------------------------------------------------------------

#: The sources of accept length, in the order a reader sees them.
ACCEPT_SOURCES = ("journal", "prometheus", "responses")
#: The frame's ``accept_len_source`` (orchestrator/analysis/frame.py) as a source of the records' comparison.
_USED = {"server": "journal", "client": "responses", "prometheus": "prometheus"}


@dataclass(frozen=True)
class AcceptLenSources:
    """One point's accept length from each source that has it, the one the answer reports (``used``), and the
    largest relative difference between them (None with fewer than two)."""

    host: str
    workload: str
    label: str
    load_label: str
    values: dict[str, float]
    used: str | None
    spread: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "workload": self.workload,
            "label": self.label,
            "load_label": self.load_label,
            "values": dict(self.values),
            "used": self.used,
            "spread": self.spread,
        }


def accept_len_by_source(rows: list[dict[str, Any]]) -> list[AcceptLenSources]:
    """Per measured point with an accept length from any source: each source's value (the record's
    ``server.sources`` comparison: the log's window, the counters' difference, the responses' own figures)."""
    out: list[AcceptLenSources] = []
    for row in rows:
        values: dict[str, float] = {}
        for source in ACCEPT_SOURCES:
            value = finite(row.get(f"source_{source}_accept_len"))
            if value is not None:
                values[source] = value
        if not values:
            continue
        spread = None
        if len(values) > 1:
            top, low = max(values.values()), min(values.values())
            # the same count divided in another order differs in its last bit: that is agreement, not a spread
            spread = (0.0 if top - low <= 1e-9 * top else (top - low) / top) if top > 0 else None
        used = _USED.get(str(row.get("accept_len_source")))
        out.append(
            AcceptLenSources(
                host=str(row.get("host")),
                workload=str(row.get("workload") or ""),
                label=str(row.get("label")),
                load_label=str(row.get("load_label")),
                values=values,
                used=used,
                spread=spread if spread is None or math.isfinite(spread) else None,
            )
        )
    return out
