#!/usr/bin/env python3
"""Calibration of the verdict's intervals on this machine: what a "95 %" interval is worth here.

A benchmark, not a test (it takes tens of minutes and its numbers belong to the machine). Each run goes
through the whole method a user's command goes through: `accel run harness-calibration` at bench scale,
rounds of processes under the stopping rule and its budget, paired intervals. The entry has seven arms
(pipelines/catalog/harness.py): `a`; `a-again`, built exactly as `a` (an A/A pair: the true ratio is 1);
`big` and `big-again`, an A/A pair at four times the batch, unlike its neighbours; and `a` slowed by 3, 5
and 10 % of its step's compute (pipelines/selfcheck/calibration.py). `--entry harness-calibration-compile`
runs the other unlike pair instead: eager beside torch.compile, and `compiled-again` judged against
`compiled`, each process compiling both. Reported per method:

- A/A, per pair: how often the interval holds 1.00, with the exact (Clopper-Pearson) interval of that rate,
  its half-width, the mean log ratio ± its standard error (the statistic that would see a bias of a fraction
  of a percent), and the coverage split by the round the stopping rule stopped at;
- injected effects: how often each slow-down is detected (interval entirely below 1) and how often the
  interval holds the ratio injected ((compute + data) / (compute x (1 + slowdown) + data), from `a`'s
  records of the same run);
- `--share none` runs the same arms one process each, paired by round: the path arms with different
  process environments take (another OpenMP runtime, thread count, launcher);
- `--ladder N`: the chapter 2 ladder (baseline, nobias, bs256) N times in one shared process and N times in
  separate processes, same allocator: the two ratios must agree within their intervals.

Usage: ci/calibrate-intervals.py [--runs 20] [--runs-none N] [--budget-s 300] [--blocks 12]
                                 [--share auto|none|both] [--ladder 0] [--data-root data]
                                 [--entry harness-calibration|harness-calibration-compile]
                                 [--out results/calibration]
       ci/calibrate-intervals.py --summarize FILE...   (pools the runs of earlier calibration.json files)
       ci/calibrate-intervals.py --recompute OUT       (the same runs judged by the library as it is now)
Writes OUT/calibration.json after every run (a stopped calibration keeps its finished runs) and prints a
Markdown summary (docs/timing.md quotes it with this command). Every run's records stay in OUT/<share>-<k>,
so a change of the interval method is checked on the very runs the old one was (--recompute). The defaults
are `accel run`'s.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # row_of judges the records with the library itself
# Per entry (pipelines/catalog/harness.py): its A/A arms, whose true ratio is 1, and its slowed arms.
ENTRIES = {"harness-calibration": (("a-again", "big-again"), {"slow-3pct": 0.03, "slow-5pct": 0.05,
                                                              "slow-10pct": 0.10}),
           "harness-calibration-compile": (("compiled-again",), {})}
ENTRY = "harness-calibration"


def accel(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines", *args], cwd=REPO, capture_output=True, text=True)


def injected(records: list[dict], slowdown: float) -> float:
    """The throughput ratio a slow-down of the step's compute injects, from arm `a`'s own records: its
    loader's time is not slowed, only its compute."""
    arm = [r["metrics"] for r in records if r["variant"] == "a" and r["status"] == "ok"]
    compute, data = sum(m["compute_s"] for m in arm), sum(m["data_wait_s"] for m in arm)
    return (compute + data) / (compute * (1 + slowdown) + data)


def row_of(entry: str, folder: Path, seconds: float) -> dict:
    """One run's row from its records, through the library's own table (what `accel run --json` prints): the
    A/A and slowed arms' ratios and intervals, the injected ratios, how many rounds and what stopped them."""
    from pipelines.core.record import results
    from pipelines.core.stats import verdict

    records = results.load(folder).records
    arms = {line["variant"]: line for line in verdict.rows(records, [entry])}
    summary = json.loads(next(folder.glob("comparison--*.json")).read_text())
    row = {"seconds": seconds, "rounds": summary["rounds"], "stopped_by": summary["stopped_by"]}
    same, slowed = ENTRIES[entry]
    for name in (*same, *slowed):
        arm = arms[name]
        row[name] = {"ratio": arm["ratio"], "low": arm["ci_low"], "high": arm["ci_high"]}
        if name in slowed:
            row[name]["injected"] = injected(records, slowed[name])
    return row


def one_run(entry: str, folder: Path, share: str, budget_s: float, data_root: str, blocks: int) -> dict:
    shutil.rmtree(folder, ignore_errors=True)
    began = time.monotonic()
    out = accel("run", entry, "--budget-s", str(budget_s), "--share", share, "--results-dir", str(folder),
                "--data-root", data_root, "--blocks", str(blocks))
    took = time.monotonic() - began
    if out.returncode != 0:
        raise SystemExit(f"calibrate-intervals: {entry} failed ({out.returncode}): {out.stderr.strip()[-800:]}")
    return row_of(entry, folder, round(took, 1))


def recomputed(folder: Path) -> dict:
    """A finished calibration (its calibration.json and every run's records, FOLDER/<share>-<k>) judged again
    by the library as it is now: the same runs under the current interval method."""
    found = json.loads((folder / "calibration.json").read_text())
    entry = found.get("entry", ENTRY)
    for share, runs in found["runs"].items():
        missing = [f"{share}-{k}" for k in range(len(runs))
                   if not any((folder / f"{share}-{k}").glob("comparison--*.json"))]
        if missing:
            print(f"calibrate-intervals: {folder} lacks the records of {', '.join(missing)}: --recompute needs "
                  "the run folders the calibration wrote beside calibration.json", file=sys.stderr)
            sys.exit(2)
        found["runs"][share] = [row_of(entry, folder / f"{share}-{k}", row["seconds"]) for k, row in enumerate(runs)]
    found["command"] += f" (recomputed from its records: ci/calibrate-intervals.py --recompute {folder})"
    return found


def ladder(folder: Path, share: str, budget_s: float, data_root: str, blocks: int) -> dict:
    shutil.rmtree(folder, ignore_errors=True)
    out = accel("compare", "ch2-baseline", "ch2-nobias", "ch2-bs256", "--budget-s", str(budget_s), "--share", share,
                "--results-dir", str(folder), "--data-root", data_root, "--blocks", str(blocks), "--json")
    if out.returncode != 0:
        raise SystemExit(f"calibrate-intervals: the ladder failed ({out.returncode}): {out.stderr.strip()[-800:]}")
    return {arm["variant"]: {"ratio": arm["ratio"], "low": arm["ci_low"], "high": arm["ci_high"]}
            for arm in json.loads(out.stdout)["arms"] if arm["ratio"] is not None}


def clopper_pearson(held: int, runs: int) -> tuple[float, float]:
    """The exact (Clopper-Pearson) 95 % interval of a coverage of `held` in `runs`."""
    from scipy.stats import beta

    low = beta.ppf(0.025, held, runs - held + 1) if held else 0.0
    high = beta.ppf(0.975, held + 1, runs - held) if held < runs else 1.0
    return float(low), float(high)


def same_arm_lines(runs: list[dict], name: str) -> list[str]:
    """One A/A pair's coverage (with its exact interval), width, mean log ratio ± SE, and coverage by the
    round the run stopped at (runs that stop early are those whose spread came out small)."""
    rows = [(r["rounds"], r[name]) for r in runs if name in r]  # older calibrations have no big-again
    if not rows:
        return []
    n = len(rows)
    held = [a["low"] <= 1.0 <= a["high"] for _, a in rows]
    widths = [(a["high"] - a["low"]) / 2 / a["ratio"] * 100 for _, a in rows]
    low, high = clopper_pearson(sum(held), n)
    logs = [math.log(a["ratio"]) for _, a in rows]
    se = statistics.stdev(logs) / math.sqrt(n) if n > 1 else float("nan")
    by_round = "; ".join(f"stopped at round {k}: {sum(h for (r, _), h in zip(rows, held) if r == k)} of "
                         f"{sum(r == k for r, _ in rows)}" for k in sorted({r for r, _ in rows}))
    return [f"- A/A `{name}`: the interval holds 1.00 in {sum(held)} of {n} runs ({sum(held) / n:.0%}; 95 % "
            f"Clopper-Pearson {low:.0%} to {high:.0%}); half-width median ±{statistics.median(widths):.1f} % "
            f"(±{min(widths):.1f} to ±{max(widths):.1f} %); ratios {min(a['ratio'] for _, a in rows):.3f} to "
            f"{max(a['ratio'] for _, a in rows):.3f}; mean log ratio {100 * statistics.fmean(logs):+.2f} % ± "
            f"{100 * se:.2f} (SE); {by_round}"]


def share_summary(runs: list[dict]) -> list[str]:
    same = [name for name in ("a-again", "big-again", "compiled-again") if any(name in r for r in runs)]
    lines = [line for name in same for line in same_arm_lines(runs, name)]
    lines.append(f"- time per run: median {statistics.median(r['seconds'] for r in runs):.0f} s, rounds "
                 f"{min(r['rounds'] for r in runs)} to {max(r['rounds'] for r in runs)}, stopped by "
                 + ", ".join(f"{k} {sum(r['stopped_by'] == k for r in runs)}"
                             for k in sorted({r['stopped_by'] for r in runs})))
    for name in ENTRIES[ENTRY][1]:
        arms = [r[name] for r in runs if name in r]
        if not arms:
            continue
        found = sum(a["high"] < 1.0 for a in arms)
        covered = sum(a["low"] <= a["injected"] <= a["high"] for a in arms)
        lines.append(f"- {name}: injected {statistics.fmean(a['injected'] for a in arms):.3f}; detected (interval "
                     f"below 1) in {found} of {len(arms)}; the interval holds the injected ratio in {covered} of "
                     f"{len(arms)}; measured {min(a['ratio'] for a in arms):.3f} to "
                     f"{max(a['ratio'] for a in arms):.3f}")
    return lines


def print_summary(found: dict) -> None:
    print(f"calibration on this machine ({found['command']}), {found.get('entry', ENTRY)}:")
    for share, runs in found["runs"].items():
        if runs:
            how = "arms in one process, paired by block" if share == "auto" else "one process per arm, paired by round"
            print(f"\n--share {share} ({how}), {found.get('blocks', 6)} blocks per arm and process:")
            print("\n".join(share_summary(runs)))
    if found["ladder"]:
        print("\nthe chapter 2 ladder, one shared process vs a process per arm (same allocator):")
        for arm in ("nobias", "bs256"):
            for share, runs in found["ladder"].items():
                shown = "; ".join(f"{r[arm]['ratio']:.3f} [{r[arm]['low']:.3f}, {r[arm]['high']:.3f}]" for r in runs)
                print(f"- {arm}, --share {share}: {shown}")


def pooled(paths: list[Path]) -> dict:
    """The runs of several calibration.json files of one protocol, as one."""
    found: dict = {"runs": {}, "ladder": {}, "command": " + ".join(str(p) for p in paths)}
    files = [json.loads(p.read_text()) for p in paths]
    entries = {one.get("entry", ENTRY) for one in files}
    if len(entries) > 1:
        raise SystemExit(f"calibrate-intervals: these files calibrate different entries "
                         f"({', '.join(sorted(entries))}): summarize each entry's files apart")
    found["entry"] = entries.pop()
    found["blocks"] = "/".join(str(b) for b in sorted({one.get("blocks", 6) for one in files}))
    for one in files:
        for share, runs in one["runs"].items():
            found["runs"].setdefault(share, []).extend(runs)
        for share, runs in one.get("ladder", {}).items():
            found["ladder"].setdefault(share, []).extend(runs)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--budget-s", type=float, default=300)
    parser.add_argument("--share", choices=("auto", "none", "both"), default="auto")
    parser.add_argument("--ladder", type=int, default=0, help="ch2 ladder runs per sharing mode (0: none)")
    parser.add_argument("--blocks", type=int, default=12, help="blocks per arm and process (accel run --blocks)")
    parser.add_argument("--runs-none", type=int, help="runs with --share none (default: --runs)")
    parser.add_argument("--data-root", default="data")
    parser.add_argument("--entry", choices=tuple(ENTRIES), default=ENTRY)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "calibration")
    parser.add_argument("--summarize", type=Path, nargs="+", metavar="FILE",
                        help="print the summary of earlier calibration.json files, pooled; run nothing")
    parser.add_argument("--recompute", type=Path, metavar="OUT",
                        help="judge a finished calibration's kept records again with the library as it is now; "
                             "writes OUT/calibration-recomputed.json; run nothing")
    args = parser.parse_args(argv)
    if args.recompute:
        if not (args.recompute / "calibration.json").is_file():
            parser.exit(2, f"calibrate-intervals: no calibration.json in {args.recompute}\n")
        found = recomputed(args.recompute)
        (args.recompute / "calibration-recomputed.json").write_text(json.dumps(found, indent=1))
        print_summary(found)
        return 0
    if args.summarize:
        missing = [str(p) for p in args.summarize if not p.is_file()]
        if missing:
            parser.exit(2, f"calibrate-intervals: no such file: {', '.join(missing)}\n")
        print_summary(pooled(args.summarize))
        return 0
    if args.runs < 0 or args.ladder < 0:
        parser.error("--runs and --ladder must be 0 or more")
    args.out.mkdir(parents=True, exist_ok=True)
    found: dict = {"runs": {}, "ladder": {}, "blocks": args.blocks, "entry": args.entry,
                   "command": " ".join(["ci/calibrate-intervals.py", *(argv or sys.argv[1:])])}
    shares = ("auto", "none") if args.share == "both" else (args.share,)
    for share in shares:
        found["runs"][share] = []
        runs = args.runs_none if share == "none" and args.runs_none is not None else args.runs
        budget = args.budget_s * (7 / 6 if share == "none" else 1)  # a process per arm instead of one
        for k in range(runs):
            row = one_run(args.entry, args.out / f"{share}-{k}", share, budget, args.data_root, args.blocks)
            found["runs"][share].append(row)
            shown = ", ".join(f"{name} {row[name]}" for name in ENTRIES[args.entry][0])
            print(f"calibrate-intervals: --share {share} run {k + 1}/{runs}: {shown}, {row['seconds']} s",
                  file=sys.stderr, flush=True)
            (args.out / "calibration.json").write_text(json.dumps(found, indent=1))
    for share in ("auto", "none") if args.ladder else ():
        found["ladder"][share] = [ladder(args.out / f"ladder-{share}-{k}", share, args.budget_s * 2, args.data_root,
                                         args.blocks) for k in range(args.ladder)]
        (args.out / "calibration.json").write_text(json.dumps(found, indent=1))
    print_summary(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
