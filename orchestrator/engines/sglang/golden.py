"""A golden accept length for SGLang's self-drafted chains: what the model itself says a verify step accepts.

With the target as its own STANDALONE draft, which drafts verification accepts is decided by the model alone
(selfdraft_probe.py says why: the draft sees the sequence rotated left by one). The probe, run by the engine's
own Python, gives per output position whether the draft's proposal equals the greedy token; :func:`chain_steps`
walks a chain of S drafts over that agreement, as SGLang's verify does (``verify_tree_greedy``: the longest
accepted prefix of the chain, then the bonus token), and gives every verify step's accepted drafts. Over a
request that is the number of verify steps and the histogram of accepted drafts that SGLang reports per response
(``meta_info.spec_verify_ct`` and ``spec_correct_drafts_histogram``, counting drafts past the request's end, as
SGLang's own do); over a point, the accept length.

A tree of top-k > 1 re-selects its branches at every level by cumulative draft score (``select_top_k_tokens``),
which this walk does not model: its golden figure is the chain's at the same depth, given as a reference, not a
prediction.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PROBE", "GoldenRequest", "chain_steps", "compare_request", "point_golden", "run_probe"]

#: The standalone script the engine's Python runs (it imports torch and transformers, never orchestrator).
PROBE = Path(__file__).with_name("selfdraft_probe.py")


def chain_steps(agree: Sequence[bool], tokens: int, depth: int) -> list[int]:
    """Accepted drafts of each verify step of a chain of ``depth`` drafts over ``tokens`` output tokens.

    Position 0 is the prefill's token. A step at ``committed`` tokens proposes positions ``committed`` to
    ``committed + depth - 1`` and accepts their longest agreeing prefix, then commits that plus the bonus token.
    Drafts past the request's end count, as SGLang counts them (the request ends within that step); agreement not
    known past the probe's tokens counts as a rejection."""
    if depth < 1:
        raise ValueError(f"a chain has at least one draft, not {depth}")
    steps: list[int] = []
    committed = 1
    while committed < tokens:
        accepted = 0
        while accepted < depth and committed + accepted < len(agree) and agree[committed + accepted]:
            accepted += 1
        steps.append(accepted)
        committed += accepted + 1
    return steps


@dataclass
class GoldenRequest:
    """One request's prediction: the steps, and what it takes to compare them with the response's figures."""

    key: str
    tokens: int
    steps: list[int]
    output_ids: list[int] = field(default_factory=list)

    @property
    def verify_steps(self) -> int:
        return len(self.steps)

    def histogram(self, depth: int) -> list[int]:
        counts = [0] * (depth + 1)
        for accepted in self.steps:
            counts[accepted] += 1
        return counts


def compare_request(golden: GoldenRequest, spec: Mapping[str, Any] | None, depth: int) -> str | None:
    """Where one response's figures part from the model's prediction, or None when they agree: its verify steps,
    then its histogram of accepted drafts per step (the first count of accepted drafts that differs)."""
    if not isinstance(spec, Mapping):
        return "the response carried no speculative figures"
    steps = spec.get("verify_steps")
    if steps != golden.verify_steps:
        return f"{steps} verify steps where the model predicts {golden.verify_steps} ({_steps(golden.steps)})"
    measured = spec.get("accepted_histogram")
    if isinstance(measured, list) and measured:
        predicted = golden.histogram(depth)
        width = max(len(measured), len(predicted))
        measured = list(measured) + [0] * (width - len(measured))
        predicted = predicted + [0] * (width - len(predicted))
        for accepted, (got, want) in enumerate(zip(measured, predicted, strict=True)):
            if got != want:
                return (
                    f"{got} steps accepted {accepted} drafts where the model predicts {want} "
                    f"(steps {_steps(golden.steps)})"
                )
    return None


def _steps(steps: Sequence[int]) -> str:
    shown = " ".join(str(s + 1) for s in steps[:24])
    return f"accept lengths {shown}" + (" ..." if len(steps) > 24 else "")


def run_probe(
    python: str, model: str, requests: list[dict[str, Any]], *, timeout_s: float = 900.0
) -> list[dict[str, Any]]:
    """Run the probe with the engine's Python (``python``: a shell word list, expanded by ``sh`` as the service
    command's paths are) over ``requests``; the answers, one per request. Raises RuntimeError with the probe's own
    last lines when it fails."""
    job = json.dumps({"model": model, "requests": requests})
    script = f"exec {python} {shlex.quote(str(PROBE))}"
    try:
        done = subprocess.run(
            ["sh", "-c", script], input=job, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the self-draft probe did not finish in {timeout_s:.0f} s") from None
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])[-600:]
        raise RuntimeError(f"the self-draft probe failed (exit {done.returncode}): {tail}")
    answers = []
    for line in done.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            answers.append(json.loads(line))
    return answers


def _key(request: Mapping[str, Any]) -> str:
    return json.dumps([request.get("messages"), request.get("text"), request.get("tokens")], sort_keys=True)


def point_golden(shape: Any, requests: list[dict[str, Any]], python: str, cache: dict[str, Any]) -> dict[str, Any]:
    """The golden block of one self-drafted point (``shape``: tree.TreeShape): the accept length the model predicts
    over the point's successful requests beside the one their responses give, and where they first part.

    A chain (top-k 1) is predicted step by step; a tree's golden figure is its chain's at the same depth, a
    reference (the module docstring says why). Each distinct prompt and output length is probed once per run
    (``cache``)."""
    depth = shape.depth
    block: dict[str, Any] = {"kind": "chain" if shape.chain else "tree_chain_reference", "depth": depth}
    usable = [r for r in requests if isinstance(r.get("tokens"), int) and r["tokens"] >= 1]
    if not depth or not usable:
        block["skipped"] = "no depth" if not depth else "no successful request to predict"
        return block
    # Probe a few tokens past each end: the last verify step's drafts there count (SGLang's own counts do).
    wanted = [{**r, "tokens": int(r["tokens"]) + depth + 1} for r in usable]
    missing = [w for w in wanted if _key(w) not in cache]
    started = time.monotonic()
    if missing:
        model = shape.model
        if not model:
            block["skipped"] = "the server named no model folder"
            return block
        probe = [
            {"key": _key(w), "messages": w.get("messages"), "text": w.get("text"), "tokens": w["tokens"]}
            for w in missing
        ]
        try:
            for answer in run_probe(python, model, probe):
                cache[str(answer["key"])] = answer
        except RuntimeError as exc:
            block["skipped"] = str(exc)
            return block
    block["probe_s"] = round(time.monotonic() - started, 3)
    committed = verify_golden = verify_measured = compared = 0
    differences: list[str] = []
    not_compared: list[str] = []
    for request, want in zip(usable, wanted, strict=True):
        cached = cache.get(_key(want))
        spec = request.get("spec")
        measured = spec.get("verify_steps") if isinstance(spec, Mapping) else None
        if not isinstance(cached, dict) or not isinstance(measured, int):
            # Not a difference: nothing to compare (no prediction, or a response without SGLang's per-request
            # figures, which need 0.5.19+ and return_spec_tokens_details).
            why = "the probe gave no answer" if not isinstance(cached, dict) else "its response carried no verify steps"
            not_compared.append(f"request {request['key']}: {why}")
            continue
        tokens = int(request["tokens"])
        golden = GoldenRequest(
            str(request["key"]), tokens, chain_steps([bool(a) for a in cached.get("agree") or []], tokens, depth)
        )
        compared += 1
        committed += tokens - 1
        verify_golden += golden.verify_steps
        verify_measured += measured
        if shape.chain:
            where = compare_request(golden, spec, depth)
            if where is not None:
                differences.append(f"request {request['key']}: {where}")
    if not compared:
        block["skipped"] = "no request could be compared: " + "; ".join(not_compared[:3])
        return block
    block.update(
        requests=compared,
        not_compared=not_compared[:5] or None,
        committed_tokens=committed,
        verify_steps=verify_golden,
        accept_len=round(committed / verify_golden, 6) if verify_golden else None,
        measured_verify_steps=verify_measured,
        measured_accept_len=round(committed / verify_measured, 6) if verify_measured else None,
    )
    if shape.chain:
        block["agree"] = not differences
        block["differences"] = differences[:5]
        block["first_difference"] = differences[0] if differences else None
        block["requests_differing"] = len(differences)
    return block
