"""Adding a verdict basis is one new module (docs/design.md): the package finds its modules itself, and a
basis with a result of its own reaches the row's CSV line and --json keys, the run's verdict text and the report
through the package's face alone. Shown with a basis module made here (never written into the package), put
beside the real ones."""

from __future__ import annotations

import types
from pathlib import Path

from recordutil import record, steps, write

from pipelines.core.record.results import load
from pipelines.core.report import document
from pipelines.core.stats import bases, verdict
from pipelines.core.stats import rows as stats_rows


def test_the_package_finds_every_basis_module_itself():
    folder = Path(bases.__file__).parent
    assert sorted(module.__name__.rsplit(".", 1)[1] for module in bases.ALL) == \
        sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
    assert [module.ORDER for module in bases.ALL] == sorted(module.ORDER for module in bases.ALL)


def wall_clock_basis() -> types.ModuleType:
    """A made-up basis: each arm's records' count, with one flat key, a verdict-text section and a report one."""
    module = types.ModuleType("wall_clock")
    module.NAME, module.FIGURES, module.ORDER, module.WORDS = "wall clock", (), 99, ()
    module.FIELDS = {"wall_clock_records": None}
    module.arm_outcome = lambda entry, variant, records: len(records)
    module.fields = lambda found: {"wall_clock_records": found}
    module.section = lambda rows: "\nwall clock:\n" + "\n".join(
        f"  {row.variant}: {row.outcomes[module.NAME]} records" for row in rows if module.NAME in row.outcomes)
    module.REPORT = ("Wall clock", "Records per arm.")
    module.report_rows = lambda rows: [{"variant": row.variant, "records": row.outcomes[module.NAME]}
                                       for row in rows if module.NAME in row.outcomes]
    return module


def test_a_new_basis_reaches_the_csv_the_json_the_verdict_text_and_the_report(tmp_path, monkeypatch):
    monkeypatch.setattr(bases, "ALL", (*bases.ALL, wall_clock_basis()))
    write(tmp_path, "r", [record("ch2-baseline", "baseline", step_times=steps(1.0)),
                          record("ch2-nobias", "nobias", step_times=steps(1.1))])
    built = stats_rows.build(load(tmp_path))
    assert stats_rows.Row.columns()[-1] == "wall_clock_records"
    assert {row.variant: row.data()["wall_clock_records"] for row in built} == {"baseline": 1, "nobias": 1}
    loaded = load(tmp_path).records
    text = verdict.text(loaded, ["ch2-nobias"], [], tmp_path, serving={("ch2-baseline", "baseline"): "baseline"})
    assert "\nwall clock:\n" in text and "nobias: 1 records" in text
    assert verdict.rows(loaded, ["ch2-nobias"])[0]["wall_clock_records"] == 1
    document.write(tmp_path, tmp_path / "out", ["md", "csv"])
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Wall clock" in report and "Records per arm." in report
    assert (tmp_path / "out" / "report.csv").read_text().splitlines()[0].endswith(",wall_clock_records")
