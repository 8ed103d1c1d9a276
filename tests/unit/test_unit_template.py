"""mode: unit: values filled into a whole unit file are escaped by systemd's rules for the setting they land in.

The rendered settings are read back with :func:`orchestrator.quoting.unit_words` (a model of systemd's
extract_first_word with EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE) followed by specifier (``%%``) and, for commands,
``$$`` resolution, as systemd does; tests/system/test_hostile_values.py checks the same values on a real systemd.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deployments import build_plan
from orchestrator.quoting import render_unit_template, unit_words

# Any code point, lone surrogates (category Cs, which hypothesis leaves out by default) and NUL weighted in:
# YAML escapes make both out of a valid UTF-8 file.
ANY_CHARACTER = st.one_of(
    st.characters(codec=None, exclude_categories=()), st.integers(0xD800, 0xDFFF).map(chr), st.just("\0")
)


def resolve(word: str, *, dollar: bool) -> str:
    """Specifiers, then (commands without the ':' prefix) environment variables, as systemd resolves them; an
    unescaped '%x' or '$X' fails the test: no value may reach systemd as a specifier or a variable."""
    out, i = [], 0
    while i < len(word):
        ch = word[i]
        if ch == "%" or (dollar and ch == "$"):
            assert word[i + 1 : i + 2] == ch, f"unescaped {word[i : i + 2]!r} in {word!r}"
            i += 2
        else:
            i += 1
        out.append(ch)
    return "".join(out)


def setting(text: str, name: str) -> list[str]:
    """The value of the one ``name=`` line of a rendered unit file, as words."""
    lines = [ln for ln in text.splitlines() if ln.startswith(name + "=")]
    assert len(lines) == 1, text
    return unit_words(lines[0][len(name) + 1 :])


def argv(text: str, setting_name: str = "ExecStart", *, dollar: bool = True) -> list[str]:
    return [resolve(w, dollar=dollar) for w in setting(text, setting_name)]


def env(text: str) -> list[str]:
    return [resolve(w, dollar=False) for w in setting(text, "Environment")]


def render(template: str, **values: object) -> str:
    return render_unit_template(template, values)


# ---------------------------------------------------------------------------------------------- the cases


def test_a_space_in_an_environment_value_cannot_add_an_assignment() -> None:
    text = render("[Service]\nEnvironment=X={x}\n", x="a LD_PRELOAD=/tmp/evil.so")
    assert text == '[Service]\nEnvironment=X="a LD_PRELOAD=/tmp/evil.so"\n'
    assert env(text) == ["X=a LD_PRELOAD=/tmp/evil.so"]


@pytest.mark.parametrize("prefix", ["+", "-", "@", ":", "!", "!!", ";"])
def test_a_value_cannot_give_execstart_a_prefix(prefix: str) -> None:
    with pytest.raises(ConfigError, match=r"unit_file line 2 \(ExecStart=\): .*prefix"):
        render("[Service]\nExecStart={program} --port 1\n", program=prefix + "/bin/sh")
    with pytest.raises(ConfigError, match="prefix"):  # after the template's own prefix, quoted or not
        render('[Service]\nExecStart=-"{program}" --port 1\n', program=prefix + "/bin/sh")


def test_the_templates_own_prefix_stays_and_a_value_may_follow_it() -> None:
    text = render("[Service]\nExecStart=-{program} --port 1\n", program="/opt/venv/bin/python")
    assert "ExecStart=-/opt/venv/bin/python --port 1" in text


@pytest.mark.parametrize("value", ["%h", "%n %i", "100%", "$HOME", "${PATH}", "$$", "a$b%c"])
def test_specifiers_and_variables_in_values_stay_literal(value: str) -> None:
    text = render("[Service]\nExecStart=/bin/echo {v}\nEnvironment=V={v}\n", v=value)
    assert argv(text) == ["/bin/echo", *shlex.split(value)]
    assert env(text) == [f"V={value}"]


def test_without_variable_substitution_dollars_are_not_doubled() -> None:
    # The ':' prefix turns off $VAR substitution (systemd.service(5)): "$$" would stay "$$".
    text = render("[Service]\nExecStart=:/bin/echo {v}\n", v="$HOME %h")
    assert argv(text, dollar=False) == [":/bin/echo", "$HOME", "%h"]
    assert "$$" not in text


# -------------------------------------------------------------------------------------------- contexts in a line


def test_values_split_into_words_like_a_dropin_command() -> None:
    text = render(
        "[Service]\nExecStart=/opt/py -m sglang.launch_server --port 30001 {spec_args}\n",
        spec_args="--speculative-algorithm DDTREE --speculative-ddtree-budget 7 --name 'a b'",
    )
    assert "--speculative-ddtree-budget 7" in text  # bare where nothing needs quoting (analysis reads it)
    assert argv(text)[5:] == ["--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "7", "--name", "a b"]


def test_a_value_inside_a_word_joins_it() -> None:
    text = render("[Service]\nExecStart=/bin/echo --model={m}/weights x{e}y\n", m="/models/a b", e="")
    assert argv(text) == ["/bin/echo", "--model=/models/a", "b/weights", "xy"]


def test_a_value_inside_the_templates_quotes_stays_inside() -> None:
    hostile = '"; touch /tmp/pwned; "\\'
    text = render("[Service]\nExecStart=/bin/sh -c \"echo {v}\" '{v}'\n", v=hostile)
    assert argv(text) == ["/bin/sh", "-c", f"echo {hostile}", hostile]


def test_a_semicolon_from_a_value_is_an_argument_not_a_separator() -> None:
    text = render("[Service]\nExecStartPre=/bin/echo {v}\n", v="a ; /bin/touch /tmp/pwned")
    assert argv(text, "ExecStartPre") == ["/bin/echo", "a", ";", "/bin/touch", "/tmp/pwned"]
    assert " ; " not in text


def test_after_the_templates_own_separator_a_value_is_a_program_again() -> None:
    template = "[Service]\nType=oneshot\nExecStart=/bin/true ; {program} x\n"
    assert "; /bin/echo x" in render(template, program="/bin/echo")
    with pytest.raises(ConfigError, match="prefix"):
        render(template, program="+/bin/sh")


@pytest.mark.parametrize("value", ["x\nExecStartPre=/bin/touch /tmp/pwned", "y\n[Service]\nUser=root", "a\rb"])
def test_a_newline_cannot_start_a_line(value: str) -> None:
    text = render('[Service]\nExecStart=/bin/echo {v} "{v}"\nEnvironment=V={v}\n', v=value)
    assert text.count("\n") == 3 and "\r" not in text
    assert argv(text) == ["/bin/echo", *shlex.split(value), value]
    assert env(text) == [f"V={value}"]


def test_continuation_lines_are_followed() -> None:
    text = render("[Service]\nExecStart=/bin/echo {a} \\\n  # a comment systemd skips\n  {b}\n", a="1 2", b="'x\\'")
    assert setting(text.replace("\\\n  # a comment systemd skips\n", " "), "ExecStart") == [
        "/bin/echo",
        "1",
        "2",
        "x\\",
    ]


# ------------------------------------------------------------------------------------- what cannot be made safe


@pytest.mark.parametrize(
    ("template", "value", "fragment"),
    [
        pytest.param("[{v}]\nA=1\n", "Service", "section header", id="section"),
        pytest.param("[Service]\n{v}=1\n", "User", "setting's name", id="key"),
        pytest.param("[Service]\n{v}\n", "User=root", "line of its own", id="own-line"),
        pytest.param("[Service]\nUser={v}\n", "root\nExecStartPre=/bin/evil", "may only hold", id="newline-plain"),
        pytest.param("[Service]\nUser={v}\n", "a b", "may only hold", id="space-plain"),
        pytest.param("[Service]\nWorkingDirectory={v}\n", "%h", "may only hold", id="specifier-plain"),
        pytest.param("[Service]\nEnvironmentFile={v}\n", "-/etc/x", "prefix", id="prefix-plain"),
        pytest.param("[Unit]\nDescription=x {v}\n", "-y", "prefix", id="prefix-word"),
        pytest.param("# made for {v}\n[Service]\n", "a\nUser=root", "comment", id="comment-newline"),
        pytest.param("# made for {v}\n[Service]\n", "a\\", "comment", id="comment-backslash"),
        pytest.param("[Service]\nExecStart=/bin/x \\{v}\n", "a", "backslash", id="after-backslash"),
        pytest.param("[Service]\nExecStart=/bin/x {v}\n", "'unclosed", "cannot split", id="unbalanced"),
        pytest.param("[Service]\nExecStart=/opt/{v}/py\n", "$HOME", "program path", id="dollar-program"),
        pytest.param("[Service]\nEnvironment={v}\n", "not an assignment", "NAME=VALUE", id="env-no-name"),
        pytest.param("[Service]\nEnvironment={v}=1\n", "A B", "NAME=VALUE", id="env-bad-name"),
        pytest.param("[Service]\nEnvironment=X=1 {v}\n", "", "NAME=VALUE", id="env-empty-word-ok-but"),
        pytest.param('[Service]\nExecStart=/bin/x "{v}\n', "a", "quote open", id="open-quote"),
        pytest.param("[Service]\nExecStart=/bin/x {v}\n", "a\0b", "NUL", id="nul"),
        pytest.param("[Service]\nExecStart=/bin/x {v}\n", "\ud800", "surrogate", id="surrogate"),
    ],
)
def test_refused(template: str, value: str, fragment: str) -> None:
    if fragment == "NAME=VALUE" and value == "":
        assert env(render(template, v=value)) == ["X=1"]  # an empty value adds nothing: fine
        return
    with pytest.raises(ConfigError, match=fragment) as info:
        render(template, v=value)
    assert info.value.key == "service.unit_file"


def test_plain_values_fill_other_settings() -> None:
    text = render(
        "[Unit]\nDescription=sim {name}\n[Service]\nUser={user}\nWorkingDirectory=/srv/{name}\n",
        name="k26-ddtree.v2",
        user="svc",
    )
    assert text == "[Unit]\nDescription=sim k26-ddtree.v2\n[Service]\nUser=svc\nWorkingDirectory=/srv/k26-ddtree.v2\n"


# -------------------------------------------------------------------------------------------------- any value


@settings(max_examples=400, deadline=None)
@given(value=st.text(alphabet=ANY_CHARACTER, max_size=30))
def test_any_value_lands_literally_or_is_refused(value: str) -> None:
    template = (
        '[Service]\nExecStart=/bin/echo {v}\nExecStartPre=/bin/sh -c "echo {v}" \'{v}\'\nEnvironment=V={v} "W=x {v}"\n'
    )
    try:
        text = render(template, v=value)
    except ConfigError as exc:
        assert exc.key == "service.unit_file"
        try:
            shlex.split(value)
        except ValueError:
            return  # cannot be split into words, as in drop-in mode
        assert "\0" in value or any("\ud800" <= ch <= "\udfff" for ch in value), exc
        return
    text.encode("utf-8")
    assert text.count("\n") == template.count("\n") and "\r" not in text
    assert all(ch == "\t" or ord(ch) >= 0x20 for ch in text.replace("\n", "") if ord(ch) < 0x80)
    assert argv(text) == ["/bin/echo", *shlex.split(value)]
    assert argv(text, "ExecStartPre") == ["/bin/sh", "-c", f"echo {value}", value]
    assert env(text) == [f"V={value}", f"W=x {value}"]


# ---------------------------------------------------------------------------------------- through the experiment

EXPERIMENT = """\
name: unit-mode
host: {ssh: root@gpu-box}
service:
  kind: systemd
  unit: sim.service
  mode: unit
  unit_file: |
    [Unit]
    Description=simulator
    [Service]
    ExecStart=/opt/py -m orchestrator.sim --port 18181 {spec_args}
    Environment=SIM_TAG={tag}
server: {url: "http://gpu-box:18181"}
engine: sim
vars: {tag: "plain"}
variants:
  ar: {spec_args: "--algorithm ar"}
  tree:
    spec_args: "--algorithm ddtree --budget {budget}"
    matrix: {budget: [7, 16]}
baselines: [ar]
load: {concurrency: [1]}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return path


def test_the_plan_carries_the_escaped_unit_file(tmp_path: Path) -> None:
    path = _write(tmp_path, EXPERIMENT.replace('tag: "plain"', 'tag: "a LD_PRELOAD=/tmp/evil.so %h"'))
    plan = build_plan(load_experiment(path))
    unit = plan.deployments[0].command or ""
    assert env(unit) == ["SIM_TAG=a LD_PRELOAD=/tmp/evil.so %h"]
    assert "--algorithm ar" in unit


def test_a_value_that_cannot_be_made_safe_is_refused_at_load_with_file_and_line(tmp_path: Path) -> None:
    text = EXPERIMENT.replace("Description=simulator", "Description=simulator {tag}").replace(
        'tag: "plain"', 'tag: "x\\nExecStartPre=/bin/touch /tmp/pwned"'
    )
    with pytest.raises(ConfigError) as info:
        load_experiment(_write(tmp_path, text))
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'exp.yaml'}:7:3: service.unit_file: ar: unit_file line 2 (Description=)")
    assert "\n" not in message


def test_a_prefix_from_a_matrix_value_is_refused_at_load(tmp_path: Path) -> None:
    text = EXPERIMENT.replace("ExecStart=/opt/py", "ExecStart={py}").replace('tag: "plain"', 'tag: "t", py: "+/opt/py"')
    with pytest.raises(ConfigError, match=r"exp\.yaml:7:3: service\.unit_file: .*line 4 \(ExecStart=\).*prefix"):
        load_experiment(_write(tmp_path, text))
