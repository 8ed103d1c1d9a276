"""What a report writes of a name anyone may have put in a run (issue 58, R12/N21): the break-even table of
report.md and report.html carried raw ESC, BEL and CR from a variant's name, and summary.csv wrote a
``=HYPERLINK(...)`` cell that a spreadsheet runs as a formula. A real run directory, the real report."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from orchestrator.quoting import spreadsheet_cell
from orchestrator.report.build import build_report
from orchestrator.report.render import Heading, Items, Paragraph, Table, to_html, to_markdown
from orchestrator.runs.store import RunStore
from tests.unit.synthetic_runs import append_point, plan_of

VARIANT = "chain\x1b[31m\x07\rX"
FORMULA = '=HYPERLINK("http://example.invalid/x","click")'


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        pytest.param(FORMULA, "'" + FORMULA, id="equals"),
        pytest.param("+1+2", "'+1+2", id="plus"),
        pytest.param("-2+3", "'-2+3", id="minus"),
        pytest.param("@SUM(A1)", "'@SUM(A1)", id="at"),
        pytest.param("\tx", "'\\tx", id="tab"),
        pytest.param("\rx", "'\\rx", id="carriage-return"),
        pytest.param("chain(k=2)", "chain(k=2)", id="a-label-is-left-alone"),
        pytest.param("a\x1bb", "a\\x1bb", id="escaped-inside"),
    ],
)
def test_a_text_cell_no_spreadsheet_runs(text: str, cell: str) -> None:
    assert spreadsheet_cell(text) == cell


def test_every_block_of_both_renderings_escapes_control_characters() -> None:
    import pandas as pd

    blocks = [
        Heading(f"h {VARIANT}"),
        Paragraph(f"p {VARIANT}"),
        Items([("warning", f"i {VARIANT}", [f"e {VARIANT}"])]),
        Table(pd.DataFrame([{"variant": VARIANT, "n": "two\nlines"}]), f"c {VARIANT}"),
    ]
    for text in (to_markdown(blocks), to_html(blocks, title="t")):
        assert not {"\x1b", "\x07", "\r"} & set(text), repr(text)
        assert "chain\\x1b[31m\\a\\rX" in text
    assert "two<br>lines" in to_markdown(blocks)  # a line break in a cell is still one


def test_the_break_even_table_and_summary_csv_show_hostile_names_as_text(tmp_path: Path) -> None:
    configs = [("autoregressive", {}, True), (VARIANT, {}, False), (FORMULA, {}, False)]
    store = RunStore.create(tmp_path, "hostile", {"name": "hostile"}, plan_of(configs, [1, 8]))
    for i, (variant, params, baseline) in enumerate(configs):
        for load, gain in ((1, 1.5), (8, 0.7)):  # a speculative variant wins at C=1 and loses at C=8
            tok_s = 100.0 * load * (1.0 if baseline else gain)
            append_point(store, "hostile", index=i, variant=variant, params=params, load=load, repeat=1,
                         tok_s=tok_s, baseline=baseline)  # fmt: skip
    store.set_state("done")
    store.release()
    result = build_report(store.path)
    assert result.answer.break_even, "the run has a break-even table"
    for name in ("report.md", "report.html"):
        text = (store.path / name).read_text()
        assert not {"\x1b", "\x07", "\r"} & set(text), f"a raw control character in {name}"
        assert "chain\\x1b[31m\\a\\rX" in text
    with (store.path / "summary.csv").open(newline="") as stream:
        cells = [cell for row in csv.reader(stream) for cell in row]
    assert not any(cell.startswith(("=", "+", "@", "\t", "\r")) for cell in cells), cells
    assert any(cell.startswith("'" + FORMULA) for cell in cells), cells
