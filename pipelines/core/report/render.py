"""The report as a document, rendered twice from the same blocks: Markdown (report.md, tables through
pandas' `to_markdown`, i.e. tabulate) and one self-contained HTML page (report.html, tables through
`to_html`, PNGs embedded). The CSV is `DataFrame.to_csv` of the rows themselves (report.py), so the
three outputs are views of the same data and cannot disagree.

Blocks are ("h", text) ("sub", text) ("p", text) ("list", items) ("table", DataFrame) ("img", file,
caption); each format is one table of block renderers rather than an if/elif chain per format.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 6px;
text-align:left;vertical-align:top}th{background:#f0f0f0}img{max-width:100%;border:1px solid #ddd}
.v-reproduced{background:#e3f4e3}.v-faster{background:#e3ecf8}.v-slower{background:#f8e9e3}
.v-inconclusive{background:#f4f4dc}code{background:#f4f4f4;padding:0 3px}"""


@dataclass
class Doc:
    title: str
    blocks: list[tuple] = field(default_factory=list)

    def add(self, *block) -> None:
        self.blocks.append(block)


def markdown_table(frame: pd.DataFrame, tablefmt: str = "pipe") -> str:
    """A pipe table of strings: numbers were formatted before (stats/intervals.py `fmt`), so tabulate must not
    re-parse them ("1.00" would print as "1"). `tablefmt="simple"`: the terminal's, without the pipes."""
    cells = frame.astype(str).map(lambda v: v.replace("|", "\\|").replace("\n", " "))
    return cells.to_markdown(index=False, disable_numparse=True, tablefmt=tablefmt)


def _inline(text: str) -> str:
    """Escape, then the two Markdown marks the document uses: `code` and **bold**."""
    out = html.escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)


def html_table(frame: pd.DataFrame) -> str:
    """`to_html` of the escaped cells; verdict cells carry a class so the page colours them."""
    cells = frame.astype(str).map(html.escape)
    for column in [c for c in cells.columns if "verdict" in c]:
        cells[column] = cells[column].map(lambda v: f'<span class="v-{v.split(" ")[0]}">{v}</span>')
    return cells.to_html(index=False, escape=False, border=0)


def _figure(image_dir: Path) -> Callable[[str, str], str]:
    def render(name: str, caption: str) -> str:
        data = base64.b64encode((image_dir / name).read_bytes()).decode("ascii")
        return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{_inline(caption)}</figcaption></figure>")
    return render


MARKDOWN: dict[str, Callable[..., str]] = {
    "h": lambda text: f"## {text}\n",
    "sub": lambda text: f"### {text}\n",
    "p": lambda text: f"{text}\n",
    "list": lambda items: "".join(f"- {item}\n" for item in items),
    "table": lambda frame: markdown_table(frame) + "\n",
    "img": lambda name, caption: f"![{caption}]({name})\n",
}


def markdown(doc: Doc) -> str:
    parts = [f"# {doc.title}\n"] + [MARKDOWN[block[0]](*block[1:]) for block in doc.blocks]
    return "\n".join(parts).rstrip() + "\n"


def html_page(doc: Doc, image_dir: Path) -> str:
    renderers: dict[str, Callable[..., str]] = {
        "h": lambda text: f"<h2>{_inline(text)}</h2>",
        "sub": lambda text: f"<h3>{_inline(text)}</h3>",
        "p": lambda text: f"<p>{_inline(text)}</p>",
        "list": lambda items: "<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in items) + "</ul>",
        "table": html_table,
        "img": _figure(image_dir),
    }
    title = html.escape(doc.title)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{title}</title><style>{STYLE}</style></head><body>", f"<h1>{title}</h1>"]
    parts += [renderers[block[0]](*block[1:]) for block in doc.blocks]
    return "\n".join(parts + ["</body></html>"]) + "\n"
