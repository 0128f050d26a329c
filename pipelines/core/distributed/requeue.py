"""Whether a SLURM batch job that stopped for a requeue should be requeued (launch/slurm.sbatch).

`python -m pipelines.core.distributed.requeue --max N -- ACCEL-ARGS` runs in the batch script, on the host
(outside any image), after its job step ended with a failure. It requeues (exit 0, one `launch:` line) only
when all of these hold:
- the accel arguments name a checkpoint folder (`-o checkpoint_dir=DIR`);
- the newest checkpoint there, vouched for by its marker, was written because the ranks were asked to stop
  for a requeue (`requeue` in the marker: train/checkpoint.py), so the step stopped on purpose and resumes;
- it is further on (epoch, batch) than the checkpoint the last requeue of this folder started from, so a
  job that makes no progress is not requeued for ever;
- fewer than N requeues of this folder were made.
Otherwise it says why in one line and exits 1, and the job ends with the step's exit code. The ledger of
requeues is DIR/requeues.json (the count and the place of the last one), written atomically.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

LEDGER = "requeues.json"
NEWEST_MARKER = "checkpoint.pt.json"  # train/checkpoint.py's FILENAME + MARKER, read here without torch


def checkpoint_dir(accel_args: list[str]) -> Path | None:
    """The folder an accel command line names with `-o checkpoint_dir=DIR` (or `--option`), else None."""
    for flag, value in zip(accel_args, accel_args[1:]):
        if flag in ("-o", "--option") and value.startswith("checkpoint_dir="):
            return Path(value.split("=", 1)[1]) if value.split("=", 1)[1] else None
    return None


def decide(folder: Path | None, most: int) -> tuple[bool, str]:
    """(requeue?, the line that says why), updating the ledger when it requeues."""
    if folder is None:
        return False, "not requeued: the command names no -o checkpoint_dir=DIR, so a new job would start over"
    try:
        marker = json.loads((folder / NEWEST_MARKER).read_text())
    except (OSError, ValueError):
        return False, f"not requeued: {folder} holds no marked checkpoint to resume from"
    if not marker.get("requeue"):
        return False, (f"not requeued: the newest checkpoint in {folder} was not taken for a requeue (the step "
                       "failed, or was stopped otherwise); see the job's output")
    place = [int(marker.get("epoch", 0)), int(marker.get("batch", 0))]
    try:
        ledger = json.loads((folder / LEDGER).read_text())
    except (OSError, ValueError):
        ledger = {"count": 0, "place": None}
    if ledger["place"] is not None and place <= ledger["place"]:
        return False, (f"not requeued: no progress since the last requeue (both at epoch {place[0]}, batch "
                       f"{place[1]}); see the job's output")
    if ledger["count"] >= most:
        return False, f"not requeued: {ledger['count']} requeues made already (MAX_REQUEUES={most})"
    from pipelines.core.record import atomic

    atomic.write_text(folder / LEDGER, json.dumps({"count": ledger["count"] + 1, "place": place}) + "\n")
    return True, (f"requeue {ledger['count'] + 1} of at most {most}: the ranks checkpointed at epoch {place[0]}, "
                  f"batch {place[1]} in {folder}; the job resumes there")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="python -m pipelines.core.distributed.requeue")
    parser.add_argument("--max", type=int, required=True, help="MAX_REQUEUES: the most requeues of one folder")
    ours = parser.parse_args(argv[:split])
    requeue, line = decide(checkpoint_dir(argv[split + 1:]), ours.max)
    print(f"launch: {line}", file=sys.stderr)
    return 0 if requeue else 1


if __name__ == "__main__":
    sys.exit(main())
