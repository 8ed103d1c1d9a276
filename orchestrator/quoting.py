"""Quoting for the languages specsweep writes on a host: POSIX shell command lines, systemd unit files and
Slurm batch scripts.

Nothing that comes from an experiment file reaches a shell or a unit file without passing through here:

- shell arguments go through :func:`shlex.quote` (:func:`shell_join`), so a ``;``, ``$(...)``, a backquote
  or a newline is data, never syntax;
- a service command (``exec_start``, a process ``command``) is split into words once, the way a POSIX shell
  splits them (quotes and backslashes honoured) but with no shell ever running it: no expansion, no
  operators, no redirections (:func:`split_command`);
- every word written into a unit file is double-quoted with systemd's own escapes (:func:`systemd_quote`):
  backslash and double quote escaped, control characters (a newline above all) written as C escapes so one
  value can never start a second line, ``%`` doubled so no specifier expands, and in command lines ``$``
  doubled so systemd substitutes no environment variable;
- unit names and environment variable names are validated against systemd's grammar;
- a ``#`` comment line (a unit file's, a batch script's) holds printable ASCII only (:func:`sanitize_comment`),
  so no value can end the comment and start a line of its own;
- an ``#SBATCH`` directive is one line (:func:`sbatch_directive`): sbatch reads directives only up to the
  first line that is neither a comment nor blank (sbatch(1), "The batch script may contain options preceded
  with #SBATCH before any executable commands"), so a value that started a new line would both run as a
  command and hide every directive after it.

A violation is a :class:`~orchestrator.errors.ConfigError`: it comes from the experiment file.
"""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Iterable, Mapping

from orchestrator.errors import ConfigError

__all__ = [
    "environment_line",
    "environment_lines",
    "exec_start_value",
    "export_lines",
    "one_line",
    "render_unit_template",
    "sanitize_comment",
    "sbatch_directive",
    "shell_join",
    "shell_quote",
    "split_command",
    "spreadsheet_cell",
    "systemd_quote",
    "unit_words",
    "usable_text",
    "validate_env_name",
    "validate_unit_name",
    "visible",
]

# systemd unit-name grammar (src/basic/unit-name.c): a prefix of [A-Za-z0-9:_.\-], an optional @instance,
# a type suffix; 255 bytes at most. Only services make sense for specsweep.
_UNIT_NAME = re.compile(r"[A-Za-z0-9:_.\\-]+(@[A-Za-z0-9:_.\\-]*)?\.service")
_UNIT_NAME_MAX = 255
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# First-word prefixes systemd interprets in ExecStart= (systemd.service(5)): they would change the meaning of
# the command (ignore failure, argv[0] override, privileges), so a program may not start with one.
_EXEC_PREFIXES = "-@:+!|"
_C_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}


def usable_text(value: str, *, what: str = "a value") -> str:
    """``value`` unchanged, or a ConfigError when no command line, environment or file can hold it: a NUL
    ends a C string (argv, environ, a unit-file line), and a lone surrogate (what a YAML ``"\\ud800"`` escape
    makes) has no UTF-8 encoding."""
    if "\0" in value:
        raise ConfigError(f"{what} contains a NUL character, which no command line, environment or file can hold")
    if any("\ud800" <= ch <= "\udfff" for ch in value):
        raise ConfigError(f"{what} contains a lone surrogate ({value!a}), which has no UTF-8 encoding")
    return value


def shell_quote(word: str) -> str:
    """One word for a POSIX shell, quoted when needed (``shlex.quote``)."""
    return shlex.quote(usable_text(word, what="a shell word"))


def shell_join(argv: Iterable[str]) -> str:
    """A command line for a POSIX shell that runs exactly ``argv``."""
    return " ".join(shell_quote(str(a)) for a in argv)


def split_command(command: str, *, what: str = "command") -> list[str]:
    """Split a service command line into words as a POSIX shell would, without any expansion.

    Quotes and backslashes group words (``--arg "a b"`` is two words); ``;``, ``|``, ``$(...)``, ``*`` and
    the like stay literal characters inside words. An empty command or an unbalanced quote is an error.
    """
    usable_text(command, what=what)
    try:
        argv = shlex.split(command, comments=False, posix=True)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise ConfigError(f"cannot split {what} {command!r} into words: {exc}") from exc
    if not argv:
        raise ConfigError(f"{what} is empty")
    return argv


def validate_unit_name(name: str) -> str:
    """A valid systemd service name; ``.service`` is appended when no suffix is given.

    Anything outside systemd's unit-name alphabet (spaces, slashes, quotes, ``;``, newlines) is refused, so a
    unit name is safe both as a path component and as a shell word.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError("the unit name is empty", key="service.unit")
    candidate = name if name.endswith(".service") else f"{name}.service"
    if "." in name and not name.endswith(".service"):
        suffix = name.rsplit(".", 1)[1]
        if suffix in {"socket", "target", "timer", "mount", "path", "slice", "scope", "device", "swap"}:
            raise ConfigError(f"unit {name!r} is a .{suffix} unit; specsweep drives .service units", key="service.unit")
    if len(candidate.encode()) > _UNIT_NAME_MAX or not _UNIT_NAME.fullmatch(candidate):
        raise ConfigError(
            f"{name!r} is not a valid systemd service name (letters, digits and :_.-\\ only, an optional @instance)",
            key="service.unit",
        )
    if candidate[0] in ".@-":  # a leading "-" would read as an option to systemctl and journalctl
        raise ConfigError(f"{name!r} is not a valid systemd service name", key="service.unit")
    return candidate


def validate_env_name(name: str) -> str:
    """An environment variable name as systemd and POSIX shells accept it (``[A-Za-z_][A-Za-z0-9_]*``)."""
    if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
        raise ConfigError(
            f"{name!r} is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)", key="service.environment"
        )
    return name


def systemd_quote(value: str, *, command: bool) -> str:
    """``value`` as one double-quoted word of a unit-file setting, unquoting to exactly ``value``.

    ``command=True`` is for ExecStart= words, where systemd also substitutes ``$VAR``; there ``$`` is doubled.
    Specifiers (``%n``, ``%h``…) are expanded in both, so ``%`` is always doubled.
    """
    usable_text(value, what="a value for a systemd unit")
    out = ['"']
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "%":
            out.append("%%")
        elif ch == "$" and command:
            out.append("$$")
        elif ch in _C_ESCAPES:
            out.append(_C_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif 0x80 <= ord(ch) < 0xA0 or ch in "\u2028\u2029":
            # C1 controls and Unicode line separators: printable as escapes, never as raw characters.
            out.append("".join(f"\\x{b:02x}" for b in ch.encode()))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def exec_start_value(argv: list[str]) -> str:
    """The right-hand side of an ``ExecStart=`` line that runs exactly ``argv`` (no shell, no expansion)."""
    if not argv:
        raise ConfigError("the service command is empty")
    program = argv[0]
    if program[:1] in _EXEC_PREFIXES:
        raise ConfigError(
            f"the program {program!r} starts with {program[0]!r}, which systemd would read as an ExecStart "
            "prefix; give the program's path"
        )
    return " ".join(systemd_quote(a, command=True) for a in argv)


def environment_line(name: str, value: str) -> str:
    """One ``Environment=`` line setting ``name`` to exactly ``value``."""
    validate_env_name(name)
    return "Environment=" + systemd_quote(f"{name}={value}", command=False)


def environment_lines(environment: Mapping[str, str]) -> list[str]:
    """``Environment=`` lines for a mapping, in its order."""
    return [environment_line(k, str(v)) for k, v in environment.items()]


def export_lines(environment: Mapping[str, str]) -> list[str]:
    """``export NAME='value'`` shell lines for a mapping, in its order: the environment set by the shell that
    execs the server, not by ``env NAME=value program``, whose argv shows the values until it execs."""
    return [f"export {validate_env_name(k)}={shell_quote(str(v))}" for k, v in environment.items()]


def sanitize_comment(text: str, limit: int = 200) -> str:
    """Text safe for a ``#`` comment line in a unit file or a shell script: printable ASCII only, one line."""
    cleaned = "".join(ch if 0x20 <= ord(ch) < 0x7F else "?" for ch in text)
    return cleaned[:limit]


_SHOWN_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def visible(text: str) -> str:
    """``text`` with every control character written as its escape (``\\x1b``, ``\\x07``, ``\\n``): a name a
    run holds (a matrix value, a hand-edited record's host) shown in a terminal, report.md or summary.csv can
    then never colour, ring, move the cursor or start a row of its own (issue 49)."""
    if not _SHOWN_CONTROL.search(text):
        return text
    return _SHOWN_CONTROL.sub(lambda m: _C_ESCAPES.get(m.group(), m.group().encode("unicode_escape").decode()), text)


#: What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection"): ``=HYPERLINK(...)`` in a cell
#: of summary.csv ran when the file was opened.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(text: str) -> str:
    """``text`` as a CSV text cell no spreadsheet runs: its control characters escaped (:func:`visible`) and, when
    it starts as a formula would (``= + - @``, a tab or a carriage return), a ``'`` put before it, the usual
    OWASP way (a spreadsheet shows the text, the quote hidden)."""
    shown = visible(text)
    return "'" + shown if text.startswith(_FORMULA_START) else shown


def one_line(value: str, *, what: str = "a value") -> str:
    """``value`` unchanged, or a ConfigError when it holds a control character (a newline above all), which
    would start a line of its own in a script even inside quotes."""
    usable_text(value, what=what)
    hit = next((ch for ch in value if ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 or ch in "\u2028\u2029"), None)
    if hit is not None:
        raise ConfigError(f"{what} cannot contain the control character {hit!r}: {value!a}")
    return value


def sbatch_directive(option: str) -> str:
    """The ``#SBATCH`` line of one sbatch option (``--name=value``), its value shell-quoted as sbatch splits it;
    a ConfigError when the option holds a control character, which no directive line can hold."""
    return f"#SBATCH {shell_quote(one_line(option, what='an sbatch option'))}"


# ------------------------------------------------------------------ mode: unit, a whole unit file from a template
#
# In a unit template the literal text is the user's own systemd syntax; only the values filled into it are
# escaped, each by the rules of the setting it lands in (systemd src/core/load-fragment.c, src/basic/
# extract-word.c; systemd.syntax(7), systemd.service(5), systemd.exec(5)):
#
# - a command line (ExecStart= and the other Exec*= commands): systemd splits the value into words with
#   extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE), quotes may open anywhere in a word and escapes work
#   inside both kinds of quotes; config_parse_exec reads the prefixes "-@:+!" off the *unquoted* first word, so
#   quoting cannot neutralise them; a lone unquoted ";" separates commands; specifiers ("%h") are resolved in
#   every word and "$VAR"/"${VAR}" substituted at exec time unless the ":" prefix is given. A value outside quotes
#   is split into words the way drop-in mode splits the whole command (POSIX shell rules, no expansion); each
#   word is written bare when it holds only [A-Za-z0-9_+=:,./@-], else double-quoted with "%" and "$" doubled.
#   A value inside the template's own quotes is escaped for those quotes. A value may not begin a command's
#   first word with a prefix character, nor put "$", a quote, a backslash or a control character in it.
# - Environment=: config_parse_environ splits the value into words the same way, each word one NAME=VALUE
#   assignment with specifiers resolved; "$" has no meaning there. A value is one literal piece of its word
#   (quoted, "%" doubled), so a space can never start a second assignment; the rendered line must still be
#   assignments of valid names.
# - any other setting: no escaping exists that every setting honours (some unquote, some read the rest of the
#   line raw, some resolve specifiers, many take "-" or "~" prefixes), so a value must be plain: letters,
#   digits and ._:,=@+/- only, and no prefix character where a word starts.
# - comments: printable text only. Section headers, setting names and lines of their own: no placeholders.
#
# A control character can be written as an escape in quoted words; elsewhere it could end the line (systemd
# reads "\n", "\r" and NUL as line ends) and is refused, like NUL and lone surrogates everywhere.

_EXEC_SETTINGS = frozenset(
    {
        "ExecStart",
        "ExecStartPre",
        "ExecStartPost",
        "ExecCondition",
        "ExecReload",
        "ExecStop",
        "ExecStopPre",
        "ExecStopPost",
    }
)
_UNIT_WHITESPACE = " \t\n\r"  # systemd's WHITESPACE
_SHELL_WHITESPACE = " \t\r\n"  # shlex's, in posix mode
_BARE_WORD = re.compile(r"[A-Za-z0-9_+=:,./@-]+")
_PLAIN_CHARS = "._:,=@+/-"
_COMMAND_PREFIXES = "-@:+!"
_WORD_PREFIXES = "-+!@:~|;"
_MARK = re.compile("\0([0-9]+)\0")
_UNESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "s": " "}
_UNESCAPES.update({"\\": "\\", '"': '"', "'": "'"})


class _UnitProblem(Exception):
    pass


def _escape_for_quotes(value: str, quote: str, *, dollar: bool) -> str:
    """``value`` as the inside of a ``quote``-quoted systemd word (the quotes themselves are the template's)."""
    body = systemd_quote(value, command=dollar)[1:-1]  # escapes \\ \" % $ and every control character
    return body.replace("'", "\\'") if quote == "'" else body


def _bare_or_quoted(word: str, *, dollar: bool) -> str:
    return word if _BARE_WORD.fullmatch(word) else systemd_quote(word, command=dollar)


def _trailing_space(value: str) -> bool:
    """Whether ``value`` ends with whitespace a shell would not keep in the last word (not backslash-escaped)."""
    stripped = value.rstrip(_SHELL_WHITESPACE)
    if stripped == value:
        return False
    run = len(stripped) - len(stripped.rstrip("\\"))
    return run % 2 == 0


class _ValueLexer:
    """Follows systemd's word splitting through one setting's value, literal text and filled-in values alike,
    to know at each placeholder whether it stands inside quotes, inside a word, or in a command's first word."""

    def __init__(self, mode: str) -> None:
        self.mode = mode  # "exec", "env" or "plain"
        self.quote = ""
        self.escaped = False
        self.in_word = False
        self.word_raw = ""
        self.word_has_value = False
        self.first = mode == "exec"
        self.first_text = ""  # the unquoted text of the command's first word so far
        self.no_env = False

    # -- literal text ----------------------------------------------------------------------------------

    def literal(self, ch: str) -> None:
        if self.escaped:
            self.escaped = False
            self._add(ch)
            return
        if self.quote:
            if ch == self.quote:
                self.quote = ""
            elif ch == "\\":
                self.escaped = True
            else:
                self._add(ch)
            self.word_raw += ch
            return
        if ch in _UNIT_WHITESPACE:
            self.end_word()
            return
        self.in_word = True
        self.word_raw += ch
        if ch in "'\"":
            self.quote = ch
        elif ch == "\\":
            self.escaped = True
        else:
            self._add(ch)

    def _add(self, text: str) -> None:
        self.in_word = True
        if self.first:
            self.first_text += text

    def end_word(self) -> None:
        if not self.in_word:
            return
        if self.mode == "exec":
            if self.word_raw == ";" and not self.word_has_value:
                self.first, self.first_text, self.no_env = True, "", False  # a new command begins
            elif self.first:
                prefixes = self.first_text[: len(self.first_text) - len(self.first_text.lstrip(_COMMAND_PREFIXES))]
                self.first, self.no_env = False, ":" in prefixes
                self.first_text = ""
        self.in_word, self.word_raw, self.word_has_value = False, "", False

    # -- a filled-in value -----------------------------------------------------------------------------

    def value(self, value: str) -> str:
        if self.escaped:
            raise _UnitProblem("a placeholder directly after a backslash would have its first character escaped")
        if self.mode == "plain":
            return self._plain(value)
        if self.quote:
            if self.first:
                self._program_piece(value)
            self._add(value)
            self.word_has_value = True
            return _escape_for_quotes(value, self.quote, dollar=self.mode == "exec" and not self.no_env)
        if self.mode == "env":
            if not value:
                return ""
            self.in_word, self.word_has_value = True, True
            return value if _BARE_WORD.fullmatch(value) else systemd_quote(value, command=False)
        return self._command_words(value)

    def _command_words(self, value: str) -> str:
        try:
            words = shlex.split(value, comments=False, posix=True)
        except ValueError as exc:
            raise _UnitProblem(f"cannot split the value {value!r} into words: {exc}") from None
        out: list[str] = []
        if value[:1] in _SHELL_WHITESPACE and value and self.in_word:
            self.end_word()
            out.append(" ")
        for index, word in enumerate(words):
            if index:
                self.end_word()
                out.append(" ")
            if self.first:
                self._program_piece(word)
            out.append(_bare_or_quoted(word, dollar=not self.no_env))
            self._add(word)
            self.word_raw += "w"
            self.word_has_value = True
        if words and _trailing_space(value):
            self.end_word()
            out.append(" ")
        return "".join(out)

    def _program_piece(self, text: str) -> None:
        """A value that becomes (part of) the program path of a command."""
        at_start = self.first_text.strip(_COMMAND_PREFIXES) == ""
        if at_start and text[:1] in _COMMAND_PREFIXES + ";":
            raise _UnitProblem(
                f"the value {text!r} would begin the command with {text[0]!r}, which systemd reads as a prefix "
                "(-@:+! change how and with which privileges it runs; ';' separates commands)"
            )
        bad = next((ch for ch in text if ch in "$\"'\\" or not ch.isprintable()), None)
        if bad is not None:
            raise _UnitProblem(f"the value {text!r} puts {bad!r} into the program path of the command")

    def _plain(self, value: str) -> str:
        bad = next((ch for ch in value if not (ch.isalnum() or ch in _PLAIN_CHARS)), None)
        if bad is not None:
            raise _UnitProblem(
                f"the value {value!r} holds {bad!r}: a value in this setting may only hold letters, digits and "
                f"{_PLAIN_CHARS} (values with spaces or other characters belong in ExecStart= or Environment=)"
            )
        if not self.in_word and not self.quote and value[:1] in _WORD_PREFIXES:
            raise _UnitProblem(
                f"the value {value!r} would begin a word with {value[0]!r}, which many settings read as a prefix"
            )
        if value:
            self.in_word = True
        return value


def _logical_lines(lines: list[str]) -> list[list[int]]:
    """Group physical lines (indexes) into systemd's logical lines (src/shared/conf-parser.c): a comment line is
    skipped before anything else, even inside a continuation; any other line whose trailing backslashes are odd
    in number continues on the next line."""
    groups: list[list[int]] = []
    current: list[int] | None = None
    for index, line in enumerate(lines):
        if line.lstrip(_UNIT_WHITESPACE)[:1] in ("#", ";"):
            groups.append([index])
            continue
        if current is None:
            current = [index]
            groups.append(current)
        else:
            current.append(index)
        if (len(line) - len(line.rstrip("\\"))) % 2 == 0:
            current = None
    return groups


def _fill_comment(line: str, values: list[str], number: int) -> str:
    def fill(match: re.Match[str]) -> str:
        value = values[int(match.group(1))]
        if any(not ch.isprintable() for ch in value) or value.endswith("\\"):
            raise ConfigError(
                f"unit_file line {number}: the value {value!r} in a comment holds a control character or ends "
                "with a backslash (it could start or continue a line)",
                key="service.unit_file",
            )
        return value

    return _MARK.sub(fill, line)


def render_unit_template(template: str, values: Mapping[str, object]) -> str:
    """The unit file ``template`` with every placeholder filled by the rules of the setting it stands in.

    ``values`` maps placeholder names to values (stringified like :func:`orchestrator.templates.render`). A
    value that cannot be made safe where it stands is a :class:`ConfigError` naming the template line.
    """
    from orchestrator.templates import fields, render

    names = fields(template)
    filled = [render("{" + name + "}", values) for name in names]
    # The template with each placeholder replaced by a NUL-delimited mark (no NUL can come from the file), so
    # the structure is read from the user's text alone.
    marked_parts: list[str] = []
    index_of = {name: i for i, name in enumerate(names)}
    for literal, name, _spec, _conv in string.Formatter().parse(template):
        marked_parts.append(literal)
        if name is not None:
            marked_parts.append(f"\0{index_of[name]}\0")
    marked = "".join(marked_parts)
    for value in filled:
        try:
            usable_text(value, what="a value in the unit file")
        except ConfigError as exc:
            raise ConfigError(exc.message, key="service.unit_file") from None
    lines = marked.split("\n")
    out = list(lines)
    for group in _logical_lines(lines):
        first = lines[group[0]]
        if "\0" not in "".join(lines[i] for i in group):
            continue
        number = group[0] + 1
        stripped = first.lstrip(" \t")
        if stripped[:1] in ("#", ";"):
            for i in group:
                out[i] = _fill_comment(lines[i], filled, i + 1)
            continue
        key, sep, _rest = first.partition("=")
        if stripped.startswith("[") or not sep or "\0" in key:
            raise ConfigError(
                f"unit_file line {number}: a placeholder may only stand in a setting's value (after 'Name='), "
                "not in a section header, a setting's name or a line of its own",
                key="service.unit_file",
            )
        setting = key.strip()
        mode = "exec" if setting in _EXEC_SETTINGS else "env" if setting == "Environment" else "plain"
        try:
            out_lines, value = _fill_setting(lines, group, len(key) + 1, mode, filled)
        except _UnitProblem as problem:
            raise ConfigError(f"unit_file line {number} ({setting}=): {problem}", key="service.unit_file") from None
        for i, text in zip(group, out_lines, strict=True):
            out[i] = text
        if mode == "env":
            _check_assignments(value, number)
    return "\n".join(out)


def _fill_setting(
    lines: list[str], group: list[int], value_start: int, mode: str, filled: list[str]
) -> tuple[list[str], str]:
    """The filled-in physical lines of one setting, and its value as systemd reads it (continuations joined)."""
    lexer = _ValueLexer(mode)
    result: list[str] = []
    value: list[str] = []
    for position, i in enumerate(group):
        line = lines[i]
        start = value_start if position == 0 else 0
        continued = position < len(group) - 1
        body = line[start : len(line) - 1] if continued else line[start:]
        out: list[str] = []
        at = 0
        for match in _MARK.finditer(body):
            for ch in body[at : match.start()]:
                lexer.literal(ch)
            out.append(body[at : match.start()])
            out.append(lexer.value(filled[int(match.group(1))]))
            at = match.end()
        for ch in body[at:]:
            lexer.literal(ch)
        out.append(body[at:])
        value.extend(out)
        if continued:
            lexer.literal(" ")  # systemd replaces the continuation backslash with a space
            value.append(" ")
            out.append("\\")
        result.append(line[:start] + "".join(out))
    if lexer.quote:
        raise _UnitProblem("the setting's value leaves a quote open")
    return result, "".join(value)


def unit_words(value: str) -> list[str]:
    """The words systemd's extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE) finds in a setting's value
    (src/basic/extract-word.c): quotes open anywhere, escapes work outside and inside both kinds of quotes.
    Raises ValueError where systemd would refuse the value (an open quote, an unknown escape)."""
    words: list[str] = []
    i, n = 0, len(value)
    while True:
        while i < n and value[i] in _UNIT_WHITESPACE:
            i += 1
        if i >= n:
            return words
        word: list[str] = []
        quote = ""
        while i < n:
            ch = value[i]
            if ch == "\\":
                text, i = _unescape(value, i + 1)
                word.append(text)
                continue
            if quote:
                if ch == quote:
                    quote = ""
                else:
                    word.append(ch)
            elif ch in "'\"":
                quote = ch
            elif ch in _UNIT_WHITESPACE:
                break
            else:
                word.append(ch)
            i += 1
        if quote:
            raise ValueError("unbalanced quoting")
        words.append(_utf8("".join(word)))


def _unescape(value: str, i: int) -> tuple[str, int]:
    """One C escape after a backslash at ``value[i - 1]``: (text, next index). Bytes from \\x and octal
    escapes are kept as U+DCxx surrogate escapes and joined into UTF-8 by ``_utf8``."""
    if i >= len(value):
        raise ValueError("a trailing backslash")
    ch = value[i]
    if ch in _UNESCAPES:
        return _UNESCAPES[ch], i + 1
    if ch == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", value[i + 1 : i + 3]):
        byte = int(value[i + 1 : i + 3], 16)
        if byte == 0:
            raise ValueError("an escaped NUL")
        return (chr(byte) if byte < 0x80 else chr(0xDC00 + byte)), i + 3
    if ch in "01234567" and re.fullmatch(r"[0-7]{3}", value[i : i + 3]):
        byte = int(value[i : i + 3], 8)
        if byte == 0 or byte > 0xFF:
            raise ValueError("a bad octal escape")
        return (chr(byte) if byte < 0x80 else chr(0xDC00 + byte)), i + 3
    for letter, size in (("u", 4), ("U", 8)):
        if ch == letter and re.fullmatch(f"[0-9a-fA-F]{{{size}}}", value[i + 1 : i + 1 + size]):
            code = int(value[i + 1 : i + 1 + size], 16)
            if code == 0 or code > 0x10FFFF:
                raise ValueError("a bad unicode escape")
            return chr(code), i + 1 + size
    raise ValueError(f"an unknown escape \\{ch}")


def _utf8(text: str) -> str:
    raw = text.encode("utf-8", "surrogateescape")
    return raw.decode("utf-8")


def _check_assignments(value: str, number: int) -> None:
    """Environment= as filled in must still be NAME=VALUE assignments only (env_assignment_is_valid)."""
    try:
        words = unit_words(value)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"unit_file line {number} (Environment=): the filled-in value cannot be read back: {exc}",
            key="service.unit_file",
        ) from None
    if not words:
        raise ConfigError(
            f"unit_file line {number} (Environment=): the filled-in line is empty, which would reset every "
            "Environment= before it",
            key="service.unit_file",
        )
    for word in words:
        name, sep, _ = word.partition("=")
        if not sep or not _ENV_NAME.fullmatch(name):
            raise ConfigError(
                f"unit_file line {number} (Environment=): {word!r} is not a NAME=VALUE assignment",
                key="service.unit_file",
            )
