"""The acceptance model: what one verify step commits under AR, a chain (linear) and a tree (DDTree).

The drafter proposes candidates ranked by its own probability at every depth. The target's true token at depth
``d`` sits at some rank among them: rank 1 with the drafter's top-1 accuracy at that depth, a higher rank
otherwise (``Drafter``). One verify step draws those ranks (``Draws``, lazily, so a chain and a tree can be
walked over the *same* draws) and walks the draft from the root along the truth: the walk goes one level
deeper while the true token is among the current node's children. The number of levels walked is the accepted
depth; the step commits the accepted drafts plus the bonus token the target always supplies, so an accept
length counts the bonus token as SGLang's does.

A linear draft of K tokens is the tree of one rank-1 child per level. A DDTree draft is built best-first under
a node budget from the drafter's path probabilities, keeping at most ``topk`` children per node and at most
``max_depth`` levels; with ``topk=1`` it is exactly the chain of ``min(budget, max_depth)`` drafts. A tree that
contains a chain can only walk at least as deep as the chain on the same draws.

The ``commit-bug`` fault reproduces the field report's DDTree bug: the walk reaches its depth and reports it,
but at most two tokens are committed.
"""

from __future__ import annotations

import functools
import heapq
import math
import random
from dataclasses import dataclass
from typing import NamedTuple

from orchestrator.errors import ConfigError

__all__ = [
    "Drafter",
    "Draws",
    "Speculator",
    "StepOutcome",
    "Tree",
    "build_tree",
    "chain_tree",
    "expected_accept_length",
    "expected_chain_accept_length",
]

MAX_DEPTH = 1024  # deepest draft the model supports (the per-depth accuracy table's length)


@dataclass(frozen=True)
class Drafter:
    """How good the drafter is: top-1 accuracy per depth and where the truth sits when top-1 is wrong."""

    top1_accuracy: float
    depth_decay: float = 1.0
    rank_share: float = 0.4

    def __post_init__(self) -> None:
        if not 0.0 <= self.top1_accuracy <= 1.0 or not 0.0 < self.depth_decay <= 1.0:
            raise ConfigError(f"bad drafter accuracy {self.top1_accuracy} / decay {self.depth_decay}")
        if not 0.0 < self.rank_share < 1.0:
            raise ConfigError(f"rank_share must be in (0, 1), not {self.rank_share}")

    def top1(self, depth: int) -> float:
        """P(the true token is the drafter's top-1 candidate at ``depth``), depth counted from 1."""
        return self.top1_accuracy * self.depth_decay ** (depth - 1)

    @functools.cached_property
    def top1_table(self) -> tuple[float, ...]:
        """``top1(d)`` for d = 1 .. MAX_DEPTH, at index d - 1 (the hot path reads this, not ``top1``)."""
        return tuple(self.top1(d) for d in range(1, MAX_DEPTH + 1))

    def rank_probability(self, depth: int, rank: int) -> float:
        """P(the true token is the drafter's rank-``rank`` candidate at ``depth``), rank counted from 1."""
        a = self.top1(depth)
        if rank == 1:
            return a
        return (1.0 - a) * self.rank_share * (1.0 - self.rank_share) ** (rank - 2)

    def at_temperature(self, temperature: float, penalty: float) -> Drafter:
        """The truth a sampled (temperature > 0) target draws from: top-1 agreement falls with temperature."""
        if temperature <= 0 or penalty <= 0:
            return self
        return _at_temperature(self, temperature, penalty)


@functools.lru_cache(maxsize=256)
def _at_temperature(drafter: Drafter, temperature: float, penalty: float) -> Drafter:
    # Cached: requests share a few temperatures, and each Drafter builds its accuracy table once.
    accuracy = drafter.top1_accuracy / (1.0 + penalty * temperature)
    return Drafter(accuracy, drafter.depth_decay, drafter.rank_share)


class Draws:
    """The sampled truth of one verify step: the rank of the true token at each depth, drawn on demand and
    remembered, so that several drafts can be walked over the same draws."""

    __slots__ = ("_log_miss", "_ranks", "_rng", "_top1")

    def __init__(self, drafter: Drafter, rng: random.Random) -> None:
        self._top1 = drafter.top1_table
        self._rng = rng
        self._log_miss = math.log(1.0 - drafter.rank_share)
        self._ranks: list[int] = []

    def rank(self, depth: int) -> int:
        """The rank (from 1) of the true token among the drafter's candidates at ``depth`` (from 1)."""
        ranks = self._ranks
        while len(ranks) < depth:
            a = self._top1[len(ranks)]
            u = self._rng.random()
            if u < a:
                ranks.append(1)
            else:
                # Reuse the same uniform: conditioned on a miss it is uniform on [a, 1).
                v = (u - a) / (1.0 - a)
                ranks.append(2 + int(math.log1p(-v) / self._log_miss))
        return ranks[depth - 1]


@dataclass(frozen=True)
class Tree:
    """A draft as a tree: node 0 is the root (the last committed token); ``children[i]`` maps a rank to the
    child node; ``depth[i]`` is a node's level (root 0). ``size`` counts drafted nodes, the root excluded."""

    children: tuple[dict[int, int], ...]
    depth: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.depth) - 1

    @property
    def max_depth(self) -> int:
        return max(self.depth)

    @property
    def greedy_depth(self) -> int:
        """The length of the rank-1 chain from the root that this tree contains."""
        node, length = 0, 0
        while 1 in self.children[node]:
            node = self.children[node][1]
            length += 1
        return length

    def walk(self, draws: Draws) -> int:
        """Walk from the root along the sampled truth; return the accepted depth (drafts accepted)."""
        children = self.children
        node, depth = 0, 0
        while True:
            kids = children[node]
            if not kids:
                return depth
            child = kids.get(draws.rank(depth + 1))
            if child is None:
                return depth
            node = child
            depth += 1


def build_tree(drafter: Drafter, budget: int, topk: int, max_depth: int) -> Tree:
    """The best-first tree of ``budget`` nodes by the drafter's path probability, at most ``topk`` children a
    node and ``max_depth`` levels. Ties go to the shallower node, then to the lower ranks, so it is
    deterministic; with ``topk=1`` it is the chain of ``min(budget, max_depth)`` nodes."""
    if budget < 0 or topk < 1 or max_depth < 0:
        raise ConfigError(f"bad tree shape budget={budget} topk={topk} max_depth={max_depth}")
    children: list[dict[int, int]] = [{}]
    depth = [0]
    # Heap entries: (-path probability, depth, ranks on the path, parent node, rank).
    heap: list[tuple[float, int, tuple[int, ...], int, int]] = []

    def push_children(parent: int, path_prob: float, path: tuple[int, ...]) -> None:
        level = len(path) + 1
        if level > max_depth:
            return
        for rank in range(1, topk + 1):
            prob = path_prob * drafter.rank_probability(level, rank)
            heapq.heappush(heap, (-prob, level, (*path, rank), parent, rank))

    push_children(0, 1.0, ())
    while heap and len(depth) - 1 < budget:
        neg_prob, level, path, parent, rank = heapq.heappop(heap)
        node = len(depth)
        children.append({})
        depth.append(level)
        children[parent][rank] = node
        push_children(node, -neg_prob, path)
    return Tree(children=tuple(children), depth=tuple(depth))


def chain_tree(length: int) -> Tree:
    """A linear draft of ``length`` tokens: one rank-1 child per level."""
    children: list[dict[int, int]] = [{1: i + 1} for i in range(length)]
    children.append({})
    return Tree(children=tuple(children), depth=tuple(range(length + 1)))


def expected_accept_length(tree: Tree, truth: Drafter) -> float:
    """E[tokens committed per step] = 1 + sum over nodes of P(the whole path to the node is accepted)."""
    path_prob = [1.0] * len(tree.depth)
    total = 1.0
    # Nodes are numbered after their parents, so one pass in order sees every parent first.
    for parent, kids in enumerate(tree.children):
        for rank, child in kids.items():
            path_prob[child] = path_prob[parent] * truth.rank_probability(tree.depth[child], rank)
            total += path_prob[child]
    return total


def depth_survival(tree: Tree, truth: Drafter) -> list[float]:
    """``P(accepted depth >= d)`` for d = 0 .. the tree's depth: the walk reaches depth d exactly when the path
    to one node at depth d is accepted, and those events are disjoint (one draw per level picks one rank)."""
    path_prob = [1.0] * len(tree.depth)
    survival = [0.0] * (tree.max_depth + 1)
    survival[0] = 1.0
    for parent, kids in enumerate(tree.children):
        for rank, child in kids.items():
            path_prob[child] = path_prob[parent] * truth.rank_probability(tree.depth[child], rank)
            survival[tree.depth[child]] += path_prob[child]
    return survival


def expected_steps(survival: list[float], tokens: int) -> list[float]:
    """``S[n]``, the expected verify steps that commit ``n`` tokens when each step commits ``depth + 1``
    tokens (depth distributed by ``survival``) and the last one is cut at what is left: ``S[0] = 0``,
    ``S[n] = 1 + sum over x < n of P(commit = x) S[n - x]``."""
    commit = [0.0] + [survival[d] - (survival[d + 1] if d + 1 < len(survival) else 0.0) for d in range(len(survival))]
    steps = [0.0] * (tokens + 1)
    for n in range(1, tokens + 1):
        steps[n] = 1.0 + sum(commit[x] * steps[n - x] for x in range(1, min(n, len(commit))))
    return steps


def expected_chain_accept_length(alpha: float, k: int) -> float:
    """Leviathan et al.: (1 - alpha^(k+1)) / (1 - alpha) for a constant per-position acceptance ``alpha``."""
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


class StepOutcome(NamedTuple):
    """One request's verify step: how deep the walk went, how many drafts and tokens it committed."""

    accepted_depth: int
    accepted_drafts: int
    commit_len: int


_AR_STEP = StepOutcome(0, 0, 1)


class Speculator:
    """One server configuration's drafting: ``ar``, ``linear`` (a chain of ``draft_tokens``) or ``ddtree``
    (a best-first tree of ``budget`` nodes, ``topk`` children, at most ``draft_tokens`` levels)."""

    def __init__(
        self,
        algorithm: str,
        drafter: Drafter,
        *,
        draft_tokens: int = 16,
        budget: int = 32,
        topk: int = 8,
        commit_bug: bool = False,
    ) -> None:
        self.algorithm = algorithm
        self.drafter = drafter
        self.tree: Tree | None
        if algorithm == "ar":
            self.tree = None
        elif algorithm == "linear":
            self.tree = chain_tree(draft_tokens)
        elif algorithm == "ddtree":
            self.tree = build_tree(drafter, budget, topk, draft_tokens)
        else:
            raise ConfigError(f"unknown algorithm {algorithm!r}")
        # The field report's bug lives in DDTree's commit path; chains commit correctly.
        self.commit_bug = commit_bug and algorithm == "ddtree"
        self.drafted = self.tree.size if self.tree is not None else 0
        self.draft_depth = self.tree.max_depth if self.tree is not None else 0
        self._outcomes = tuple(self.outcome(d) for d in range(self.draft_depth + 1))
        # A chain needs no ranks, only "is the truth the top-1 here": the same uniforms as ``Draws`` uses, so
        # the fast path walks exactly as ``Tree.walk`` would on the same generator.
        self._chain = algorithm == "linear"

    @property
    def speculative(self) -> bool:
        return self.tree is not None

    def step(self, truth: Drafter, rng: random.Random) -> StepOutcome:
        """Draw one step's truth from ``rng`` and walk the draft over it."""
        if self._chain:
            table = truth.top1_table
            rand = rng.random
            depth, k = 0, self.draft_depth
            while depth < k and rand() < table[depth]:
                depth += 1
            return self._outcomes[depth]
        if self.tree is None:
            return _AR_STEP
        return self._outcomes[self.tree.walk(Draws(truth, rng))]

    def outcome(self, depth: int) -> StepOutcome:
        """What the commit path makes of an accepted depth (where ``commit-bug`` bites)."""
        if self.commit_bug:
            return StepOutcome(depth, min(depth, 2), min(depth + 1, 2))
        return StepOutcome(depth, depth, depth + 1)
