#!/usr/bin/env python3
"""`make TARGET NAME=value`: a NAME that neither the Makefile nor a launcher reads, but is one letter or two
from one that is (NPROCS for NPROC, NTHREADS for THREADS), is a typo that would be ignored without a word:
print the one line that names it and the nearest known name. Other names pass (a variable meant for the
processes, OMP_DISPLAY_ENV=true, is the user's business). The known names are read from the Makefile and
launch/ each time, so the list cannot fall behind them. Standard library only: it runs before the venv exists.

usage: ci/check-make-vars.py NAME... (make passes the names of its command-line variables)
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("Makefile", "catalog-ids.mk", "launch/*")
READS = re.compile(r"\$[({]([A-Z_][A-Z0-9_]*)|^([A-Z_][A-Z0-9_]*)\s*[:?+]?=", re.MULTILINE)
# NPROCS/NPROC scores 0.91, NTHREADS/THREADS 0.93, HOST/HOSTS 0.89: a shell's own HOST is why only the names
# typed on make's command line are checked, never the environment
CUTOFF = 0.8


def known_names() -> set[str]:
    names: set[str] = set()
    for pattern in SOURCES:
        for path in REPO.glob(pattern):
            if path.is_file():
                names.update(a or b for a, b in READS.findall(path.read_text(errors="replace")))
    return names


def main(argv: list[str]) -> int:
    known = known_names()
    for name in argv:
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name) or name in known:
            continue  # a fragment of a value with spaces, or a name this project reads
        if near := difflib.get_close_matches(name, known, n=1, cutoff=CUTOFF):
            print(f"{name} is not a variable this Makefile or its launchers read; did you mean {near[0]}? "
                  f"(make help lists the targets and their knobs)")
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
