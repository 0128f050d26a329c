"""One self-contained HTML page from the report document: tables, lists and the PNGs embedded (base64)."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from pipelines.core.report_doc import Doc

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 6px;
text-align:left;vertical-align:top}th{background:#f0f0f0}img{max-width:100%;border:1px solid #ddd}
td.v-reproduced{background:#e3f4e3}td.v-faster{background:#e3ecf8}td.v-slower{background:#f8e9e3}
code{background:#f4f4f4;padding:0 3px}"""


def _inline(text: str) -> str:
    """Escape, then the two Markdown marks the document uses: `code` and **bold**."""
    out = html.escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)


def _cell(header: str, value: str) -> str:
    cls = ""
    if header.endswith("verdict"):
        cls = f' class="v-{value.split()[0]}"' if value and value != "-" else ""
    return f"<td{cls}>{_inline(value)}</td>"


def render(doc: Doc, image_dir: Path) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(doc.title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{html.escape(doc.title)}</h1>"]
    for block in doc.blocks:
        kind = block[0]
        if kind == "h":
            parts.append(f"<h2>{_inline(block[1])}</h2>")
        elif kind == "sub":
            parts.append(f"<h3>{_inline(block[1])}</h3>")
        elif kind == "p":
            parts.append(f"<p>{_inline(block[1])}</p>")
        elif kind == "list":
            parts.append("<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in block[1]) + "</ul>")
        elif kind == "table":
            header, rows = block[1], block[2]
            parts.append("<table><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in header) + "</tr>")
            parts += ["<tr>" + "".join(_cell(h, v) for h, v in zip(header, row)) + "</tr>" for row in rows]
            parts.append("</table>")
        elif kind == "img":
            data = base64.b64encode((image_dir / block[1]).read_bytes()).decode("ascii")
            parts.append(f'<figure><img alt="{html.escape(block[2])}" src="data:image/png;base64,{data}">'
                         f"<figcaption>{_inline(block[2])}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
