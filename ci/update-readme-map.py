"""Rewrite the README's experiment map from the catalog (tests/test_readme.py checks it is in sync)."""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipelines.core.report import map_markdown  # noqa: E402

readme = Path(__file__).resolve().parents[1] / "README.md"
text = readme.read_text()
pattern = re.compile(r"(<!-- map:begin[^\n]*-->\n).*?(\n<!-- map:end -->)", re.S)
if not pattern.search(text):
    sys.exit("README.md lacks the map markers")
readme.write_text(pattern.sub(lambda m: m.group(1) + map_markdown() + m.group(2), text))
