"""A small document model and its two renderings: Markdown (figures linked) and one self-contained HTML file
(figures embedded as base64 PNG, styles inline, no script, nothing fetched from a network).

Everything that came from a run directory (labels, messages, log lines) is escaped: a log line holding
``<script>`` shows as text, and a control character (ESC, BEL, CR from a variant's name) is written as its
escape (``\x1b``) in both, whatever block holds it: a terminal showing report.md is never coloured or moved.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from orchestrator.quoting import visible
from orchestrator.report.axes import png_axes

__all__ = ["Block", "Evidence", "Heading", "Image", "Items", "Paragraph", "Table", "to_html", "to_markdown"]


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str
    css: str = ""  # "ok", "error", "warning", "muted"


@dataclass
class Items:
    """A bullet list; each item may carry a severity (for colour) and evidence lines (collapsed in HTML)."""

    entries: list[tuple[str, str, list[str]]] = field(default_factory=list)  # (severity, text, evidence)


@dataclass
class Table:
    frame: pd.DataFrame  # already text cells (``tables.formatted``)
    caption: str = ""


@dataclass
class Image:
    path: Path  # the PNG on disk
    relative: str  # its path relative to the report (for Markdown)
    caption: str


@dataclass
class Evidence:
    title: str
    lines: list[str]


Block = Heading | Paragraph | Items | Table | Image | Evidence


# ---- Markdown ------------------------------------------------------------------------------------------


def _shown(text: object) -> str:
    """``text`` with every control character but its line breaks written as its escape (``quoting.visible``)."""
    value = str(text)
    return "\n".join(map(visible, value.split("\n"))) if "\n" in value else visible(value)


def _md_cell(text: object) -> str:
    return _shown(text).replace("|", "\\|").replace("\n", "<br>")


def _md_table(table: Table) -> list[str]:
    frame = table.frame
    if frame.empty:
        return ["_(no rows)_", ""]
    header = "| " + " | ".join(_md_cell(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    out = [header, rule, *rows, ""]
    if table.caption:
        out = [f"_{_shown(table.caption)}_", "", *out]
    return out


def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out += ["#" * block.level + " " + _shown(block.text), ""]
        elif isinstance(block, Paragraph):
            out += [_shown(block.text), ""]
        elif isinstance(block, Items):
            for severity, text, evidence in block.entries:
                tag = f"**{severity.upper()}** " if severity else ""
                out.append(f"- {tag}{_shown(text)}")
                out += ["    - `" + visible(line).replace("`", "'") + "`" for line in evidence]
            out.append("")
        elif isinstance(block, Table):
            out += _md_table(block)
        elif isinstance(block, Image):
            out += [f"![{_shown(block.caption)}]({block.relative})", "", f"_{_shown(block.caption)}_", ""]
        elif isinstance(block, Evidence):
            out += [f"**{_shown(block.title)}**", "", "```text", *map(visible, block.lines), "```", ""]
    return "\n".join(out).rstrip() + "\n"


# ---- HTML ----------------------------------------------------------------------------------------------

_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1em; color: #1a1a1a; line-height: 1.45; overflow-wrap: anywhere; }
div.table { max-width: 100%; overflow-x: auto; margin: .6em 0 1.2em; }
div.table table { margin: 0; }
h1 { font-size: 1.6em; border-bottom: 2px solid #333; padding-bottom: .2em; }
h2 { font-size: 1.3em; margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: .9em; }
th, td { border: 1px solid #d0d0d0; padding: .25em .6em; text-align: right; white-space: nowrap;
         overflow-wrap: normal; }
th { background: #f2f2f2; }
td:first-child, th:first-child { text-align: left; }
caption { caption-side: top; text-align: left; font-style: italic; color: #444; padding-bottom: .3em; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; height: auto; border: 1px solid #e0e0e0; box-sizing: border-box; }
figcaption { color: #444; font-style: italic; }
ul.findings { list-style: none; padding-left: 0; }
ul.findings li { margin: .4em 0; padding: .3em .6em; border-left: 4px solid #999; background: #fafafa; }
li.error { border-left-color: #c62828 !important; }
li.warning { border-left-color: #ef8f00 !important; }
li.info { border-left-color: #1e88e5 !important; }
.sev { font-weight: bold; text-transform: uppercase; font-size: .8em; margin-right: .4em; }
.error .sev, p.error { color: #c62828; }
.warning .sev, p.warning { color: #b26a00; }
.info .sev { color: #1565c0; }
p.ok { color: #2e7d32; font-weight: bold; }
p.muted { color: #666; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; font-size: .85em; }
details summary { cursor: pointer; color: #444; font-size: .9em; }
"""


def _e(text: object) -> str:
    return html.escape(_shown(text), quote=True)


def _html_table(table: Table) -> str:
    frame = table.frame
    caption = f"<caption>{_e(table.caption)}</caption>" if table.caption else ""
    if frame.empty:
        return f"<p class='muted'>{_e(table.caption)}: no rows</p>"
    head = "".join(f"<th>{_e(c)}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_e(v)}</td>" for v in row) + "</tr>" for row in frame.itertuples(index=False)
    )
    # Wide tables scroll inside their own box: the page itself never scrolls sideways, even on a phone.
    return f"<div class='table'><table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _html_items(items: Items) -> str:
    out = ["<ul class='findings'>"]
    for severity, text, evidence in items.entries:
        tag = f"<span class='sev'>{_e(severity)}</span>" if severity else ""
        details = ""
        if evidence:
            lines = "\n".join(_e(line) for line in evidence)
            details = f"<details><summary>evidence ({len(evidence)} lines)</summary><pre>{lines}</pre></details>"
        out.append(f"<li class='{_e(severity)}'>{tag}{_e(text)}{details}</li>")
    out.append("</ul>")
    return "".join(out)


def _html_image(image: Image) -> str:
    raw = image.path.read_bytes()
    data = base64.b64encode(raw).decode("ascii")
    axes = png_axes(raw)  # each plot's axis labels and tick labels (orchestrator/report/axes.py)
    tagged = f" data-axes='{_e(axes)}'" if axes else ""
    return (
        f"<figure><img alt='{_e(image.caption)}'{tagged} src='data:image/png;base64,{data}'>"
        f"<figcaption>{_e(image.caption)}</figcaption></figure>"
    )


def to_html(blocks: list[Block], *, title: str) -> str:
    parts = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
    ]
    for block in blocks:
        if isinstance(block, Heading):
            parts.append(f"<h{block.level}>{_e(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            css = f" class='{_e(block.css)}'" if block.css else ""
            parts.append(f"<p{css}>{_e(block.text)}</p>")
        elif isinstance(block, Items):
            parts.append(_html_items(block))
        elif isinstance(block, Table):
            parts.append(_html_table(block))
        elif isinstance(block, Image):
            parts.append(_html_image(block))
        elif isinstance(block, Evidence):
            lines = "\n".join(_e(line) for line in block.lines)
            parts.append(f"<p><strong>{_e(block.title)}</strong></p><pre>{lines}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
