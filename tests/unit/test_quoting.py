"""Quoting for shells and unit files: tables of cases, and a property test against a model of systemd's parser."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.errors import ConfigError
from orchestrator.quoting import (
    environment_line,
    exec_start_value,
    export_lines,
    sanitize_comment,
    shell_join,
    split_command,
    systemd_quote,
    validate_env_name,
    validate_unit_name,
)

# Any code point, lone surrogates (category Cs, which hypothesis leaves out by default) and NUL weighted in:
# YAML escapes make both out of a valid UTF-8 file.
ANY_CHARACTER = st.one_of(
    st.characters(codec=None, exclude_categories=()), st.integers(0xD800, 0xDFFF).map(chr), st.just("\0")
)


def systemd_unquote_word(text: str, *, command: bool) -> tuple[str, str]:
    """A model of systemd's extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE) for one double-quoted word,
    followed by specifier (``%%``) and, for commands, ``$$`` resolution. Works on the UTF-8 bytes of the unit
    file, as systemd does. Returns (word, rest)."""
    data = text.encode()
    assert data[:1] == b'"'
    out = bytearray()
    i = 1
    escapes = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b"a": b"\a", b"b": b"\b", b"f": b"\f", b"v": b"\v"}
    escapes.update({b"\\": b"\\", b'"': b'"'})
    while True:
        ch = data[i : i + 1]
        if ch == b"\\":
            nxt = data[i + 1 : i + 2]
            if nxt == b"x":
                out.append(int(data[i + 2 : i + 4], 16))
                i += 4
                continue
            out += escapes[nxt]
            i += 2
            continue
        if ch == b'"':
            break
        out += ch
        i += 1
    word = out.decode("utf-8")
    resolved, j = [], 0
    while j < len(word):
        if word[j] == "%":
            assert word[j + 1] == "%", "an unescaped specifier"
            resolved.append("%")
            j += 2
        elif command and word[j] == "$":
            assert word[j + 1] == "$", "an unescaped variable"
            resolved.append("$")
            j += 2
        else:
            resolved.append(word[j])
            j += 1
    return "".join(resolved), data[i + 1 :].decode()


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        pytest.param("a b  c", ["a", "b", "c"], id="spaces"),
        pytest.param("--x \"a b\" 'c d'", ["--x", "a b", "c d"], id="quotes"),
        pytest.param("a;b $(c) `d` | e > f", ["a;b", "$(c)", "`d`", "|", "e", ">", "f"], id="operators-literal"),
        pytest.param("a\\ b", ["a b"], id="backslash"),
        pytest.param("p --spec-args\n--more", ["p", "--spec-args", "--more"], id="newline-separates"),
    ],
)
def test_split_command(command: str, argv: list[str]) -> None:
    assert split_command(command) == argv


@pytest.mark.parametrize("command", ["", "   ", "a 'unclosed", 'b "unclosed', "c \\"])
def test_split_command_refuses(command: str) -> None:
    with pytest.raises(ConfigError):
        split_command(command)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sglang", "sglang.service"),
        ("sglang-k26.service", "sglang-k26.service"),
        ("vllm@gpu0.service", "vllm@gpu0.service"),
        ("a:b_c.d\\x2d.service", "a:b_c.d\\x2d.service"),
    ],
)
def test_valid_unit_names(name: str, expected: str) -> None:
    assert validate_unit_name(name) == expected


@pytest.mark.parametrize(
    "name",
    ["", "a b", "x;y", "../etc/passwd", "a/b.service", "-x.service", "$(id).service", "x\n.service", "foo.socket"],
)
def test_invalid_unit_names(name: str) -> None:
    with pytest.raises(ConfigError):
        validate_unit_name(name)


@pytest.mark.parametrize("name", ["1A", "A-B", "A B", "", "A=B", "A\nB"])
def test_invalid_env_names(name: str) -> None:
    with pytest.raises(ConfigError):
        validate_env_name(name)


def test_exec_start_value_quotes_every_word() -> None:
    value = exec_start_value(["/bin/echo", "a b", "%n", "$HOME", 'q"', "x\ny"])
    assert value == '"/bin/echo" "a b" "%%n" "$$HOME" "q\\"" "x\\ny"'


@pytest.mark.parametrize("program", ["-/bin/x", "@/bin/x", "+/bin/x", "!/bin/x", ":/bin/x", "|/bin/x"])
def test_exec_start_refuses_prefix_characters(program: str) -> None:
    with pytest.raises(ConfigError, match="prefix"):
        exec_start_value([program])


def test_environment_line() -> None:
    assert environment_line("A", 'x "y"\n%h $H') == 'Environment="A=x \\"y\\"\\n%%h $H"'


def test_nul_is_refused() -> None:
    with pytest.raises(ConfigError):
        systemd_quote("a\0b", command=True)


def test_sanitize_comment_keeps_one_printable_line() -> None:
    assert sanitize_comment("a\nb\x00ü") == "a?b??"


# Any text, lone surrogates and NUL included: YAML escapes ("\\ud800", "\\0") make both out of a valid UTF-8
# experiment file. Validation refuses them (tests/unit/test_hostile_strings.py); the quoting refuses them too,
# with a ConfigError, never by crashing on the way to the host.
any_text = st.text(alphabet=ANY_CHARACTER, max_size=60)


def _unusable(value: str) -> bool:
    return "\0" in value or any("\ud800" <= ch <= "\udfff" for ch in value)


@settings(max_examples=300, deadline=None)
@given(value=any_text, command=st.booleans())
def test_systemd_quote_round_trips_and_stays_on_one_line(value: str, command: bool) -> None:
    if _unusable(value):
        with pytest.raises(ConfigError):
            systemd_quote(value, command=command)
        return
    quoted = systemd_quote(value, command=command)
    assert "\n" not in quoted and "\r" not in quoted
    assert all(ch == "\t" or ord(ch) >= 0x20 for ch in quoted if ord(ch) < 0x80)
    word, rest = systemd_unquote_word(quoted, command=command)
    assert rest == ""
    assert word == value


@settings(max_examples=200, deadline=None)
@given(argv=st.lists(st.text(alphabet=ANY_CHARACTER, max_size=20), min_size=1, max_size=5))
def test_shell_join_runs_exactly_argv(argv: list[str]) -> None:
    if any(_unusable(a) for a in argv):
        with pytest.raises(ConfigError):
            shell_join(argv)
        return
    assert shlex.split(shell_join(argv)) == argv


def test_shell_join_through_a_real_shell() -> None:
    argv = ["; touch /nonexistent/x", "$(id)", "`id`", "a'b", 'c"d', "\n", "*"]
    out = subprocess.run(["/bin/sh", "-c", "printf '%s\\0' " + shell_join(argv)], capture_output=True, check=True)
    assert out.stdout.decode().split("\0")[:-1] == argv


def test_export_lines_give_the_shell_each_value_exactly() -> None:
    environment = {"A": "x y", "B": "it's $HOME `id` \\", "C": "", "D": "line\nbreak"}
    script = "\n".join(export_lines(environment)) + "\nexec /usr/bin/env -0"
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, check=True, env={}).stdout
    seen = dict(item.split("=", 1) for item in out.decode().split("\0") if item)
    assert {k: seen.get(k) for k in environment} == environment
    with pytest.raises(ConfigError):
        export_lines({"A B": "x"})
