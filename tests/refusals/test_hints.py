"""The hints refusals print are consistent with the catalog (the commands themselves run end to end in
tests/e2e/test_hint_commands_run.py)."""

from pipelines.core.config import experiments

GPU_ENTRIES = [e for e in experiments.all_experiments().values() if e.status == "ready" and "gpu" in e.requires]


def test_nccl_hints_add_gloo_only_where_the_entry_uses_nccl():
    for entry in GPU_ENTRIES:
        args = " ".join(experiments.cpu_smoke_args(entry))
        assert ("backend=gloo" in args) == (entry.options.get("backend") == "nccl"), entry.id
