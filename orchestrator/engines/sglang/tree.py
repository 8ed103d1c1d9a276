"""SGLang's draft trees and chains: the shape a command asks for, the shape a server runs, and the rules SGLang
applies to it at start-up.

EAGLE, EAGLE3 and STANDALONE (``--speculative-algorithm``; STANDALONE drives a separate draft model,
``--speculative-draft-model-path``, through EAGLE's tree machinery) draft a tree of ``--speculative-num-steps``
S levels (the depth), keep ``--speculative-eagle-topk`` K branches per level, and verify
``--speculative-num-draft-tokens`` N tokens of it (the budget: the root plus N - 1 drafts). A chain is K = 1,
N = S + 1. The names here, ``depth``, ``topk`` and ``budget``, are the experiment file's vocabulary for them
(sweeps/sglang-tree-cpu.yaml); the same words serve a GPU host's EAGLE, EAGLE3 or STANDALONE sweep.

The rules, from SGLang 0.5.23's own source (``sglang/srt/arg_groups/speculative_hook.py`` and
``sglang/srt/speculative/eagle_utils.py``):

- ``_handle_eagle_family``: with K = 1 a budget other than S + 1 is *silently changed* to S + 1 ("speculative_num_
  draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"): the configuration
  measured would not be the one written, so validate refuses it.
- ``organize_draft_results``: the tree's candidates are K at the first level and K * K at each later one
  (``score_list``: K + (S - 1) * K * K), and the N - 1 best are chosen with ``torch.topk``; a budget above
  that many candidates plus the root fails on the first verify step, not at start-up.
- ``_handle_eagle_family``: K > 1 with a page size above 1 needs flashinfer, fa3 or triton attention.
- STANDALONE needs a draft model; SGLang's auto-chosen shape for it, when S, K and N are all absent, is (3, 1, 4)
  (``_auto_choose_speculative_params``); specsweep asks for the three to be written, so the sweep's figures
  carry the shape they measured.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TREE_ALGORITHMS", "TreeShape", "shape_problems"]

#: The algorithms that draft EAGLE's trees (speculative/spec_info.py SpeculativeAlgorithm; NEXTN is EAGLE's alias).
TREE_ALGORITHMS = ("EAGLE", "EAGLE3", "STANDALONE", "NEXTN")

_FLAG = re.compile(r"--(speculative[-_][a-z0-9_-]+|model[-_]path|page[-_]size|attention[-_]backend)(?:=|\s+)(\S+)")


def _words(command: str) -> dict[str, str]:
    """Each ``--flag value`` of a command line (the last one wins, as argparse does), names with ``_``."""
    found: dict[str, str] = {}
    for match in _FLAG.finditer(command):
        found[match.group(1).replace("-", "_")] = match.group(2).strip("'\"")
    return found


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


@dataclass(frozen=True)
class TreeShape:
    """One tree or chain: the algorithm, depth S, top-k K, budget N, the draft model and the target model."""

    algorithm: str
    depth: int | None
    topk: int | None
    budget: int | None
    draft_model: str | None = None
    model: str | None = None

    @property
    def chain(self) -> bool:
        return self.topk == 1

    @property
    def self_draft(self) -> bool:
        """The target itself is the draft (its acceptance is the model's own: golden.py)."""
        if not self.draft_model or not self.model:
            return False
        return os.path.normpath(self.draft_model) == os.path.normpath(self.model)

    @property
    def label(self) -> str:
        kind = "chain" if self.chain else "tree"
        return f"{kind}(depth={self.depth}, topk={self.topk}, budget={self.budget})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "depth": self.depth,
            "topk": self.topk,
            "budget": self.budget,
            "draft_model": self.draft_model,
            "self_draft": self.self_draft,
        }

    @classmethod
    def from_command(cls, command: str) -> TreeShape | None:
        """The shape a server command asks for; None when it asks for no tree algorithm."""
        words = _words(command)
        algorithm = (words.get("speculative_algorithm") or "").upper()
        if algorithm not in TREE_ALGORITHMS:
            return None
        return cls(
            algorithm,
            _int(words.get("speculative_num_steps")),
            _int(words.get("speculative_eagle_topk")),
            _int(words.get("speculative_num_draft_tokens")),
            words.get("speculative_draft_model_path"),
            words.get("model_path"),
        )

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None) -> TreeShape | None:
        """The shape a running server reports (``/server_info``'s server arguments, as resolved at start-up)."""
        if not isinstance(settings, Mapping):
            return None
        algorithm = settings.get("speculative_algorithm")
        if not isinstance(algorithm, str) or algorithm.upper() not in TREE_ALGORITHMS:
            return None
        draft, model = settings.get("speculative_draft_model_path"), settings.get("model_path")
        return cls(
            algorithm.upper(),
            _int(settings.get("speculative_num_steps")),
            _int(settings.get("speculative_eagle_topk")),
            _int(settings.get("speculative_num_draft_tokens")),
            draft if isinstance(draft, str) else None,
            model if isinstance(model, str) else None,
        )


def candidates(depth: int, topk: int) -> int:
    """The tree's draft candidates: K at the first level, K * K at each later one (eagle_utils.py)."""
    return topk + (depth - 1) * topk * topk


def shape_problems(command: str) -> list[str]:
    """Why SGLang would refuse this command's tree, or silently run another one; empty when it runs as written."""
    words = _words(command)
    shape = TreeShape.from_command(command)
    if shape is None:
        return []
    problems: list[str] = []
    if shape.depth is None:
        given = [
            flag
            for flag, value in (
                ("--speculative-eagle-topk", shape.topk),
                ("--speculative-num-draft-tokens", shape.budget),
            )
            if value is not None
        ]
        if given:
            problems.append(
                f"{shape.algorithm} with {' and '.join(given)} but no --speculative-num-steps: SGLang refuses it at "
                "start-up (speculative_hook.py _handle_eagle_family asserts that all three are set or none); write "
                "depth, topk and budget"
            )
        # None of the three: SGLang chooses the tree (_auto_choose_speculative_params); the served one is read back.
        return problems
    if shape.topk is None or shape.budget is None:
        return problems  # SGLang's defaults for the rest; the tree it serves is read back from /server_info
    depth, topk, budget = shape.depth, shape.topk, shape.budget
    assert depth is not None and topk is not None and budget is not None
    if depth < 1 or topk < 1 or budget < 2:
        problems.append(
            f"depth {depth}, topk {topk}, budget {budget}: a tree needs depth >= 1, topk >= 1 and a budget of at "
            "least 2 (the root and one draft)"
        )
        return problems
    if topk == 1 and budget != depth + 1:
        problems.append(
            f"a chain (topk 1) of depth {depth} verifies {depth + 1} tokens: SGLang would silently change budget "
            f"{budget} to {depth + 1} (speculative_hook.py _handle_eagle_family); write budget {depth + 1}"
        )
    if topk > 1 and budget - 1 > candidates(depth, topk):
        problems.append(
            f"budget {budget} is more than the tree of depth {depth} and topk {topk} holds: {candidates(depth, topk)} "
            f"draft candidates plus the root (eagle_utils.py organize_draft_results takes the budget's N - 1 best; "
            f"torch.topk fails on the first verify step); use a budget of at most {candidates(depth, topk) + 1}"
        )
    page = _int(words.get("page_size"))
    backend = words.get("attention_backend")
    if topk > 1 and page is not None and page > 1 and backend not in ("flashinfer", "fa3", "triton"):
        problems.append(
            f"topk {topk} with page size {page} needs the flashinfer, fa3 or triton attention backend "
            f"(speculative_hook.py _handle_eagle_family); got {backend or 'the default'}"
        )
    if shape.algorithm == "STANDALONE" and not shape.draft_model:
        problems.append("STANDALONE needs its draft model: --speculative-draft-model-path")
    return problems
