"""Prompt sets: what each request asks, in a seeded order.

A workload spec is one of:

- ``builtin:NAME``: a prompt set shipped with specsweep (``orchestrator/load/prompts/NAME.jsonl``); ``chat`` is
  a few dozen varied instructions (code, explanations, guides, stories).
- a path to a ``.jsonl`` file, one prompt per line, or a ``.json`` file holding a list (ShareGPT's layout).
  Each item may be a string, ``{"prompt": ...}`` (also ``text``, ``input``, ``question``, ``instruction``),
  ``{"messages": [{"role": ..., "content": ...}, ...]}``, or ShareGPT's ``{"conversations": [{"from": "human",
  "value": ...}, ...]}`` (the first human turn). An optional ``max_tokens`` (or ``output_len``,
  ``max_new_tokens``) is that prompt's own output length: it is sent only when the load opts in
  (``load.prompt_max_tokens``, at most ``max_tokens`` then); otherwise every request carries the load's
  ``max_tokens`` (:func:`sent_max_tokens`). A SpecBench row's ``turns`` gives its first turn.
- a :class:`~orchestrator.load.datasets.WorkloadSource` (``load.workloads`` in an experiment): one of the above
  with a ``format`` (``sharegpt``, ``specbench``, ``speedbench``, ...), a ``category`` that selects rows, and an
  output-length cap (see :mod:`orchestrator.load.datasets`).

Builtin sets (each prompt with the output length it expects): ``chat`` (varied instructions), ``code``,
``math``, ``summarization``, ``translation``, ``qa``: a few dozen prompts each, written for specsweep.
- ``synthetic:in=128,out=256``: generated prompts of about ``in`` tokens (words that are one token in common
  vocabularies, freshly drawn per request so no prefix cache helps), each asking for exactly ``out`` tokens
  (``ignore_eos`` is forced on): ``out`` is the workload's own configured length and is what is sent.

Request ``i`` gets prompt ``order[i % n]`` where ``order`` is a permutation seeded by ``seed``; warm-up requests
draw from the end of the permutation so the measured requests are the same whatever the warm-up count.
"""

from __future__ import annotations

import difflib
import random
import re
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from orchestrator.errors import LoadError
from orchestrator.files import NotReadable, read_bounded
from orchestrator.load.datasets import WorkloadSource, read_rows, row_prompt_item, select_rows

__all__ = ["Prompt", "Workload", "WorkloadSource", "builtin_names", "load_workload", "sent_max_tokens"]

_TEXT_KEYS = ("prompt", "text", "input", "question", "instruction")
_MAX_KEYS = ("max_tokens", "output_len", "max_new_tokens")
#: The most of a prompts file read (a 3 GB file ended in MemoryError): larger is refused, saying so.
MAX_PROMPTS_BYTES = 256 * 1024 * 1024
_HUMAN = ("human", "user")

# Common English words that are one token each (with their leading space) in Llama, GPT and Gemma vocabularies.
_WORD_TEXT = (
    "the of and to in is was for on that with as by at from his an be it are this which or had not but have "
    "they one were their all been has more when there can who will into would other some time only new these "
    "two may first then any like its after over also such most where between many through years about out "
    "state made each city both used well during before under people while three world own against same since "
    "part school year house later four found high long small end number place life name early great second "
    "work team power water known group show line game head family club south north west east side river "
    "music film day war home book light point level field art land rate case order form open back air "
    "road page court story law party car type base data plan view fact body sea help"
)
_WORDS = tuple(dict.fromkeys(_WORD_TEXT.split()))


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request's input: plain text, or chat messages; optionally its own output length (``fixed_length``:
    that length is the workload's configuration, ``synthetic:...,out=N``, not a prompts file's suggestion)."""

    text: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    max_tokens: int | None = None
    ignore_eos: bool | None = None
    fixed_length: bool = False

    def as_messages(self) -> list[dict[str, str]]:
        if self.messages is not None:
            return [dict(m) for m in self.messages]
        return [{"role": "user", "content": self.text or ""}]

    def as_text(self) -> str:
        if self.text is not None:
            return self.text
        return "\n\n".join(m.get("content", "") for m in self.messages or ())


class Workload:
    """A seeded, endless sequence of prompts (see the module docstring)."""

    def __init__(self, name: str, prompts: list[Prompt], seed: int, synthetic: tuple[int, int] | None = None):
        self.name = name
        self._prompts = prompts
        self._synthetic = synthetic
        self._seed = seed
        self._order = list(range(len(prompts)))
        random.Random(seed).shuffle(self._order)

    @property
    def size(self) -> int:
        """Distinct prompts (0 for synthetic workloads, which never repeat)."""
        return len(self._prompts)

    def prompt(self, index: int) -> Prompt:
        """The prompt of measured request ``index`` (0, 1, ...)."""
        if self._synthetic is not None:
            return self._synthetic_prompt(index)
        return self._prompts[self._order[index % len(self._order)]]

    def warmup_prompt(self, index: int) -> Prompt:
        """The prompt of warm-up request ``index``: taken from the end of the order."""
        if self._synthetic is not None:
            return self._synthetic_prompt(-1 - index)
        return self._prompts[self._order[-1 - (index % len(self._order))]]

    def _synthetic_prompt(self, index: int) -> Prompt:
        assert self._synthetic is not None
        n_in, n_out = self._synthetic
        # The words rng.choice(_WORDS) would pick, n_in - 1 times, without its two Python calls per word (this
        # runs once per request): CPython's choice is seq[_randbelow(len(seq))], and _randbelow draws k =
        # len(seq).bit_length() bits until they fall below len(seq) (Lib/random.py, 3.11-3.13).
        getrandbits = random.Random(f"{self._seed}:{index}").getrandbits
        n = len(_WORDS)
        k = n.bit_length()
        picks = []
        for _ in range(max(1, n_in - 1)):
            r = getrandbits(k)
            while r >= n:
                r = getrandbits(k)
            picks.append(_WORDS[r])
        return Prompt(text=" ".join(picks), max_tokens=n_out, ignore_eos=True, fixed_length=True)


def sent_max_tokens(prompt: Prompt, cap: int, own: bool = False) -> int:
    """The ``max_tokens`` a request for ``prompt`` carries. ``cap`` is the load's ``max_tokens`` (a workload's
    own cap under ``load.workloads``), and it is what is sent: a prompts file's per-prompt limit (the builtin
    sets carry one) is used only when ``own`` opts in (``load.prompt_max_tokens``), and then at most ``cap``.
    A synthetic workload's ``out`` is the experiment's own configuration and is sent as it is."""
    if prompt.max_tokens is None:
        return cap
    if prompt.fixed_length:
        return prompt.max_tokens
    return min(prompt.max_tokens, cap) if own else cap


def load_workload(spec: str | WorkloadSource, seed: int = 0) -> Workload:
    """Resolve a workload spec or source (see the module docstring); raises ``LoadError`` naming what is wrong."""
    if isinstance(spec, WorkloadSource):
        return _from_source(spec, seed)
    if spec.startswith("builtin:"):
        return Workload(spec, _builtin(spec[len("builtin:") :]), seed)
    if spec.startswith("synthetic:"):
        return Workload(spec, [], seed, synthetic=_synthetic_spec(spec))
    return Workload(spec, _parse_file(_read(spec), spec), seed)


def _read(spec: str) -> str:
    path = Path(spec).expanduser()
    if not path.exists():
        raise LoadError(f"load: prompts file {spec!r} does not exist (or use builtin:chat, synthetic:in=N,out=M)")
    try:
        return read_bounded(path, MAX_PROMPTS_BYTES).decode("utf-8")
    except NotReadable as exc:
        raise LoadError(f"load: cannot read prompts file {spec}: {exc.strerror}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadError(f"load: cannot read prompts file {spec}: {exc}") from exc


def _from_source(source: WorkloadSource, seed: int) -> Workload:
    spec, cap = source.spec, source.max_tokens
    name = source.name or spec
    if spec.startswith("synthetic:"):
        n_in, n_out = _synthetic_spec(spec)
        return Workload(name, [], seed, synthetic=(n_in, min(n_out, cap) if cap else n_out))
    text = _builtin_text(spec[len("builtin:") :]) if spec.startswith("builtin:") else _read(spec)
    prompts = _parse_file(text, spec, fmt=source.format, category=source.category)
    if cap is not None:
        prompts = [replace(p, max_tokens=min(p.max_tokens or cap, cap)) for p in prompts]
    return Workload(name, prompts, seed)


def builtin_names() -> list[str]:
    folder = resources.files("orchestrator.load") / "prompts"
    return sorted(p.name[: -len(".jsonl")] for p in folder.iterdir() if p.name.endswith(".jsonl"))


def _builtin_text(name: str) -> str:
    names = builtin_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
        hint = f"; did you mean builtin:{close[0]}?" if close else ""
        raise LoadError(f"load: no builtin prompt set {name!r} (there are: {', '.join(names)}){hint}")
    return (resources.files("orchestrator.load") / "prompts" / f"{name}.jsonl").read_text(encoding="utf-8")


def _builtin(name: str) -> list[Prompt]:
    return _parse_file(_builtin_text(name), f"builtin:{name}")


_SYNTH_PART = re.compile(r"^\s*(in|out)\s*=\s*(\d+)\s*$")


def _synthetic_spec(spec: str) -> tuple[int, int]:
    values: dict[str, int] = {}
    for part in spec[len("synthetic:") :].split(","):
        match = _SYNTH_PART.match(part)
        if not match:
            raise LoadError(f"load: bad synthetic workload {spec!r}; write synthetic:in=128,out=256")
        values[match.group(1)] = int(match.group(2))
    if set(values) != {"in", "out"} or values["in"] < 1 or values["out"] < 1:
        raise LoadError(f"load: bad synthetic workload {spec!r}; write synthetic:in=128,out=256 (both >= 1)")
    return values["in"], values["out"]


def _parse_file(text: str, source: str, *, fmt: str = "auto", category: str | None = None) -> list[Prompt]:
    rows = select_rows(list(read_rows(text, source)), category, source)
    prompts: list[Prompt] = []
    for where, item in rows:
        prompt = _item(row_prompt_item(item, where, fmt), where)
        if prompt is not None:
            prompts.append(prompt)
    if not prompts:
        raise LoadError(f"load: {source} holds no prompts")
    return prompts


def _item(item: Any, where: str) -> Prompt | None:
    """One prompt from one item; None skips ShareGPT conversations that have no human turn."""
    if isinstance(item, str):
        return Prompt(text=item)
    if not isinstance(item, dict):
        raise LoadError(f"load: {where}: expected a string or an object, got {type(item).__name__}")
    max_tokens = _max_tokens(item, where)
    if isinstance(item.get("messages"), list):
        messages = []
        for message in item["messages"]:
            if not isinstance(message, dict) or not isinstance(message.get("content"), str):
                raise LoadError(f"load: {where}: each message needs a string 'content'")
            messages.append({"role": str(message.get("role", "user")), "content": message["content"]})
        if not messages:
            raise LoadError(f"load: {where}: 'messages' is empty")
        return Prompt(messages=tuple(messages), max_tokens=max_tokens)
    if isinstance(item.get("conversations"), list):
        for turn in item["conversations"]:
            if not isinstance(turn, dict):
                continue
            who = turn.get("from", turn.get("role"))
            value = turn.get("value", turn.get("content"))
            if who in _HUMAN and isinstance(value, str) and value:
                return Prompt(text=value, max_tokens=max_tokens)
        return None
    for key in _TEXT_KEYS:
        if isinstance(item.get(key), str):
            return Prompt(text=item[key], max_tokens=max_tokens)
    turns = item.get("turns")
    if isinstance(turns, list) and turns and isinstance(turns[0], str):  # SpecBench's rows
        return Prompt(text=turns[0], max_tokens=max_tokens)
    expected = ", ".join((*_TEXT_KEYS, "messages", "conversations", "turns"))
    raise LoadError(f"load: {where}: no prompt found (expected one of {expected})")


def _max_tokens(item: dict[str, Any], where: str) -> int | None:
    for key in _MAX_KEYS:
        if key in item:
            value = item[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LoadError(f"load: {where}: {key} must be a whole number of at least 1, got {value!r}")
            return value
    return None
