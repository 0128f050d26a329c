"""Printed profile shares against recorded profiles (pipelines/core/report/shares.py).

The band is checked against the only evidence of a profile's spread there is, the book's own two profiles of
the same eager forward pass (ch1 and ch3); the name map against a live torch profile of the book's CNN; the
report section against hand-made records.
"""

from __future__ import annotations

import copy

import pytest

from pipelines.catalog.book_tables import PROFILE_CH1, PROFILE_CH3_COMPILED, PROFILE_CH3_EAGER
from pipelines.core.report import shares
from pipelines.core.stats.bases import profile_share
from pipelines.core.config import experiments
from recordutil import record, table_rows, write


def test_the_book_s_two_profiles_of_one_forward_pass_judge_each_other_matching():
    common = set(PROFILE_CH1) & set(PROFILE_CH3_EAGER)
    assert len(common) == 16
    for op in common:
        for published, measured in ((PROFILE_CH1[op], PROFILE_CH3_EAGER[op]), (PROFILE_CH3_EAGER[op], PROFILE_CH1[op])):
            assert profile_share.judge(published, measured) == profile_share.MATCHES, (op, published, measured)


def test_a_relative_band_alone_would_fail_small_shares_by_construction_the_floor_does_not_pass_everything():
    # the book's own repeat is 3.5-fold apart on aten::conv2d: no relative band a ratio gets (15 %) holds it
    assert abs(PROFILE_CH3_EAGER["aten::conv2d"] / PROFILE_CH1["aten::conv2d"] - 1) > 0.15
    assert profile_share.tolerance_pp(0.24) == profile_share.FLOOR_PP == 1.0
    assert profile_share.judge(0.24, 0.83) == profile_share.MATCHES
    assert profile_share.judge(0.24, 1.5) == profile_share.DIFFERS  # a wrapper that took over a kernel's time
    assert profile_share.judge(0.0, 1.2) == profile_share.DIFFERS
    assert profile_share.judge(44.01, 20.0) == profile_share.DIFFERS  # the convolution's time moved elsewhere
    assert profile_share.judge(44.01, 38.87) == profile_share.MATCHES
    assert profile_share.tolerance_pp(44.01) == pytest.approx(0.35 * 44.01)


def test_share_metric_names_every_printed_op_apart():
    for table in (PROFILE_CH1, PROFILE_CH3_EAGER, PROFILE_CH3_COMPILED):
        assert len({shares.share_metric(op) for op in table}) == len(table)
    assert shares.share_metric("aten::addmm") == "share_addmm_pct"
    assert shares.share_metric("CompiledFunction") == "share_CompiledFunction_pct"
    assert shares.share_metric("Optimizer.step#Adam.step") == "share_Adam_step_pct"
    assert shares.share_metric("torch_ipex::adam_fused_step") == "share_ipex_adam_fused_step_pct"
    assert shares.share_metric("detach") != shares.share_metric("aten::detach")


def test_renamed_ops_are_found_under_today_s_names():
    measured = shares.measured_shares({"aten::view": 0.3, "aten::flatten": 0.1, "aten::reshape": 0.05,
                                       "## Call CompiledFxGraph abc123 ##": 50.0, "CompiledFunction": 0.5})
    assert measured["share__reshape_alias_pct"] == (0.3, ("aten::view",))
    assert measured["share_reshape_pct"][0] == pytest.approx(0.15)
    assert measured["share_CompiledFunction_pct"][0] == pytest.approx(50.5)


def _ch1_forward_profile(grad: bool = True) -> dict[str, float]:
    import torch

    from pipelines.core.train.profiler import profile_call
    from pipelines.core.train import models

    torch.manual_seed(0)
    model = models.build("cnn_fmnist", classes=10)
    x = torch.randn(64, 1, 28, 28)

    def call():
        with torch.set_grad_enabled(grad):
            return model(x)

    metrics, table = profile_call(call, top=5, cuda=False)
    assert table.count("aten::") >= 5  # the table keeps the top rows; the shares keep every op
    return metrics["op_share_pct"]


def test_every_op_ch1_printed_is_in_today_s_profile_of_the_book_s_cnn():
    """The name map is complete for torch as installed: each of the 20 printed ops (renamed ones under
    today's names) appears in a live profile of one forward pass, and the profile sums to 100 %."""
    op_shares = _ch1_forward_profile()
    assert sum(op_shares.values()) == pytest.approx(100.0, abs=0.5)
    measured = shares.measured_shares(op_shares)
    missing = [op for op in PROFILE_CH1 if not measured.get(shares.share_metric(op), (0, ()))[1]]
    assert not missing, f"printed ops not in torch's profile (add them to PRINTED_AS): {missing}"
    assert "aten::_reshape_alias" not in op_shares and "aten::view" in op_shares


def test_the_report_judges_every_printed_share_of_a_recorded_profile(tmp_path):
    """A profile record has no throughput, so no Results row: the section reads the records themselves."""
    from pipelines.core.report import views

    entry = experiments.get("ch1-profile-ops")
    profile = {**{op: pct for op, pct in PROFILE_CH3_EAGER.items()}, "aten::view": 0.2, "aten::flatten": 0.1}
    recs = []
    for repeat in range(2):
        rec = record("ch1-profile-ops", "profile", None, repeat=repeat)  # a measurement: no throughput, no row
        rec["pipeline"] = "profiling"
        rec["metrics"]["op_share_pct"] = copy.deepcopy(profile)
        recs.append(rec)
    write(tmp_path, "profile", recs)
    judged = shares.share_rows(recs)
    assert len(judged) == len(PROFILE_CH1) == len([f for f in entry.published if f.basis_name == "profile share"])
    by_op = {row.metric: row for row in judged}
    assert by_op["share__reshape_alias_pct"].measured_as == "aten::view"
    assert by_op["share__reshape_alias_pct"].op == "aten::_reshape_alias"  # shown as the book printed it
    assert by_op["share_copy__pct"].measured_as.startswith("not in the profile")  # absent from ch3's table: 0 %
    assert all(row.verdict == profile_share.MATCHES and row.repeats == 2 for row in judged)
    recs[0]["metrics"]["op_share_pct"]["aten::mkldnn_convolution"] = 10.0  # mean (10 + 38.87) / 2 vs 44.01
    assert {row.metric for row in shares.share_rows(recs) if row.verdict == profile_share.DIFFERS} == \
        {"share_mkldnn_convolution_pct"}
    write(tmp_path, "profile", recs)
    written = views.write_report(tmp_path, formats=("md",))
    markdown = written.paths[0].read_text()
    cells = table_rows(markdown, "Profile shares")
    assert len(cells) == 20 and "19 of 20 shares match: differ ch1-profile-ops [profile] " \
        "aten::mkldnn_convolution." in markdown
    assert ["ch1-profile-ops", "profile"] == cells[0][:2]


@pytest.mark.slow
def test_compiled_function_s_printed_share_is_found_in_today_s_compiled_profile():
    """torch 2.0 printed the fused graph's time as CompiledFunction's self time; today it is the
    '## Call CompiledFxGraph' record inside it. A compiled forward pass (autograd on) shows it."""
    import torch

    from pipelines.core.train.profiler import profile_call
    from pipelines.core.train import models

    torch._dynamo.reset()
    model = torch.compile(models.build("cnn_fmnist", classes=10))
    x = torch.randn(64, 1, 28, 28)
    model(x)
    metrics, _ = profile_call(lambda: model(x), top=5, cuda=False)
    measured = shares.measured_shares(metrics["op_share_pct"])
    share, ops = measured["share_CompiledFunction_pct"]
    assert any(op.startswith("## Call CompiledFxGraph") for op in ops) and share > 5.0


def test_a_timing_entry_profiles_one_forward_pass_when_training_ends_and_its_shares_are_judged():
    """ch3-compile-cnn-cpu times training and carries the book's forward-pass tables: the hook profiles one
    forward pass of a training batch after the timed steps, changes no weight, and the report judges every
    printed share of the arm against it."""
    import torch

    from pipelines.core.train import models
    from pipelines.core.train.loop import Trainable
    from pipelines.core.train.profiler import ProfileAfterTraining

    torch.manual_seed(0)
    model = models.build("cnn_fmnist", classes=10)
    before = [p.detach().clone() for p in model.parameters()]
    batch = (torch.randn(64, 1, 28, 28), torch.zeros(64, dtype=torch.long))
    trainable = Trainable(model, lambda x, y: None)
    hook = ProfileAfterTraining.forward_pass(model, torch.device("cpu"))
    hook.train_start(trainable, type("Loaders", (), {"train": [batch]})())
    hook.train_end(trainable, epoch=1)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    profile = trainable.metrics["op_share_pct"]
    assert profile["aten::mkldnn_convolution"] > 5 and "profile_table" in trainable.artifacts
    rec = record("ch3-compile-cnn-cpu", "eager", 1000.0)
    rec["metrics"].update(trainable.metrics)
    judged = shares.share_rows([rec])
    assert {row.metric for row in judged} == {shares.share_metric(op) for op in PROFILE_CH3_EAGER}
    assert all(row.variant == "eager" and row.repeats == 1 for row in judged)
