"""What a first user ran into, each fixed and proved here: the nearest experiment ids first, plots a person
can read (legends inside, no bar for an arm that did not run, an accuracy axis that does not magnify
noise), the machine line without "data None", the harness overhead read by its interval, a bad
OMP_NUM_THREADS refused, a refused `accel data generate` leaving nothing behind, the rendezvous line
stating the user's timeout, and a reference of another machine class still giving the full report.

Hand-made records (tests/unit/test_report.py's helpers) stand in where exact numbers or another machine are
needed; the CLI is run for real where the promise is about what a user sees.
"""

from __future__ import annotations

import errno
import importlib.util
import re
import subprocess
from pathlib import Path

import pytest
from matplotlib.colors import to_rgba

from conftest import REPO, accel
from pipelines.core.report import summary as report
from pipelines.core.data import files, generator
from pipelines.core.report import document, drift, figures, speedup_plots, tradeoff_plots
from pipelines.core.config import experiments, runconfig
from pipelines.core.distributed import rendezvous
from pipelines.core.report import tables
from pipelines.core.stats import rows as report_rows, intervals
from pipelines.core.record.results import load
from pipelines.core.errors import ConfigError
from recordutil import ch2, drift_pair, record, table_rows, write

H100_BENCH = REPO / "results" / "reference" / "h100-bench"


# ----- 1. did you mean: nearest first ---------------------------------------------------------------------

def _suggestions(typed: str) -> list[str]:
    with pytest.raises(experiments.UnknownExperiment) as refused:
        experiments.get(typed)
    message = refused.value.args[0]  # a KeyError: str() would quote it
    shape = re.fullmatch(rf"unknown experiment id '{re.escape(typed)}'(?: \(did you mean: (.+)\?\))?; "
                         r"`accel list` shows every id", message)
    assert shape, message
    return shape[1].split(", ") if shape[1] else []


def test_unknown_id_suggests_the_nearest_ids_first():
    assert _suggestions("ch2-nobais")[0] == "ch2-nobias"  # one swapped letter: the catalog's 2nd ch2 id
    assert _suggestions("ch2-baselin")[0] == "ch2-baseline"
    compile_ids = _suggestions("ch3-compile")
    assert compile_ids[:3] == ["ch3-compile-cnn-cpu", "ch3-compile-densenet-gpu", "ch3-compile-modes-cnn-cpu"]
    assert len(compile_ids) <= 6
    assert set(_suggestions("ch4")) <= {i for i in experiments.all_experiments() if i.startswith("ch4-")}
    assert _suggestions("dlf-u9-compil")[0] == "dlf-u9-compile"
    assert _suggestions("zzzz") == []  # nothing near: no "did you mean"


# ----- 2. plots ---------------------------------------------------------------------------------------

def _inside(fig, artist) -> bool:
    """The artist's drawn box lies within the figure's (one pixel of rounding allowed)."""
    renderer = fig.canvas.get_renderer()
    box, page = artist.get_window_extent(renderer), fig.bbox
    return box.x0 >= page.x0 - 1 and box.y0 >= page.y0 - 1 and box.x1 <= page.x1 + 1 and box.y1 <= page.y1 + 1


def _ch2_rows(tmp_path: Path) -> list[report_rows.Row]:
    """ch2-baseline and ch2-nobias ran (3 repeats each); ch2-bs128 is listed but did not run."""
    ch2(tmp_path, (1.18,))
    return report_rows.build(load(tmp_path), ["ch2-bs128"])


def test_speedup_bars_draw_no_bar_for_an_arm_that_did_not_run_and_keep_the_legend_inside(tmp_path):
    rows = _ch2_rows(tmp_path)
    members = [r for r in rows if r.family == "ch2"]
    assert [(r.experiment, r.n) for r in members] == [("ch2-baseline", 3), ("ch2-nobias", 3),
                                                      ("ch2-bs128", 0)]
    fig = speedup_plots.speedup_figure("ch2", members)
    fig.canvas.draw()
    ax = fig.axes[0]
    bars = [p for p in ax.patches if p.get_width() > 0 and p.get_height() > 0]
    not_run_x = 2  # ch2-bs128's slot: nothing may be drawn within half a slot of it
    near = [p for p in bars if not_run_x - 0.5 < p.get_x() + p.get_width() and p.get_x() < not_run_x + 0.5]
    assert not near
    measured = [p for p in bars if p.get_facecolor() == to_rgba(figures.MEASURED)]
    assert len(measured) == sum(1 for r in members if r.n) == 2  # one reproduced bar per arm that ran
    labels = [t.get_text() for t in ax.texts]
    assert any(text.startswith("not run") and "published 1.54" in text for text in labels), labels
    (legend,) = fig.legends
    renderer = fig.canvas.get_renderer()
    assert _inside(fig, legend)
    assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))  # covers no bar


def test_a_one_panel_accuracy_plot_keeps_its_legend_inside_the_figure(tmp_path):
    rows = _ch2_rows(tmp_path)
    panels = tradeoff_plots.tradeoff_panels(rows)
    assert len(panels) == 1  # ch2-baseline's panel only: the narrowest figure the report draws
    fig = tradeoff_plots.tradeoff_figure(panels)
    fig.canvas.draw()
    assert fig.legends and all(_inside(fig, legend) for legend in fig.legends)
    assert all(_inside(fig, ax.get_legend()) for ax in fig.axes if ax.get_visible())


def test_accuracy_axis_spans_at_least_the_minimum_around_the_data():
    """h100-bench's ch5 panel: published 92.50 vs 92.34 filled the whole axis (a 0.16-pp span)."""
    rows = report_rows.build(load(H100_BENCH))
    fig = tradeoff_plots.tradeoff_figure(tradeoff_plots.tradeoff_panels(rows))
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert panels
    for ax in panels:
        low, high = ax.get_ylim()
        assert high - low >= tradeoff_plots.MIN_ACCURACY_SPAN_PP - 1e-9 and 0 <= low and high <= 100
        plotted = [y for line in ax.lines for y in line.get_ydata()]
        plotted += [xy[1] for coll in ax.collections for xy in coll.get_offsets()]
        assert plotted and all(low <= y <= high for y in plotted)
    assert tradeoff_plots.accuracy_limits([92.34, 92.50]) == pytest.approx((89.92, 94.92))
    assert tradeoff_plots.accuracy_limits([99.0, 99.5]) == (95.0, 100.0)  # moved inside 0-100, not shrunk
    assert tradeoff_plots.accuracy_limits([1.0]) == (0.0, 5.0)
    assert tradeoff_plots.accuracy_limits([20.0, 80.0]) == pytest.approx((14.0, 86.0))  # wide: data + 10 %


def test_report_plots_are_written_as_pngs(tmp_path):
    ch2(tmp_path / "r", (1.18,))
    written = report.write_report(tmp_path / "r", tmp_path / "out", formats=("md",), only=["ch2-bs128"])
    pngs = [p for p in written.paths if p.suffix == ".png"]
    assert {p.name for p in pngs} == {"ch2-published-vs-reproduced.png", "accuracy-vs-speed.png"}
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


# ----- 3. the machine line's data ---------------------------------------------------------------------

def test_machine_line_never_says_data_none():
    ok = record("ch2-baseline", "baseline", 1000.0)
    ok["config"]["data_source"] = "generated"
    skipped = record("ch2-nobias", "nobias", 1000.0)
    skipped["status"] = "skipped"
    skipped["config"].pop("data_source", None)
    synthetic = record("ch2-bs128", "bs128", 1000.0)
    synthetic["config"].pop("data_source", None)
    synthetic["config"]["dataset"] = "synthetic"
    assert "; data generated; " in document.machines([ok, skipped])[0]
    assert "; data generated/synthetic; " in document.machines([ok, skipped, synthetic])[0]
    assert "; data not recorded; " in document.machines([skipped])[0]
    committed = H100_BENCH / "report.md"
    machine = committed.read_text().split("## Machines\n", 1)[1].split("\n## ", 1)[0]
    assert "None" not in machine and "data generated/synthetic" in machine
    assert "data None" not in "\n".join(document.machines(load(H100_BENCH).records))


# ----- 4. harness overhead read by its interval ---------------------------------------------------------

def test_overhead_follows_the_interval_and_a_negative_one_is_noise():
    faster = tables.overhead(1.115, intervals.Interval(0.95, 1.30), repeats=6)
    assert faster.pct == pytest.approx(-11.5)
    assert faster.text.startswith("-11.5 % (harness faster than the plain loop: within noise, no overhead")
    assert faster.verdict == intervals.INCONCLUSIVE  # the interval reaches +5 %, beyond the 2 % goal
    met = tables.overhead(1.001, intervals.Interval(0.99, 1.01), repeats=3)
    assert met.verdict == tables.GOAL_MET and met.pct_interval == pytest.approx((-1.0, 1.0))
    over = tables.overhead(0.90, intervals.Interval(0.89, 0.91), repeats=3)
    assert over.verdict == tables.OVER_GOAL
    few = tables.overhead(1.0, intervals.Interval(0.999, 1.001), repeats=2)
    assert few.verdict == intervals.INCONCLUSIVE and "2 repeat(s)" in few.text
    bare = tables.overhead(1.0, None, repeats=5)
    assert bare.verdict == tables.NOT_ASSESSED and "goal met" not in bare.text
    for reading in (faster, met, over, few, bare):
        assert "within goal" not in reading.text and "within the goal" not in reading.text


def _harness_records(shared: tuple[float, ...], hand: tuple[float, ...]) -> list[dict]:
    out = []
    for arm, values in (("shared-loop", shared), ("hand-loop", hand)):
        for repeat, value in enumerate(values):
            rec = record("harness-overhead", arm, value, repeat=repeat)
            rec["config"].update(model="cnn_cifar10", batch_size=64, device="cpu", dataset="synthetic")
            out.append(rec)
    return out


def test_report_never_calls_a_negative_overhead_within_the_goal(tmp_path):
    write(tmp_path / "r", "harness", _harness_records((1115.0, 960.0, 1270.0), (1000.0, 1000.0, 1000.0)))
    md = report.write_report(tmp_path / "r", tmp_path / "out", formats=("md",)).paths[0].read_text()
    section = md.split("## Harness overhead\n", 1)[1].split("\n## ", 1)[0]
    assert "harness faster than the plain loop: within noise, no overhead measured" in section
    (cells,) = table_rows(md, "Harness overhead")
    assert cells[6] == "-11.5" and cells[8] == "inconclusive"
    assert "Every workload within the goal" not in section and "Inconclusive" in section


def test_harness_overhead_script_prints_the_interval_reading():
    spec = importlib.util.spec_from_file_location("harness_overhead", REPO / "ci" / "harness-overhead.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    line = script.summary([1115.0, 960.0, 1270.0], [1000.0, 1000.0, 1000.0], 60)
    assert "overhead -11.5 % (harness faster than the plain loop: within noise, no overhead measured)" in line
    assert "inconclusive" in line and "goal within" not in line


# ----- 5. OMP_NUM_THREADS -------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["1", "16", "4,2"])
def test_a_positive_omp_num_threads_or_a_nesting_list_is_accepted(value):
    runconfig.check_environment({"OMP_NUM_THREADS": value})


@pytest.mark.parametrize("value", ["abc", "0", "-1", "", " 4", "4,", "4,0", "2.5", "\u0663"])
def test_a_bad_omp_num_threads_is_refused_by_resolve(value, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    with pytest.raises(ConfigError, match=re.escape(f"OMP_NUM_THREADS={value!r} is not a positive whole")):
        runconfig.resolve({"model": "cnn_cifar10", "dataset": "synthetic"}, None, {}, experiment="x",
                       pipeline="p", variant="v", scale="smoke")


def test_accel_run_refuses_a_bad_omp_num_threads_in_one_line(results_dir):
    run = accel("run", "ch2-baseline", "--scale", "smoke", "--dataset", "synthetic", "--results-dir",
                str(results_dir), env={"OMP_NUM_THREADS": "abc"})
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert lines[0] == ("accel: error: OMP_NUM_THREADS='abc' is not a positive whole number (or a comma list "
                        "of them, one per nesting level); unset it or set e.g. OMP_NUM_THREADS=2")
    assert not results_dir.exists()


# ----- 6. a refused data generate leaves nothing behind -------------------------------------------------

def test_generate_refused_mid_write_leaves_no_lock_and_no_new_folder(tmp_path, monkeypatch):
    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(generator, "write_fashion_mnist", full)
    root = tmp_path / "new" / "data"
    with pytest.raises(files.DataError, match="No space left on device"):
        generator.generate("fashion_mnist", root, train=10, test=10)
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / ".fashion_mnist.lock").touch()  # another writer's lock: not this call's to remove
    with pytest.raises(files.DataError):
        generator.generate("fashion_mnist", kept, train=10, test=10)
    assert [p.name for p in kept.iterdir()] == [".fashion_mnist.lock"]


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs: too small for the default generated Fashion-MNIST (2048 + 512 samples of 785 bytes)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"a small tmpfs needs root and mount: {done.stderr.strip() or done.returncode}")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_data_generate_on_a_full_disk_is_one_line_and_leaves_nothing(full_disk, accel_in_process):
    run = accel_in_process("data", "generate", "fashion_mnist", "--root", str(full_disk / "data"))
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith("accel: error:"), run.stderr
    assert "No space left on device" in lines[0]
    assert "Traceback" not in run.stderr
    assert list(full_disk.iterdir()) == []  # no data/, no .fashion_mnist.lock


# ----- 7. the rendezvous line states the user's timeout -------------------------------------------------

def test_budget_rounds_torch_waits_up_and_never_below_its_floor(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(rendezvous.time, "monotonic", lambda: now[0])
    budget = rendezvous.Budget(10)
    assert budget.left() == 10 and budget.left_whole_s() == 10
    now[0] += 0.4
    assert budget.left_whole_s() == 10  # 9.6 s left: torch takes whole seconds, rounded up
    assert rendezvous.Budget(10.5).left_whole_s() == 11  # why torch's own figure can exceed the user's
    now[0] += 20
    assert budget.left() == rendezvous.MIN_LEFT_S and budget.left_whole_s() == 1


@pytest.mark.parametrize("torch_says, kept", [
    ("Timed out after 11 seconds waiting for clients. 1/2 clients joined.",
     "Timed out waiting for clients. 1/2 clients joined."),
    ("The client socket has timed out after 10000ms while trying to connect to (127.0.0.1, 29500).",
     "The client socket has timed out while trying to connect to (127.0.0.1, 29500)."),
    ("wait timeout after 30000ms, keys: /accel/x", "wait timeout, keys: /accel/x"),
    ("Connection refused", "Connection refused")])
def test_the_one_line_error_states_the_users_timeout_only(torch_says, kept):
    from pipelines.core.distributed import agent, placement, ranks

    assert rendezvous.without_torch_figure(torch_says) == kept
    line = agent.not_formed(0, "127.0.0.1:29500", 10, RuntimeError(torch_says))
    assert "within 10 s" in line and kept in line and "11 seconds" not in line and "10000ms" not in line
    place = placement.Placement("single", rank=1, world_size=2, master_addr="127.0.0.1", master_port=29500)
    joined = ranks.not_joined(place, "gloo", 10, RuntimeError(torch_says))
    assert joined.startswith("rank 1 of 2 could not join the gloo group at 127.0.0.1:29500 within 10 s (")
    assert kept in joined and "11 seconds" not in joined


# ----- drift against a reference of another machine class -----------------------------------------------

# The golden record's machine is AMD family 25 model 1 with avx2; the reference's is the next generation.
OTHER_CLASS = {"cpu_id": "AuthenticAMD family 26 model 2", "cpu_isa": "avx2 avx512f avx512_vnni avx512_bf16"}


def test_a_reference_of_another_machine_class_gives_the_full_report_and_says_why(tmp_path):
    mine, ref = drift_pair(tmp_path, 1.18, 1.18, **OTHER_CLASS)
    written = report.write_report(mine, tmp_path / "out", formats=("md",), against=ref)
    assert written.judged.drift is None
    reason = written.judged.drift_skipped
    assert reason.startswith(f"{ref} is from another machine class: reference ")
    reference_part, this_part = reason.split(" vs this run ")
    assert "family 26 model 2, avx2 avx512f avx512_vnni avx512_bf16;" in reference_part
    assert "family 25 model 1, avx2;" in this_part and "family 26" not in this_part
    md = written.paths[0].read_text()
    assert f"Drift check skipped: {reason}." in md.split("## Drift against the reference\n", 1)[1]
    assert ["ch2-nobias", "nobias", "bench", "3"] in [c[:4] for c in table_rows(md, "Results")]
    assert "REVERSED" not in md


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_accel_report_against_another_class_exits_0_and_prints_the_skip(tmp_path):
    mine, ref = drift_pair(tmp_path, 2.0, 0.5, **OTHER_CLASS)  # would reverse, if it were comparable
    out = tmp_path / "out"
    run = accel("report", "--results-dir", str(mine), "--out", str(out), "--against", str(ref),
                "--fail-on-reversal")
    assert run.returncode == 0, run.stderr
    skip = [line for line in run.stdout.splitlines() if "drift check skipped" in line]
    assert len(skip) == 1 and "family 26 model 2" in skip[0] and "family 25 model 1" in skip[0], run.stdout
    assert (out / "report.md").is_file() and (out / "report.html").is_file()


def test_a_reference_without_usable_records_is_refused_before_any_output(tmp_path):
    ch2(tmp_path / "mine", (1.18,))
    (tmp_path / "empty-ref").mkdir()
    (tmp_path / "empty-ref" / "x.jsonl").write_text("not json\n")
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="holds no usable records"):
        report.write_report(tmp_path / "mine", out, against=tmp_path / "empty-ref")
    assert not out.exists()


def test_same_class_reference_still_gets_its_drift_table(tmp_path):
    mine, ref = drift_pair(tmp_path, 1.18, 1.3)
    written = report.write_report(mine, tmp_path / "out", formats=("md",), against=ref)
    assert written.judged.drift is not None and written.judged.drift_skipped is None
    with pytest.raises(drift.OtherMachineClass, match="another machine class"):
        other_mine, other_ref = drift_pair(tmp_path / "b", 1.18, 1.18, **OTHER_CLASS)
        loaded = load(other_mine)
        drift.against(report_rows.build(loaded), loaded, other_ref)
