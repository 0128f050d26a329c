"""One word per concept (docs/design.md's glossary): the words it retires stay retired.

The glossary's last column names the words not used for its concepts. Most of them are ordinary words with
other meanings here (a process group, a time window), so a grep cannot police them all; the ones below have
no other meaning in this project, and may appear only in the glossary row that retires them, or where a
reader upgrades older records that still spell them (record/results.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GLOSSARY = REPO / "docs" / "design.md"
UPGRADES = REPO / "pipelines" / "core" / "record" / "results.py"
RETIRED = {
    "alternation": "comparison", "sub-run": "worker", "block round": "cycle", "order cycle": "period",
    "lab notebook": "history", "chapter file": "technique file", "machine type": "machine class",
    "arm name": "variant", "repeats_auto": "auto (RunConfig)", "pairing.group": "pairing.comparison",
    # one name per job: the comparison's summary, an entry's text, the verdict table
    "def describe(": "entry_text / summary_line / dist_section", "def summary(": "verdict_table / summary_line",
}


def searched() -> list[Path]:
    files = [REPO / "README.md", REPO / "Makefile"]
    for folder, pattern in (("pipelines", "*.py"), ("launch", "*"), ("docs", "*.md")):
        files += [p for p in (REPO / folder).rglob(pattern) if p.is_file() and "__pycache__" not in p.parts]
    return files


def glossary_rows() -> str:
    return "\n".join(line for line in GLOSSARY.read_text().splitlines() if line.startswith("| **"))


@pytest.mark.parametrize("word", sorted(RETIRED))
def test_a_retired_word_appears_only_where_it_is_retired(word):
    found = []
    for path in searched():
        text = path.read_text(errors="replace")
        if path == GLOSSARY:
            text = text.replace(glossary_rows(), "")
        if path == UPGRADES:
            continue
        if word in text:
            found.append(str(path.relative_to(REPO)))
    assert not found, f"{word!r} is retired (say {RETIRED[word]!r}); still in {', '.join(found)}"


def test_the_glossary_retires_the_words_this_test_polices():
    """The words above come from the glossary's last column, not from this file alone."""
    rows = glossary_rows()
    for word in RETIRED:
        if not word.startswith("def "):
            assert word.split(".")[-1] in rows, word
