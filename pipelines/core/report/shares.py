"""Profile shares: a source's printed op table against a profile recorded here, op by op.

A source printed torch.profiler tables of an older PyTorch. The catalog carries every printed share as a
`share_<op>_pct` figure (`share_metric`); a profiling pipeline records every op of its profile by the name
today's profiler gives it (`op_share_pct`).

Names. A printed name is looked up under the names torch 2.14's profiler emits for the same work
(`PRINTED_AS`, checked against a live profile by tests/unit/test_profile_shares.py):

- `aten::_reshape_alias` is gone (torch 2.1 made reshape of a viewable tensor dispatch to `aten::view`), so
  it is measured as `aten::view`;
- `aten::reshape` is measured as `aten::reshape` plus `aten::flatten` (a model that flattens with
  `torch.flatten` makes one composite call, then the same view, where `x.reshape(n, -1)` made one);
- `CompiledFunction`'s self time in torch 2.0 was the fused graph's; newer torch records the graph's call as
  `## Call CompiledFxGraph <hash> ##` inside it, so both count.

A printed op with no counterpart in a profile (`detach`, `aten::empty_strided` of a compiled forward pass,
which torch 2.14 no longer dispatches) has a measured share of 0 %: the profile holds every op it saw.

The band a measured share is judged in, and the words: stats/bases/profile_share.py.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Mapping


# torch 2.14's name (or the start of it, ending in "*") -> the name PyTorch 2.0.0 printed for that work
PRINTED_AS: dict[str, str] = {
    "aten::view": "aten::_reshape_alias",
    "aten::flatten": "aten::reshape",
    "## Call CompiledFxGraph*": "CompiledFunction",
}


def share_metric(op: str) -> str:
    """`aten::addmm` -> share_addmm_pct (the name figures and records use); torch_ipex ops keep an ipex_
    prefix, the profiler's `Optimizer.step#Adam.step` becomes share_Adam_step_pct, and an autograd-layer
    record without a namespace (`detach`, beside `aten::detach`) gets an autograd_ prefix so the two differ;
    an autograd Function (`CompiledFunction`) keeps its name."""
    namespace, _, name = op.rpartition("::")
    name = name.replace("Optimizer.step#", "").replace(".", "_")
    if namespace == "torch_ipex":
        name = f"ipex_{name}"
    elif not namespace and name.islower():
        name = f"autograd_{name}"
    return f"share_{name}_pct"


def printed_name(op: str) -> str:
    """The name PyTorch 2.0.0's profiler printed for what today's profiler calls `op`."""
    for today, printed in PRINTED_AS.items():
        if op == today or (today.endswith("*") and op.startswith(today[:-1])):
            return printed
    return op


def measured_shares(op_shares: Mapping[str, float]) -> dict[str, tuple[float, tuple[str, ...]]]:
    """One profile's ops under the figures' metrics: metric -> (share %, today's ops summed into it)."""
    out: dict[str, tuple[float, tuple[str, ...]]] = {}
    for op, pct in op_shares.items():
        metric = share_metric(printed_name(op))
        share, ops = out.get(metric, (0.0, ()))
        out[metric] = (share + float(pct), ops + (op,))
    return out


def printed_op(fig: Any) -> str:
    """The op a share figure names: its note starts with it (`aten::addmm: ...`), else its metric's stem."""
    named = fig.note.partition(": ")[0]
    return named if share_metric(named) == fig.metric else fig.metric.removeprefix("share_").removesuffix("_pct")


@dataclass(frozen=True)
class ShareRow:
    experiment: str
    variant: str
    scale: str
    metric: str
    op: str  # the name the source printed
    published: float
    measured: float
    measured_as: str  # today's op names summed, or why none
    repeats: int
    verdict: str

    def cells(self) -> dict[str, str]:
        from pipelines.core.stats.bases import profile_share  # here: the catalog imports this module lightly

        return {"experiment": self.experiment, "variant": self.variant, "scale": self.scale,
                "op (as printed)": self.op,
                "published %": f"{self.published:.2f}", "measured %": f"{self.measured:.2f}",
                "measured as": self.measured_as, "n": str(self.repeats),
                "band (points)": f"±{profile_share.tolerance_pp(self.published):.2f}", "verdict": self.verdict}


def share_rows(records: Iterable[Mapping[str, Any]], only: Iterable[str] | None = None) -> list[ShareRow]:
    """Every printed share of an entry against the ok records of its arm that hold a whole profile
    (`op_share_pct`): the mean over repeats of the share each record measured, and the verdict."""
    from pipelines.core.config import experiments  # here, so the catalog can import share_metric lightly
    from pipelines.core.stats.bases import profile_share
    from pipelines.core.stats.pairing import applies

    wanted = set(only) if only else None  # none named: every experiment
    entries = experiments.all_experiments()
    groups: dict[tuple[str, str, str], list[dict[str, tuple[float, tuple[str, ...]]]]] = {}
    for rec in records:
        shares = (rec.get("metrics") or {}).get("op_share_pct")
        if rec.get("status") != "ok" or not isinstance(shares, dict) or rec.get("experiment") not in entries:
            continue
        if wanted is not None and rec["experiment"] not in wanted:
            continue
        key = (rec["experiment"], rec["variant"], str((rec.get("config") or {}).get("scale", "")))
        groups.setdefault(key, []).append(measured_shares(shares))
    rows = []
    for (entry_id, variant, scale), profiles in groups.items():
        entry = entries[entry_id]
        for fig in entry.published:
            if fig.basis_name not in profile_share.FIGURES or not applies(entry, fig, variant):
                continue
            found = [profile.get(fig.metric, (0.0, ())) for profile in profiles]
            measured = statistics.fmean(share for share, _ in found)
            ops = sorted({op for _, names in found for op in names})
            rows.append(ShareRow(entry_id, variant, scale, fig.metric, printed_op(fig), fig.value, measured,
                                 " + ".join(ops) if ops else "not in the profile (0 %)", len(profiles),
                                 profile_share.judge(fig.value, measured)))
    return rows

