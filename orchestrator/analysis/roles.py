"""What each configuration *is*, as far as the comparisons and checks need to know: which baseline is the
autoregressive one and which the linear chain, how long a chain is, whether a configuration is a tree (and its
budget and top-k), and what accept length a chain of a given length should reach.

Baseline roles (``baseline_roles``), from the experiment's ``baselines`` list, in two steps:

1. by name, case-insensitive: ``autoregressive`` or ``ar`` (alone or as the first word, ``ar-k26``) is the AR
   baseline; ``linear``, ``dflash`` or ``chain`` (alone or as the first word) is the linear baseline;
2. a role still empty takes the first baseline that has no role yet, in list order, AR first. So
   ``[autoregressive, linear]``, ``[ar, dflash16]`` and ``[vanilla, eagle-chain]`` all read as (AR, linear),
   and a single unnamed baseline is AR.

Chain length of a configuration (``chain_length``), in drafted tokens (the bonus token not counted):

1. the experiment's ``checks.linear_chain_length`` (for the linear baseline only), when set;
2. a parameter: ``chain_length``, ``draft_tokens``, ``draft_max``, ``num_speculative_tokens``,
   ``num_steps`` count drafts; ``num_draft_tokens`` / ``speculative_num_draft_tokens`` / ``block_size``
   count the block, whose first slot is the verified token, so drafts = value - 1;
3. the rendered command: ``--speculative-num-steps N`` (N), ``--speculative-num-draft-tokens N`` (N - 1,
   SGLang counts the root), ``--draft-tokens N`` (the simulator, N), ``--draft-max N`` (llama.cpp, N),
   ``"num_speculative_tokens": N`` (vLLM's ``--speculative-config``, N; its quotes may be backslash-escaped,
   ``\\"num_speculative_tokens\\": N``, as inside a double-quoted shell word).

A tree (``tree_shape``) is a configuration with a top-k and a node budget: parameters ``topk`` and ``budget``
(or the command flags ``--speculative-ddtree-topk``/``--speculative-eagle-topk``/``--topk`` and
``--speculative-ddtree-budget``/``--budget``). A top-k = 1 tree of budget B inside a drafter block of L drafts is
a chain of ``min(B, L)`` drafts (DOMAIN.md).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

__all__ = [
    "BaselineRoles",
    "TreeShape",
    "annotate",
    "baseline_roles",
    "chain_accept_len",
    "chain_length",
    "expected_chain_range",
    "finite",
    "fit_acceptance",
    "is_speculative",
    "row_params",
    "speculative_configs",
    "tree_shape",
]

_AR_NAMES = {"autoregressive", "ar"}
_LINEAR_NAMES = {"linear", "dflash", "chain"}
_WORD = re.compile(r"[^a-z0-9]+")

# Parameters that give a chain length directly in drafts, and those that count a block including its root.
_DRAFT_PARAMS = ("chain_length", "draft_tokens", "draft_max", "num_speculative_tokens", "num_steps")
_BLOCK_PARAMS = ("num_draft_tokens", "speculative_num_draft_tokens", "block_size")
_COMMAND_DRAFTS: list[tuple[re.Pattern[str], int]] = [
    (re.compile(r"--speculative[-_]num[-_]steps[=\s]+(\d+)"), 0),
    (re.compile(r"--speculative[-_]num[-_]draft[-_]tokens[=\s]+(\d+)"), -1),
    (re.compile(r"--draft[-_]tokens[=\s]+(\d+)"), 0),
    (re.compile(r"--draft[-_]max[=\s]+(\d+)"), 0),
    # The value as a JSON number or a JSON string ("num_speculative_tokens": "{k}" renders "4"; issue 49), the
    # JSON's quotes backslash-escaped too (--speculative-config inside a double-quoted shell word; issue 58, R11).
    (re.compile(r"""\\*["']?num_speculative_tokens\\*["']?\s*[:=]\s*\\*["']?(\d+)"""), 0),
]
_TOPK_PARAMS = ("topk", "top_k", "eagle_topk", "speculative_eagle_topk")
_BUDGET_PARAMS = ("budget", "tree_budget", "max_nodes")
_TOPK_FLAGS = re.compile(r"--(?:speculative[-_](?:ddtree|eagle)[-_])?topk[=\s]+(\d+)")
_BUDGET_FLAGS = re.compile(r"--(?:speculative[-_]ddtree[-_])?budget[=\s]+(\d+)")
_EAGLE_TOPK = re.compile(r"--speculative[-_]eagle[-_]topk[=\s]+(\d+)")
_EAGLE_TOKENS = re.compile(r"--speculative[-_]num[-_]draft[-_]tokens[=\s]+(\d+)")
_SPEC_WORDS = re.compile(r"specul|draft|ddtree|eagle|medusa|ngram|lookahead|dflash|mtp", re.IGNORECASE)


@dataclass(frozen=True)
class BaselineRoles:
    """Which baseline variant plays which role (``None``: the run has no such baseline)."""

    ar: str | None
    linear: str | None

    def role_of(self, variant: str) -> str | None:
        if variant == self.ar:
            return "ar"
        if variant == self.linear:
            return "linear"
        return None


def _first_word(name: str) -> str:
    words = [w for w in _WORD.split(name.lower()) if w]
    return words[0] if words else ""


def baseline_roles(baselines: list[str]) -> BaselineRoles:
    """Assign the AR and linear roles to the experiment's baselines (rule in the module docstring)."""
    ar = next((b for b in baselines if _first_word(b) in _AR_NAMES or b.lower() in _AR_NAMES), None)
    linear = next(
        (b for b in baselines if b != ar and (_first_word(b) in _LINEAR_NAMES or b.lower() in _LINEAR_NAMES)),
        None,
    )
    unassigned = [b for b in baselines if b not in (ar, linear)]
    if ar is None and unassigned:
        ar = unassigned.pop(0)
    if linear is None and unassigned:
        linear = unassigned.pop(0)
    return BaselineRoles(ar=ar, linear=linear)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def chain_length(params: Mapping[str, Any], command: str | None, explicit: int | None = None) -> int | None:
    """Drafted tokens per step of a chain configuration (rule in the module docstring), or ``None``."""
    if explicit is not None:
        return explicit
    for name in _DRAFT_PARAMS:
        value = _int(params.get(name))
        if value is not None:
            return value
    for name in _BLOCK_PARAMS:
        value = _int(params.get(name))
        if value is not None:
            return value - 1
    if command:
        for pattern, offset in _COMMAND_DRAFTS:
            match = pattern.search(command)
            if match:
                return int(match.group(1)) + offset
    return None


_SPEC_CONFIG_FLAG = re.compile(r"""--speculative[-_]config(?:=|\s+)\\*["']?""")
_SHELL_ESCAPE = re.compile(r"""\\(["\\$`])""")


def speculative_configs(command: str | None) -> Iterator[dict[str, Any]]:
    """Each ``--speculative-config`` JSON object of a rendered command, in order: single-quoted, double-quoted,
    unquoted, over several lines, or written inside a double-quoted shell word with its quotes backslash-escaped
    (``"... --speculative-config '{\\"num_speculative_tokens\\": 4}'"``; issue 58, R11). Read as JSON from the
    flag's value on (one object, whatever follows it); a value that is not a JSON object is left out."""
    if not command:
        return
    decoder = json.JSONDecoder()
    for found in _SPEC_CONFIG_FLAG.finditer(command):
        rest = command[found.end() :]
        # As written; then with a double-quoted shell word's escapes undone (\" \\ \$ \` are what bash undoes).
        for text in (rest, _SHELL_ESCAPE.sub(r"\1", rest)):
            try:
                doc, _ = decoder.raw_decode(text)
            except ValueError:
                continue
            if isinstance(doc, dict):
                yield doc
            break


@dataclass(frozen=True)
class TreeShape:
    budget: int
    topk: int
    # Drafts per block of the drafter inside the tree, when the command says (caps a top-k = 1 chain).
    block_drafts: int | None = None

    @property
    def chain_drafts(self) -> int:
        """The chain a top-k = 1 tree of this budget is: min(budget, block drafts)."""
        return min(self.budget, self.block_drafts) if self.block_drafts is not None else self.budget


def tree_shape(params: Mapping[str, Any], command: str | None) -> TreeShape | None:
    """The (budget, top-k) of a tree configuration, or ``None`` when it is not a tree. An EAGLE-family tree
    (SGLang's EAGLE, EAGLE3, STANDALONE: ``--speculative-eagle-topk`` K, ``--speculative-num-draft-tokens`` N,
    ``--speculative-num-steps`` S) is read from its command whatever the matrix keys are called: N counts the
    root, so its budget of drafts is N - 1, and no chain inside it is longer than its depth S
    (orchestrator/engines/sglang/tree.py)."""
    if command and (k := _EAGLE_TOPK.search(command)) and (n := _EAGLE_TOKENS.search(command)):
        depth = chain_length({}, command)
        return TreeShape(budget=int(n.group(1)) - 1, topk=int(k.group(1)), block_drafts=depth)
    topk = next((v for v in (_int(params.get(n)) for n in _TOPK_PARAMS) if v is not None), None)
    budget = next((v for v in (_int(params.get(n)) for n in _BUDGET_PARAMS) if v is not None), None)
    if command:
        if topk is None and (m := _TOPK_FLAGS.search(command)):
            topk = int(m.group(1))
        if budget is None and (m := _BUDGET_FLAGS.search(command)):
            budget = int(m.group(1))
    if topk is None or budget is None:
        return None
    block = chain_length({k: v for k, v in params.items() if k in _BLOCK_PARAMS}, command)
    return TreeShape(budget=budget, topk=topk, block_drafts=block)


def is_speculative(variant: str, roles: BaselineRoles, params: Mapping[str, Any], command: str | None) -> bool:
    """Whether a configuration should produce speculative metrics.

    The AR baseline never does; a configuration whose command is known and names nothing speculative
    (another plain AR variant) does not either; everything else does.
    """
    if variant == roles.ar:
        return False
    if command is not None and not _SPEC_WORDS.search(command):
        return bool(tree_shape(params, None) or chain_length(params, None) is not None)
    return True


def chain_accept_len(alpha: float, drafts: int) -> float:
    """Expected tokens per step of a chain of ``drafts`` with constant per-position acceptance ``alpha``:
    (1 - alpha^(k+1)) / (1 - alpha), bonus token included (Leviathan et al., 2023)."""
    if alpha >= 1.0:
        return float(drafts + 1)
    return (1.0 - alpha ** (drafts + 1)) / (1.0 - alpha)


def fit_acceptance(accept_len: float, drafts: int) -> float:
    """The constant per-position acceptance that makes a chain of ``drafts`` reach ``accept_len``."""
    if drafts <= 0 or accept_len <= 1.0:
        return 0.0
    if accept_len >= drafts + 1:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):  # bisection: the function is increasing in alpha
        mid = (low + high) / 2
        if chain_accept_len(mid, drafts) < accept_len:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def expected_chain_range(linear_accept: float, linear_drafts: int, drafts: int) -> tuple[float, float]:
    """Where a chain of ``drafts`` from the same drafter should land, given the linear chain's accept length.

    One end is the linear chain itself (a shorter chain cannot accept more, a longer one not less); the other
    is the constant-acceptance prediction fitted to it. Acceptance that decays with depth moves the truth
    between the two, so the pair brackets it; equal lengths give a single value.
    """
    if drafts == linear_drafts:
        return linear_accept, linear_accept
    alpha = fit_acceptance(linear_accept, linear_drafts)
    predicted = chain_accept_len(alpha, drafts)
    return (min(linear_accept, predicted), max(linear_accept, predicted))


def finite(value: Any) -> float | None:
    """A float, or ``None`` for missing, NaN or non-numbers (frames mix all three)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def row_params(row: Mapping[str, Any], param_columns: list[str]) -> dict[str, Any]:
    """A frame row's parameters under their own names (``param_x`` columns back to ``x``), missing ones out."""
    out: dict[str, Any] = {}
    for column in param_columns:
        value = row.get(column)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        out[column.removeprefix("param_")] = value
    return out


def annotate(
    frame: pd.DataFrame, roles: BaselineRoles, param_columns: list[str], linear_chain_length: int | None = None
) -> pd.DataFrame:
    """Add ``role`` (ar / linear / None), ``speculative``, ``tree_budget``, ``tree_topk`` and
    ``chain_drafts`` (drafts per step of a chain: the linear baseline, or a top-k = 1 tree) to ``frame``."""
    out = frame.copy()
    roles_col: list[str | None] = []
    speculative: list[bool] = []
    budgets: list[float] = []
    topks: list[float] = []
    chains: list[float] = []
    nan = float("nan")
    for raw in out.to_dict("records"):
        row = {str(k): v for k, v in raw.items()}
        params = row_params(row, param_columns)
        command = row.get("command") if isinstance(row.get("command"), str) else None
        role = roles.role_of(str(row.get("variant")))
        shape = tree_shape(params, command)
        if role == "linear":
            drafts = chain_length(params, command, linear_chain_length)
        elif shape is not None and shape.topk == 1:
            drafts = shape.chain_drafts
        else:
            drafts = None
        roles_col.append(role)
        speculative.append(is_speculative(str(row.get("variant")), roles, params, command))
        budgets.append(float(shape.budget) if shape else nan)
        topks.append(float(shape.topk) if shape else nan)
        chains.append(float(drafts) if drafts is not None else nan)
    out["role"] = pd.Series(roles_col, index=out.index, dtype=object)
    out["speculative"] = pd.Series(speculative, index=out.index, dtype=bool)
    out["tree_budget"] = pd.Series(budgets, index=out.index, dtype=float)
    out["tree_topk"] = pd.Series(topks, index=out.index, dtype=float)
    out["chain_drafts"] = pd.Series(chains, index=out.index, dtype=float)
    return out
