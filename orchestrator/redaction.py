"""Secrets written inline, kept out of what specsweep writes and shows: one redactor for every document.

A secret given by reference (``{secret_env: NAME}``, ``{secret_file: PATH}``, a ``$NAME`` command word) never
leaves the controller in clear (orchestrator/services/secrets.py). A secret written *inline* in an experiment
file is caught here by where it stands, so plan.json, experiment.yaml, records.jsonl, events.jsonl and
``specsweep plan --json`` hold ``[redacted]`` in its place:

- a value of an ``environment`` mapping, or of an ``api_key``, whose name is a secret's name: a ``_``-separated
  part of it is TOKEN, KEY, APIKEY, SECRET, PASSWORD, PASSWD, PASSPHRASE or CREDENTIAL(S) (``HF_TOKEN``,
  ``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``; not ``MAX_TOKENS`` or ``TOKENIZERS_PARALLELISM``);
- the password of a URL's userinfo (``https://user:PASSWORD@host``, written ``https://user:redacted@host`` so
  the URL still parses), in any string;
- the value after a command-line option a ``-``-separated part of whose name is token, key, apikey, secret,
  password or passwd (``--api-key VALUE``, ``--hf-token=VALUE``; not ``--num-draft-tokens 5``), in any string;
  a ``$NAME`` reference, a number shorter than 6 digits and a following option (``--port``, ``-v``) are left
  as they are; a dash-led value (``--api-key -abc123``, ``--api-key=-x``) and a long one of digits are masked;
- the value of an assignment ``NAME=VALUE`` whose NAME is a secret's name (an environment prefix of a command
  line read back, ``Environment=HF_TOKEN=...`` of a unit), in any string.

- a value quoted after such an option or in such an assignment (``--api-key "V"``, ``HF_TOKEN='V'``): the
  quotes stay, what is inside them is masked;
- ``Authorization: Bearer V`` (or ``Basic V``, ``Token V``), a header a server may echo back in a body;
- a value shaped like a known token whatever its name (``hf_...``, ``ghp_...``/``github_pat_...``,
  ``sk-...``, ``xox?-...``, ``AKIA...``).

Each value found is then masked wherever else it appears, by value: in the same document, and in everything
this process writes or shows afterwards (:func:`remember`: a matrix value rendered into ``--api-key {key}`` is
found in the plan, then masked in records, windows, reports and the console too; a ``secret_env`` value read
for the server is remembered when read). What is kept in memory to run the server is not changed: only what
is written or shown passes :func:`redact` or :func:`redact_text`.
:func:`inline_secrets` lists what was found, for a warning that names the key (the file still holds it).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

__all__ = [
    "REDACTED",
    "RedactingStream",
    "forget",
    "inline_secrets",
    "is_secret_name",
    "known_values",
    "redact",
    "redact_json_line",
    "redact_text",
    "remember",
]

REDACTED = "[redacted]"
#: In a URL's userinfo, where brackets would make it unparseable (an IPv6 literal's delimiters).
REDACTED_IN_URL = "redacted"

_SECRET_PARTS = frozenset(
    {
        "TOKEN",
        "KEY",
        "APIKEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
    }
)
# Each pattern starts only where a word does (a lookbehind) and a URL's scheme is at most 32 characters, so a
# long text without a match is read once, not once per position (a 3 MB command: issue 28, item 6).
_URL_PASSWORD = re.compile(
    r"(?P<head>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://[^/\s:@'\"]*:)(?P<value>[^/\s'\"]+)(?P<tail>@)"
)
# A value: bare, or in quotes (the quotes kept, what is inside masked).
_VALUE = r"(?:(?P<q>[\"'])(?P<quoted>[^\"'\n]+)(?P=q)|(?P<value>[^\s'\"]+))"
_OPTION = re.compile(r"(?P<head>(?<![\w-])(?P<name>--?[A-Za-z][A-Za-z0-9_-]*)(?:=|\s+))" + _VALUE)
_ASSIGNMENT = re.compile(r"(?P<head>(?<![\w$-])(?P<name>[A-Za-z_][A-Za-z0-9_]*)=)" + _VALUE)
_OPTION_PARTS = frozenset({"TOKEN", "KEY", "APIKEY", "SECRET", "PASSWORD", "PASSWD", "PASS", "AUTH"})
#: ``Authorization: Bearer V`` (a header a server's error body may echo), also JSON-quoted.
_AUTH_HEADER = re.compile(
    r"(?P<head>(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:bearer|basic|token|digest)\s+)(?P<value>[^\s'\",}]+)"
)
#: Values shaped like a known provider's token, whatever name they stand under.
_TOKEN_SHAPE = re.compile(
    r"(?<![A-Za-z0-9_-])(?P<value>(?:hf_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|sk-[A-Za-z0-9_-]{16,}|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}))(?![A-Za-z0-9_-])"
)
#: A help text's metavar (``<str>``, ``<int>``, ``TEXT``-style placeholders in angle brackets): not a value.
_PLACEHOLDER = re.compile(r"<[A-Za-z_ |.-]*>")
_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]*)?")
#: A word that is the next option, not a value: ``--name`` or a single-letter ``-x`` (``-abc123``, ``-9z8``:
#: a dash-led value). After ``=`` (``--api-key=-abc123``) the word is the value whatever it looks like.
_NEXT_OPTION = re.compile(r"--[A-Za-z][A-Za-z0-9_-]*|-[A-Za-z]")
#: Shorter values are not masked elsewhere in a document (they would match ordinary words and numbers).
_MIN_ELSEWHERE = 6

_KNOWN: set[str] = set()
_KNOWN_LOCK = threading.Lock()
_KNOWN_SORTED: tuple[str, ...] = ()


def remember(*values: str) -> None:
    """Values known to be secret, masked by value in everything :func:`redact` and :func:`redact_text` give
    from now on in this process (those shorter than 6 characters only where they stand as secrets)."""
    global _KNOWN_SORTED
    fresh = {v for v in values if isinstance(v, str) and len(v) >= _MIN_ELSEWHERE and not _is_reference(v)}
    if not fresh - _KNOWN:
        return
    with _KNOWN_LOCK:
        _KNOWN.update(fresh)
        _KNOWN_SORTED = tuple(sorted(_KNOWN, key=len, reverse=True))


def forget() -> None:
    """Forget every value :func:`remember` was given (a process that serves several runs, and the tests: what one
    test remembered must not mask another's output)."""
    global _KNOWN_SORTED
    with _KNOWN_LOCK:
        _KNOWN.clear()
        _KNOWN_SORTED = ()


def known_values() -> tuple[str, ...]:
    """The values :func:`remember` was given, longest first."""
    return _KNOWN_SORTED


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's (or a key's) name says it holds a secret (module docstring)."""
    parts = re.split(r"[_\-.]+", name.upper())
    return any(part in _SECRET_PARTS for part in parts) or name.upper().endswith(("APIKEY", "TOKEN", "PASSWORD"))


def _is_reference(value: str) -> bool:
    """A ``$NAME`` reference, or a value already masked (ours, a service's ``[secret NAME]``, pydantic's
    ``**********`` of a SecretStr)."""
    return (
        value.startswith(("$", "[secret", "[redacted"))  # a reference, or masked by a service (secrets.Redactor)
        or value == REDACTED_IN_URL
        or set(value) == {"*"}
    )


def _value(match: re.Match[str]) -> str:
    """The value an option or assignment match holds, quoted or bare."""
    return match.group("quoted") if match.group("quoted") is not None else match.group("value")


def _secret_option(match: re.Match[str]) -> bool:
    value = _value(match)
    if _is_reference(value) or _PLACEHOLDER.fullmatch(value):
        return False
    joined = match.group("head").endswith("=")
    if not joined and _NEXT_OPTION.fullmatch(value):
        return False  # no value: the next option (``--api-key --port 1``, ``--api-key -v``)
    if _NUMBER.fullmatch(value) and len(value.lstrip("+-")) < _MIN_ELSEWHERE:
        return False  # a count or a token id (``--eos-token 2``); a secret of digits is longer (issue 40)
    # The option names a secret when its last part does (--api-key, --hf-token, --auth): --first-token-timeout
    # names a time, --api-key-file a path.
    parts = re.split(r"[_-]+", match.group("name").strip("-").upper())
    return bool(parts) and parts[-1] in _OPTION_PARTS


def _secret_assignment(match: re.Match[str]) -> bool:
    return is_secret_name(match.group("name")) and not _is_reference(_value(match))


def _found_in_text(text: str) -> Iterator[tuple[str, str]]:
    """(value, what it is) of each secret a text holds by where it stands."""
    for match in _URL_PASSWORD.finditer(text):
        if not _is_reference(match.group("value")):
            yield match.group("value"), "a URL's password"
    for match in _OPTION.finditer(text):
        if _secret_option(match):
            yield _value(match), "a secret"
    for match in _ASSIGNMENT.finditer(text):
        if _secret_assignment(match):
            yield _value(match), "a secret"
    for match in _AUTH_HEADER.finditer(text):
        if not _is_reference(match.group("value")):
            yield match.group("value"), "a secret"
    for match in _TOKEN_SHAPE.finditer(text):
        yield match.group("value"), "a secret"


def _secret_entry(key: Any, value: Any, under: str | None) -> bool:
    """Whether ``key: value`` of a mapping is a secret written inline: an environment entry with a secret's
    name, or an ``api_key``, whose value is not a reference."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # ``HF_TOKEN: 12345678`` is read by YAML as a number: a secret all the same
    if not isinstance(value, str) or not isinstance(key, str) or not value or _is_reference(value):
        return False
    return (under == "environment" and is_secret_name(key)) or key == "api_key"


def _walk(doc: Any, path: tuple[Any, ...] = (), under: str | None = None) -> Iterator[tuple[tuple[Any, ...], str, str]]:
    """(key path, inline secret value, what it is) of every secret the document holds by where it stands."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            here = (*path, key)
            if isinstance(key, str):
                for found, what in _found_in_text(key):
                    yield path, found, what
            if _secret_entry(key, value, under):
                yield here, str(value), "a secret"
                continue
            yield from _walk(value, here, key if isinstance(key, str) else None)
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _walk(value, (*path, index), under)
    elif isinstance(doc, str):
        for value, what in _found_in_text(doc):
            yield path, value, what


def inline_secrets(doc: Any) -> list[tuple[tuple[Any, ...], str]]:
    """(key path, what it is) of each secret written inline in ``doc`` (never the value itself)."""
    # An api_key is a SecretStr: masked everywhere by its own model, and meant to be given this way too.
    return [(path, what) for path, _value, what in _walk(doc) if not (path and path[-1] == "api_key")]


def redact_text(text: str, values: tuple[str, ...] = ()) -> str:
    """``text`` with URL passwords, secret options' values and the given ``values`` replaced by ``[redacted]``."""
    text = _URL_PASSWORD.sub(
        lambda m: (
            m.group(0) if _is_reference(m.group("value")) else m.group("head") + REDACTED_IN_URL + m.group("tail")
        ),
        text,
    )
    text = _OPTION.sub(lambda m: _masked(m) if _secret_option(m) else m.group(0), text)
    text = _ASSIGNMENT.sub(lambda m: _masked(m) if _secret_assignment(m) else m.group(0), text)
    text = _AUTH_HEADER.sub(
        lambda m: m.group(0) if _is_reference(m.group("value")) else m.group("head") + REDACTED, text
    )
    text = _TOKEN_SHAPE.sub(REDACTED, text)
    for value in (*values, *_KNOWN_SORTED):
        if len(value) >= _MIN_ELSEWHERE and value in text:
            text = text.replace(value, REDACTED)
    return text


def _masked(match: re.Match[str]) -> str:
    quote = match.group("q") or ""
    return match.group("head") + quote + REDACTED + quote


def redact(doc: Any) -> Any:
    """A copy of ``doc`` (JSON-shaped: dicts, lists, strings, numbers) with every inline secret redacted."""
    found = {value for _path, value, _what in _walk(doc)}
    remember(*found)  # a secret found here is masked by value in whatever is written or shown after
    values = tuple(sorted(found, key=len, reverse=True))
    return _redacted(doc, values, None)


def _redacted(doc: Any, values: tuple[str, ...], under: str | None) -> Any:
    if isinstance(doc, dict):
        out = {}
        for key, value in doc.items():
            if _secret_entry(key, value, under):
                out[key] = REDACTED
                continue
            shown = redact_text(key, values) if isinstance(key, str) else key  # a series name may hold a value
            out[shown] = _redacted(value, values, key if isinstance(key, str) else None)
        return out
    if isinstance(doc, list):
        return [_redacted(value, values, under) for value in doc]
    if isinstance(doc, str):
        return redact_text(doc, values)
    return doc


class RedactingStream:
    """``stream`` (the process's stdout or stderr) written through :func:`redact_text`: what ``typer.echo``,
    ``print`` and the consoles write while the CLI runs (``orchestrator.cli.app.main``)."""

    def __init__(self, stream: Any) -> None:
        self._wrapped = stream

    def write(self, text: str) -> int:
        self._wrapped.write(redact_text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)


def redact_json_line(line: str) -> str:
    """A JSON line (a record) with every inline secret redacted; the line itself when it holds none."""
    data = json.loads(line)
    shown = redact(data)
    return line if shown == data else json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
