"""``--speculative-config`` read from a rendered command whatever its quoting (issue 58, R11): single-quoted,
double-quoted with its JSON quotes backslash-escaped (as inside ``bash -c "..."``), unquoted, over several lines;
the draft length (``chain_length``), the JSON (``speculative_configs``) and a deployed schedule
(``command_schedule``) agree on each."""

from __future__ import annotations

import pytest

from orchestrator.analysis.drafts import command_schedule
from orchestrator.analysis.roles import chain_length, speculative_configs

FORMS = [
    pytest.param(
        """vllm serve m --speculative-config '{"method": "ngram", "num_speculative_tokens": 4}'""", id="single"
    ),
    pytest.param(
        """bash -c "vllm serve m --speculative-config """
        """'{\\"method\\": \\"ngram\\", \\"num_speculative_tokens\\": 4}'" """,
        id="escaped-in-bash-c",
    ),
    pytest.param(
        """vllm serve m --speculative-config "{\\"method\\": \\"ngram\\", \\"num_speculative_tokens\\": 4}" --port 8""",
        id="escaped-double-quoted",
    ),
    pytest.param(
        """vllm serve m --speculative-config {"method":"ngram","num_speculative_tokens":4} --port 8""", id="unquoted"
    ),
    pytest.param("""vllm serve m --speculative_config={"method":"ngram","num_speculative_tokens":4}""", id="equals"),
    pytest.param(
        """vllm serve m --speculative-config '{\n  "method": "ngram",\n  "num_speculative_tokens": 4\n}'""",
        id="multi-line",
    ),
    pytest.param(
        """vllm serve m --speculative-config '{"method": "ngram", "num_speculative_tokens": "4"}'""",
        id="string-value",
    ),
    pytest.param(
        """bash -c "vllm serve m --speculative-config """
        """'{\\"method\\": \\"ngram\\", \\"num_speculative_tokens\\": \\"4\\"}'" """,
        id="escaped-string-value",
    ),
]


@pytest.mark.parametrize("command", FORMS)
def test_the_draft_length_is_read_from_every_form(command: str) -> None:
    assert chain_length({}, command) == 4


@pytest.mark.parametrize("command", FORMS)
def test_the_json_is_read_whole_from_every_form(command: str) -> None:
    (doc,) = speculative_configs(command)
    assert doc["method"] == "ngram" and int(doc["num_speculative_tokens"]) == 4


def test_the_escaped_backslash_in_a_json_string_is_undone_once() -> None:
    # bash -c "... '{\"path\": \"a\\\\b\"}'": the shell word holds {"path": "a\\b"}, JSON's a\b.
    command = r"""bash -c "serve --speculative-config '{\"path\": \"a\\\\b\", \"num_speculative_tokens\": 2}'" """
    assert list(speculative_configs(command)) == [{"path": "a\\b", "num_speculative_tokens": 2}]


def test_a_value_that_is_no_json_object_is_left_out_and_the_next_flag_is_read() -> None:
    command = "serve --speculative-config [1] --speculative-config '{\"num_speculative_tokens\": 3}'"
    assert list(speculative_configs(command)) == [{"num_speculative_tokens": 3}]
    assert list(speculative_configs("serve --speculative-config '{oops'")) == []
    assert list(speculative_configs(None)) == []


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(
            """vllm serve m --speculative-config '{"num_speculative_tokens": 4, """
            """"num_speculative_tokens_per_batch_size": [[1, 1, 4], [2, 8, 1]]}'""",
            id="single",
        ),
        pytest.param(
            """bash -c "vllm serve m --speculative-config '{\\"num_speculative_tokens\\": 4, """
            """\\"num_speculative_tokens_per_batch_size\\": [[1, 1, 4], [2, 8, 1]]}'" """,
            id="escaped",
        ),
        pytest.param(
            """vllm serve m --speculative-config {"num_speculative_tokens":4,"""
            """"num_speculative_tokens_per_batch_size":[[1,1,4],[2,8,1]]} --port 8""",
            id="unquoted",
        ),
    ],
)
def test_a_deployed_schedule_is_read_from_every_form(command: str) -> None:
    assert command_schedule(command) == (4, ((1, 1, 4), (2, 8, 1)))
