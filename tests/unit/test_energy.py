"""Energy per repeat (core/record/energy.py): RAPL counters read as the kernel lays them out, a wrapped
counter, and "not measurable here" with the reason where no counter is readable (as on this machine's VM
when /sys/class/powercap is absent). The powercap tree below is generated, in the kernel's layout."""

from __future__ import annotations

from pathlib import Path

from pipelines.core.record import energy


def powercap(root: Path, **domains: tuple[int, int]) -> Path:
    for name, (value, top) in domains.items():
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "energy_uj").write_text(f"{value}\n")
        (folder / "max_energy_range_uj").write_text(f"{top}\n")
    return root


def test_package_domains_give_joules_and_joules_per_sample(tmp_path):
    root = powercap(tmp_path, **{"intel-rapl:0": (1_000_000, 10**9), "intel-rapl:0:0": (5, 10**9)})
    meter = energy.Meter("cpu", root)
    meter.start()
    (root / "intel-rapl:0" / "energy_uj").write_text("31000000\n")  # 30 J later
    got = meter.stop(samples=600)
    assert got == {"measured": True, "joules": 30.0, "domains": {"cpu:intel-rapl:0": 30.0},
                   "joules_per_sample": 0.05}


def test_a_wrapped_counter_adds_its_range(tmp_path):
    root = powercap(tmp_path, **{"intel-rapl:0": (999_000_000, 1_000_000_000)})
    meter = energy.Meter("cpu", root)
    meter.start()
    (root / "intel-rapl:0" / "energy_uj").write_text("1000000\n")
    assert meter.stop(samples=None)["joules"] == 2.0


def test_no_powercap_is_not_measurable_with_the_reason(tmp_path):
    meter = energy.Meter("cpu", tmp_path / "absent")
    meter.start()
    got = meter.stop(samples=10)
    assert got["measured"] is False and got["reason"].startswith("not measurable here: no ")
