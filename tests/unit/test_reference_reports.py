"""Every committed reference's report says what today's code says on its records: each report.csv is rebuilt from
the folder's records and compared, arm by arm, in its verdict, its interval and its band. A change to the verdict
rule that changes one of them fails here until ci/regenerate-references.sh has rewritten the reports."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from conftest import REPO
from pipelines.core.record.results import load
from pipelines.core.report import tables
from pipelines.core.stats import rows as stats_rows

REFERENCES = sorted(path for path in (REPO / "results" / "reference").iterdir() if (path / "report.csv").is_file())
KEY = ["experiment", "variant", "scale"]
NUMBERS = ["ratio", "ci_low", "ci_high", "band_low", "band_high", "memory_ratio", "memory_ci_low", "memory_ci_high"]
WORDS = ["verdict", "memory_verdict"]


def same(a, b) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    return not (pd.isna(a) or pd.isna(b)) and math.isclose(float(a), float(b), rel_tol=1e-6)


@pytest.mark.parametrize("reference", REFERENCES, ids=[path.name for path in REFERENCES])
def test_the_committed_report_is_what_today_s_code_gives(reference):
    committed = pd.read_csv(reference / "report.csv").set_index(KEY)
    rebuilt = tables.frame(stats_rows.build(load(reference)))
    rebuilt = pd.read_csv(pd.io.common.StringIO(rebuilt.to_csv(index=False))).set_index(KEY)
    assert sorted(committed.index) == sorted(rebuilt.index), "arms differ: run ci/regenerate-references.sh"
    stale = []
    for key, row in rebuilt.iterrows():
        old = committed.loc[key]
        stale += [f"{key} {column}: {old[column]} committed, {row[column]} today" for column in WORDS
                  if str(old[column]) != str(row[column])]
        stale += [f"{key} {column}: {old[column]} committed, {row[column]} today" for column in NUMBERS
                  if not same(old[column], row[column])]
    assert not stale, "run ci/regenerate-references.sh:\n" + "\n".join(stale)
