#!/usr/bin/env python3
"""Order effects in the interleaved blocks of a results folder: what running after another block does.

Usage: python ci/order-effects.py RESULTS_DIR [RESULTS_DIR ...] [--pooled] [--json OUT]

For every process whose arms ran in interleaved blocks, the blocks are put back in the order they ran (the
records' `position` column; records written before it ran ABBA cycles over the process's `pairing.arms`,
which gives their order). Each block's log throughput is taken as a deviation from its arm's mean in that
process, so what differs between arms and between processes drops out. Three numbers per folder:

- self-follow: how much faster a block that ran right after a block of its own arm is (mean over arms and
  processes that have both kinds of block), and how many such blocks there were;
- parity: blocks of even cycles against odd ones;
- order bias: what the predecessors did to an arm's ratio against the process's first arm (the comparison's
  baseline): per process, each kind of predecessor's effect (its own arm, or a given other arm) is the mean
  deviation of the blocks that ran after one; an arm's bias is the mean effect over its blocks minus the
  same over the baseline's. Under ABBA the baseline follows itself at every other cycle boundary and a
  middle arm never, which a self-follow effect turns into a bias; the mean and the largest magnitude over
  arms;
- first cycle: per arm, its first cycle's log ratio to the baseline minus the mean of its later cycles'
  (what a burn-in cycle, timed and left out, would remove).

`--pooled` takes the records of all folders as one set (a calibration's runs, OUT/auto-*), one output.

Each with its standard error over the (arm, process) cases. docs/timing.md quotes the output for the old
ABBA reference and a reference measured with the carry-over balanced order (stats/orders.py).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipelines.core.errors import ConfigError  # noqa: E402
from pipelines.core.record import results  # noqa: E402
from pipelines.core.stats.orders import abba  # noqa: E402
from pipelines.core.stats.record_pairing import blocks_of  # noqa: E402


def label(record: dict) -> str:
    return f"{record['experiment']} [{record['variant']}]"


def processes(records: list[dict]) -> dict[str, dict[str, dict]]:
    """process -> arm label -> record, for processes of two or more arms that ran blocks."""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for record in records:
        mark = record.get("pairing") or {}
        if record.get("status") == "ok" and (record.get("metrics") or {}).get("blocks") and \
                len(mark.get("arms") or ()) > 1:
            out[mark["process"]][label(record)] = record
    return {p: arms for p, arms in out.items() if len(arms) > 1}


def sequence(arms: dict[str, dict]) -> list[tuple[str, int, float, int]]:
    """(arm, cycle, log samples/s, position) of every block of one process that has no recompile, in run order."""
    listed = (next(iter(arms.values())).get("pairing") or {})["arms"]
    blocks = []
    for name, record in arms.items():
        for row, (cycle, steps, seconds, recompiled, samples) in zip(record["metrics"]["blocks"], blocks_of(record)):
            # records before the position column ran ABBA over the listed arms
            position = int(row[7]) if len(row) > 7 else cycle * len(listed) + abba(listed, cycle).index(name)
            if steps and seconds > 0 and samples and not recompiled:
                blocks.append((name, cycle, math.log(samples / seconds), position))
    return sorted(blocks, key=lambda b: b[3])


def mean_se(values: list[float]) -> dict:
    if not values:
        return {"mean_pct": None, "se_pct": None, "cases": 0}
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    return {"mean_pct": round(100 * statistics.fmean(values), 3),
            "se_pct": None if se is None else round(100 * se, 3), "cases": len(values)}


def effects(records: list[dict]) -> dict:
    self_follow, parity, bias, self_blocks, blocks_seen = [], [], defaultdict(list), 0, 0
    first: dict[str, list[float]] = defaultdict(list)
    for arms in processes(records).values():
        blocks = sequence(arms)
        previous = {b[3]: None for b in blocks}
        for before, after in zip(blocks, blocks[1:]):
            if after[3] == before[3] + 1:  # adjacent in the run (a dropped recompile block breaks the chain)
                previous[after[3]] = before[0]
        by_arm: dict[str, list] = defaultdict(list)
        for block in blocks:
            by_arm[block[0]].append(block)
        for name, own in by_arm.items():
            centre = statistics.fmean(b[2] for b in own)
            same = [b[2] - centre for b in own if previous[b[3]] == name]
            other = [b[2] - centre for b in own if previous[b[3]] not in (None, name)]
            self_blocks += len(same)
            blocks_seen += len(own)
            if same and other:
                self_follow.append(statistics.fmean(same) - statistics.fmean(other))
            even = [b[2] - centre for b in own if b[1] % 2 == 0]
            odd = [b[2] - centre for b in own if b[1] % 2 == 1]
            if even and odd:
                parity.append(statistics.fmean(even) - statistics.fmean(odd))
        base = (next(iter(arms.values())).get("pairing") or {})["arms"][0]
        if base not in by_arm:
            continue
        # What each kind of predecessor does to a block: its own arm ("self") or a given other arm, pooled
        # over the process's arms; an arm's bias is the mean of what its blocks' predecessors did to them,
        # minus the same for the baseline's blocks.
        kind = lambda b: "self" if previous[b[3]] == b[0] else previous[b[3]]  # noqa: E731
        centres = {name: statistics.fmean(b[2] for b in own) for name, own in by_arm.items()}
        shift: dict[str, list[float]] = defaultdict(list)
        for block in blocks:
            if previous[block[3]] is not None:
                shift[kind(block)].append(block[2] - centres[block[0]])
        effect = {k: statistics.fmean(v) for k, v in shift.items()}
        carried = lambda own: statistics.fmean(effect[kind(b)] for b in own if previous[b[3]] is not None)  # noqa: E731
        lead = lambda own: own[0][2] - statistics.fmean(b[2] for b in own[1:])  # noqa: E731 - cycle 0 vs the rest
        for name, own in by_arm.items():
            if name != base and len(own) > 1 and len(by_arm[base]) > 1 and own[0][1] == by_arm[base][0][1] == 0:
                first[name].append(lead(own) - lead(by_arm[base]))
            if name != base and any(previous[b[3]] is not None for b in own):
                bias[name].append(carried(own) - carried(by_arm[base]))
    per_arm = {name: mean_se(values) for name, values in sorted(bias.items())}
    largest = max((abs(v["mean_pct"]) for v in per_arm.values() if v["mean_pct"] is not None), default=None)
    return {"self_follow": {**mean_se(self_follow), "blocks": self_blocks, "of_blocks": blocks_seen},
            "parity_even_minus_odd": mean_se(parity),
            "order_bias": {"mean": mean_se([v for values in bias.values() for v in values]),
                           "largest_arm_pct": largest, "per_arm": per_arm},
            "first_cycle": {name: mean_se(values) for name, values in sorted(first.items())}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--pooled", action="store_true", help="the records of all folders as one set")
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = parser.parse_args()
    out, loaded = {}, {}
    for folder in args.folders:
        try:
            loaded[str(folder)] = results.load(folder).records
        except ConfigError:
            print(f"order-effects: error: no results folder at {folder}: give a folder of records "
                  "(results/reference/<class>, or a run's --results-dir)", file=sys.stderr)
            return 2
    if args.pooled:
        loaded = {f"{len(loaded)} folders pooled": [r for records in loaded.values() for r in records]}
    for folder, records in loaded.items():
        found = out[folder] = effects(records)
        sf, par, ob = found["self_follow"], found["parity_even_minus_odd"], found["order_bias"]["mean"]
        print(f"{folder}:")
        print(f"  self-follow   {sf['mean_pct']} % ± {sf['se_pct']} (SE; {sf['cases']} arm x process cases; "
              f"{sf['blocks']} of {sf['of_blocks']} blocks followed their own arm)")
        print(f"  parity        {par['mean_pct']} % ± {par['se_pct']} (even minus odd cycles; {par['cases']} cases)")
        print(f"  order bias    {ob['mean_pct']} % ± {ob['se_pct']} (mean over {ob['cases']} cases; largest arm "
              f"{found['order_bias']['largest_arm_pct']} %)")
        for name, value in found["order_bias"]["per_arm"].items():
            print(f"    {name:<32} {value['mean_pct']} % ± {value['se_pct']}")
        print("  first cycle   (its ratio to the baseline minus the later cycles', per arm)")
        for name, value in found["first_cycle"].items():
            print(f"    {name:<32} {value['mean_pct']} % ± {value['se_pct']} ({value['cases']} processes)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
