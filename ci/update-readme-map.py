"""Rewrite the experiment map in docs/experiments.md and the Makefile's id list (catalog-ids.mk) from the catalog.

The README links the map. tests/unit/test_readme.py checks the block is in sync and
appears exactly once. Run: .venv/bin/python ci/update-readme-map.py
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipelines.core.report.views import ids_makefile, map_markdown

page = Path(__file__).resolve().parents[1] / "docs" / "experiments.md"
text = page.read_text()
pattern = re.compile(r"(<!-- map:begin[^\n]*-->\n).*?(\n<!-- map:end -->)", re.S)
if len(pattern.findall(text)) != 1:
    sys.exit(f"{page.relative_to(page.parents[1])} must hold the map markers exactly once")
page.write_text(pattern.sub(lambda m: m.group(1) + map_markdown() + m.group(2), text))
(page.parents[1] / "catalog-ids.mk").write_text(ids_makefile())
