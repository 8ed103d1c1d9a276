"""Reading YAML while keeping where every key came from, so errors can name the file, line and column.

``load_yaml_with_positions`` returns the plain data (as ``yaml.safe_load`` would) and a map from key paths
(tuples of keys and list indexes) to 1-based (line, column). Duplicate keys, which PyYAML silently merges, are an
error here: in an experiment file the second ``budget:`` is almost always a mistake.

Every document is bounded (``MAX_BYTES``, ``MAX_EXPANDED_NODES``, nesting depth) and every string in it, key or
value, must be text that can reach a file, a command line, an environment or a terminal: a valid UTF-8 file can
still spell a lone surrogate (``"\\ud800"``) or a NUL (``"\\0"``) with YAML escapes, and ``!!binary`` any
bytes; those are refused here, where the position is known, for experiment files, playbooks and run
directories alike.
"""

from __future__ import annotations

import errno
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import ConfigError
from orchestrator.files import NotReadable, read_bounded

__all__ = ["MAX_BYTES", "MAX_EXPANDED_NODES", "Positions", "load_yaml_with_positions", "locate", "text_problem"]

Positions = dict[tuple[Any, ...], tuple[int, int]]

#: The largest YAML file specsweep reads (experiment files, playbooks, a run directory's experiment.yaml).
MAX_BYTES = 4 * 1024 * 1024
#: The most nodes a document may hold with its aliases expanded: validation walks the expanded tree, so a
#: 600-byte "billion laughs" file of nested aliases would otherwise take minutes and all memory.
MAX_EXPANDED_NODES = 200_000


def _expanded_size(node: yaml.Node, memo: dict[int, int], file: str, depth: int = 0) -> int:
    """Nodes in ``node`` with aliases expanded, each distinct node counted once per place it appears."""
    known = memo.get(id(node))
    if known is not None:
        return known
    if depth > 100:
        raise ConfigError("the document is nested too deeply", file=file, line=node.start_mark.line + 1)
    size = 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            size += _expanded_size(key_node, memo, file, depth + 1) + _expanded_size(value_node, memo, file, depth + 1)
            if size > MAX_EXPANDED_NODES:
                break
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            size += _expanded_size(item, memo, file, depth + 1)
            if size > MAX_EXPANDED_NODES:
                break
    memo[id(node)] = size
    return size


def _walk(
    node: yaml.Node,
    path: tuple[Any, ...],
    positions: Positions,
    file: str,
    depth: int = 0,
    seen_nodes: set[int] | None = None,
) -> None:
    # An alias reuses a node: walk it once (its first place gives the positions), never once per alias.
    seen_nodes = set() if seen_nodes is None else seen_nodes
    if id(node) in seen_nodes:
        return
    seen_nodes.add(id(node))
    if depth > 100:
        raise ConfigError("the document is nested too deeply", file=file, line=node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Hashable, int] = {}
        for key_node, value_node in node.value:
            key: Any = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key == "<<":  # merge key: its entries belong to this mapping
                _walk(value_node, path, positions, file, depth + 1, seen_nodes)
                continue
            line, col = key_node.start_mark.line + 1, key_node.start_mark.column + 1
            if key is not None:
                if key in seen:
                    raise ConfigError(
                        f"duplicate key {key!r} (first defined on line {seen[key]})",
                        file=file,
                        line=line,
                        column=col,
                        key=".".join(str(p) for p in (*path, key)),
                    )
                seen[key] = line
                positions.setdefault((*path, key), (line, col))
                _walk(value_node, (*path, key), positions, file, depth + 1, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            positions.setdefault((*path, index), (item.start_mark.line + 1, item.start_mark.column + 1))
            _walk(item, (*path, index), positions, file, depth + 1, seen_nodes)


#: Embeddings, overrides and isolates (U+202A..U+202E, U+2066..U+2069): they reorder what follows on screen.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be used as text anywhere (a NUL, a lone surrogate), or ``None``."""
    if "\0" in value:
        return 'a NUL character (a YAML "\\0" escape?) cannot be passed to a command, an environment or a file'
    for ch in value:
        if ch in _BIDI_CONTROLS:
            return (
                f"U+{ord(ch):04X}, a bidirectional control character, would make the console, the report and the "
                "CSV show this text other than it is (the characters reordered); write it without"
            )
        if "\ud800" <= ch <= "\udfff":
            return (
                f'{ch!r} is a lone surrogate (a YAML "\\u" escape?), not a character: it has no UTF-8 encoding, '
                "so no file, command line or environment can hold it"
            )
    return None


def _check_text(data: Any, path: tuple[Any, ...], positions: Positions, file: str, seen: set[int]) -> None:
    """Refuse any string (key or value) that ``text_problem`` refuses, and bytes (``!!binary``) that are not
    such text, naming the key and its position."""
    if isinstance(data, dict | list):
        if id(data) in seen:  # an alias: checked where it was defined
            return
        seen.add(id(data))
        items = data.items() if isinstance(data, dict) else enumerate(data)
        for key, value in items:
            if isinstance(data, dict):
                _check_scalar(key, (*path, key), positions, file, "key")
            _check_text(value, (*path, key), positions, file, seen)
    else:
        _check_scalar(data, path, positions, file, "value")


def _check_scalar(value: Any, path: tuple[Any, ...], positions: Positions, file: str, what: str) -> None:
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            problem: str | None = "binary data (!!binary) that is not UTF-8 text"
        else:
            problem = text_problem(value)
    elif isinstance(value, str):
        problem = text_problem(value)
    else:
        return
    if problem:
        shown = path[:-1] if what == "key" else path
        line, column = locate(positions, path)
        raise ConfigError(
            f"the key {_printable(path[-1])!r}: {problem}" if what == "key" else problem,
            file=file,
            line=line,
            column=column,
            key=".".join(_printable(p) for p in shown) or None,
        )


def _printable(part: Any) -> str:
    text = str(part)
    return text if text_problem(text) is None else ascii(text)[1:-1]


# libyaml's parser where PyYAML was built with it (the wheels are): the same safe loader, scanned in C; the
# pure-Python scanner took tens of seconds on a file of a few megabytes.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_with_positions(path: Path) -> tuple[Any, Positions]:
    """Parse ``path``; raise ``ConfigError`` (with line and column) for anything that is not well-formed YAML."""
    file = str(path)
    try:
        raw = read_bounded(path, MAX_BYTES)
    except FileNotFoundError:
        raise ConfigError("no such file", file=file) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not an experiment file", file=file) from None
    except NotReadable as exc:
        if exc.errno == errno.EFBIG:
            raise ConfigError(
                f"file is larger than {MAX_BYTES} bytes, the most specsweep reads of a YAML file", file=file
            ) from None
        raise ConfigError(f"cannot read: {exc.strerror}", file=file) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=file) from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"file is {len(raw)} bytes; specsweep reads YAML files of at most {MAX_BYTES}", file=file)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", file=file) from None
    try:
        node, data = _parse(text, _LOADER, file)
    except (yaml.YAMLError, RecursionError, ValueError, TypeError, OverflowError):
        # A document libyaml refuses (it refuses some PyYAML reads, a "\\ud800" escape): PyYAML's own reading
        # decides, and its words (line, column, problem) are the error.
        node, data = _parse_or_refuse(text, yaml.SafeLoader, file)
    positions: Positions = {}
    if node is not None:
        try:
            _walk(node, (), positions, file)
        except RecursionError:
            raise ConfigError("the document is nested too deeply", file=file) from None
    _check_text(data, (), positions, file, set())
    return data, positions


def _parse(text: str, loader: Any, file: str) -> tuple[Any, Any]:
    node = yaml.compose(text, Loader=loader)
    if node is not None and _expanded_size(node, {}, file) > MAX_EXPANDED_NODES:
        raise ConfigError(
            f"the document expands to more than {MAX_EXPANDED_NODES} values (YAML aliases repeating aliases?)",
            file=file,
        )
    return node, yaml.load(text, Loader=loader)


def _parse_or_refuse(text: str, loader: Any, file: str) -> tuple[Any, Any]:
    try:
        return _parse(text, loader, file)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise ConfigError(
            f"invalid YAML: {problem}",
            file=file,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", file=file) from None
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:
        raise ConfigError(f"invalid YAML: {type(exc).__name__}: {exc}", file=file) from None


def locate(positions: Positions, path: tuple[Any, ...]) -> tuple[int | None, int | None]:
    """The position of ``path`` or of its nearest ancestor that has one."""
    for end in range(len(path), 0, -1):
        hit = positions.get(tuple(path[:end]))
        if hit:
            return hit
    return None, None
