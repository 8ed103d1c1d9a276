"""Errors that point into the file: pydantic's validation errors turned into ``ConfigError``s naming file,
line, column and key path, with the nearest valid key suggested for a typo (experiment files and playbook
files alike: each passes its schema's root model), and many problems carried as one error."""

from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Annotated, Any, Union

from pydantic import BaseModel, ValidationError

from orchestrator.errors import ConfigError
from orchestrator.experiment.yamlsource import Positions, locate

__all__ = ["error_from_validation", "problems_of", "suggest", "with_problems"]


def _unwrap(annotation: Any) -> list[Any]:
    """The model classes an annotation may hold (through Optional, Annotated, list, dict, unions)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            out.extend(_unwrap(arg))
        return out
    if origin in (list, dict):
        return [(origin, typing.get_args(annotation))]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _valid_keys(path: tuple[Any, ...], data: Any, root: type[BaseModel]) -> list[str]:
    """The keys the schema accepts at ``path`` (for "did you mean"), following the document's kinds."""
    candidates: list[Any] = [root]
    node = data
    for part in path:
        next_candidates: list[Any] = []
        for cand in candidates:
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                if isinstance(node, dict) and "kind" in node:
                    kind_field = cand.model_fields.get("kind")
                    if kind_field is not None and typing.get_args(kind_field.annotation) != (node["kind"],):
                        continue
                info = cand.model_fields.get(part) if isinstance(part, str) else None
                if info is not None:
                    next_candidates.extend(_unwrap(info.annotation))
            elif isinstance(cand, tuple):
                origin, args = cand
                if (origin is list and isinstance(part, int)) or origin is dict:
                    for arg in args[-1:]:
                        next_candidates.extend(_unwrap(arg))
        candidates = next_candidates
        node = (
            node.get(part)
            if isinstance(node, dict)
            else (node[part] if isinstance(node, list) and isinstance(part, int) and part < len(node) else None)
        )
    keys: list[str] = []
    for cand in candidates:
        if isinstance(cand, type) and issubclass(cand, BaseModel):
            if isinstance(node, dict) and "kind" in node:
                kind_field = cand.model_fields.get("kind")
                if kind_field is not None and typing.get_args(kind_field.annotation) != (node["kind"],):
                    continue
            keys.extend(k for k in cand.model_fields if k not in keys)
    return keys


def suggest(word: str, options: list[str]) -> str:
    """``; did you mean 'x'?`` for the nearest option, else the list of valid keys (or nothing)."""
    close = difflib.get_close_matches(str(word), options, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else (f" (valid keys: {', '.join(options)})" if options else "")


#: A key of an experiment file is a name; pydantic's own parts of a location are not: its core schemas
#: (``function-after[...]``, ``lax-or-strict[...]``) and the members of a union of plain types (``str``, ``int``).
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "tuple", "set", "none", "bytes"})
#: Keys the model fills from another key of the document before validating it: ``environment: {NAME:
#: {secret_env: ...}}`` becomes the service's ``secrets`` (orchestrator/experiment/service.py).
_MOVED = {"secrets": "environment"}


def _doc_path(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """Drop pydantic's union tags and validator names from an error location, keeping document keys."""
    path: list[Any] = []
    node = data
    for index, part in enumerate(loc):
        following = loc[index + 1] if index + 1 < len(loc) else None
        moved = _MOVED.get(part) if isinstance(part, str) else None
        if isinstance(node, dict) and part not in node and moved is not None and isinstance(node.get(moved), dict):
            part = moved  # where the user wrote it (issue 40: service.secret_env named no key of the file)
        if (
            isinstance(node, dict)
            and part in node
            and following is not None
            and following in node
            and not isinstance(node[part], dict | list)
        ):
            continue  # a union tag that is also a key of the document (``host: {ssh: ...}`` is tagged "ssh")
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        ):
            path.append(part)
            node = node[part]
        elif isinstance(node, dict | list):
            # a tag like 'systemd' or 'function-after[...]', or a missing key: keep it only if last
            is_tag = isinstance(node, dict) and node.get("kind") == part
            if (
                index == len(loc) - 1
                and isinstance(part, str)
                and _KEY.fullmatch(part)
                and part not in _TYPE_TAGS
                and not is_tag
            ):
                path.append(part)
        else:
            break
    return tuple(path)


_SENSITIVE = re.compile(r"key|token|secret|password|auth", re.IGNORECASE)


def _sensitive(loc: tuple[Any, ...]) -> bool:
    """Whether a location may hold a secret, whose value an error message must never quote."""
    return any(isinstance(part, str) and _SENSITIVE.search(part) for part in loc)


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _error_from_validation(
    exc: ValidationError, data: Any, positions: Positions, file: str, root: type[BaseModel]
) -> ConfigError:
    """One ``ConfigError`` (file:line:column, key path, nearest valid key) for the pydantic errors of a document
    whose schema is ``root`` (the Experiment for experiment files; playbook files pass theirs): the first says
    how many more there are, and ``problems`` holds every one (``specsweep validate`` prints them all)."""
    errors = _union_errors(exc.errors(include_url=False), data)
    # An unknown key usually explains a "missing" one next to it (a typo): report it first.
    rank = {"extra_forbidden": 0, "union_tag_invalid": 1}
    errors.sort(key=lambda e: rank.get(e["type"], 2))
    problems: list[ConfigError] = []
    seen: set[str] = set()
    for error in errors:
        problem = _one_validation_error(error, data, positions, file, root)
        if str(problem) not in seen:
            seen.add(str(problem))
            problems.append(problem)
    return with_problems(problems)


def _union_errors(errors: list[Any], data: Any) -> list[Any]:
    """Each value a union refused as one error, not one per member: a member that matched the value's shape and
    failed deeper in it (``api_key: {secret_env: 5}`` against ``str | SecretSource``) is the one meant, so the
    members that refused its type at the value itself go; members that all refused it there (``x: [{a: 1}]``
    against ``str | int | float | bool``) become one error that names every type allowed."""
    paths = [_doc_path(tuple(e["loc"]), data) for e in errors]
    deeper = {p[:n] for p in paths for n in range(len(p))}
    kept: list[Any] = []
    merged: dict[tuple[Any, ...], Any] = {}
    for error, path in zip(errors, paths, strict=True):
        if not _refused_type(error):
            kept.append(error)
        elif path in deeper:
            continue  # another member of the union went deeper: its error says what is wrong
        elif path in merged:
            wanted = error["msg"].removeprefix("Input should be ")
            first = merged[path]
            if wanted not in first["msg"]:
                first["msg"] = f"{first['msg']} or {wanted}"
        else:
            merged[path] = dict(error)
            kept.append(merged[path])
    return kept


def _refused_type(error: Any) -> bool:
    """Whether pydantic refused the value's type where it stands (a union member's usual answer)."""
    return str(error["type"]).endswith(("_type", "_parsing")) and str(error["msg"]).startswith("Input should be")


def with_problems(problems: list[ConfigError]) -> ConfigError:
    """The first of ``problems``, saying how many more there are, with every one in its ``problems``."""
    first = problems[0]
    more = len(problems) - 1
    if more:
        first = ConfigError(
            f"{first.message} (and {more} more error{'s' if more > 1 else ''})",
            file=first.file,
            line=first.line,
            column=first.column,
            key=first.key,
        )
    first.problems = list(problems)  # type: ignore[attr-defined]
    return first


def problems_of(error: ConfigError) -> list[ConfigError]:
    """Every problem a ConfigError stands for (itself when it holds no list)."""
    return list(getattr(error, "problems", None) or [error])


def _one_validation_error(first: Any, data: Any, positions: Positions, file: str, root: type[BaseModel]) -> ConfigError:
    loc = tuple(first["loc"])
    path = _doc_path(loc, data)
    etype = first["type"]
    message = first["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if etype == "extra_forbidden":
        bad = path[-1] if path else loc[-1]
        message = f"unknown key {bad!r}" + suggest(str(bad), _valid_keys(path[:-1], data, root))
    elif etype == "missing":
        missing = loc[-1]
        if path and path[-1] == missing:
            path = path[:-1]
        message = f"missing required key {missing!r}"
        path = (*path, missing)
    elif etype == "union_tag_invalid":
        expected = [t.strip(" '") for t in str(first.get("ctx", {}).get("expected_tags", "")).split(",")]
        got = str(first.get("ctx", {}).get("tag", ""))
        message = f"unknown kind {got!r} (expected one of: {', '.join(expected)})" + suggest(got, expected)
        path = (*path, "kind")
    elif etype == "union_tag_not_found":
        message = "missing key 'kind'"
        path = (*path, "kind")
    elif "input" in first and etype not in ("value_error", "assertion_error") and not _sensitive(loc):
        message = f"{message}, got {_describe(first['input'])}"
    line, column = locate(positions, path)
    return ConfigError(message, file=file, line=line, column=column, key=".".join(str(p) for p in path) or None)


#: Public names of the helpers playbook files share with experiment files.
error_from_validation = _error_from_validation
