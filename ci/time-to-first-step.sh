#!/usr/bin/env bash
# Seconds from `make cpu-ddp NPROC=2` to its first timed step's record on disk: the start-up a user waits
# through before any work (docs/design.md, "What a command costs in processes", has the figures). The run
# is one smoke repeat of one timed step on synthetic data, so what is measured is make, the Python starts, the
# launcher, the rendezvous, the model and one step; the record appears whole (written, then renamed).
# Usage: ci/time-to-first-step.sh [CHECKOUT] [TIMES]   (another checkout: one with .venv, e.g. a symlink to ours)
set -euo pipefail
checkout="$(cd "${1:-$(dirname "$0")/..}" && pwd)" times="${2:-5}"
for _ in $(seq "$times"); do
  out="$(mktemp -d)"
  start=$(date +%s.%N)
  (cd "$checkout" && PYTHONPATH="$checkout" MASTER_PORT=29561 make -s cpu-ddp NPROC=2 ROUNDS= ARGS="--scale smoke --steps 1 \
    --warmup-steps 0 --repeats 1 --dataset synthetic --results-dir $out" >"$out.log" 2>&1) &
  until compgen -G "$out/*.jsonl" >/dev/null; do
    kill -0 $! 2>/dev/null || { cat "$out.log" >&2; exit 1; }
    sleep 0.02
  done
  end=$(date +%s.%N)
  wait
  python3 -c "print(f'{$end - $start:.2f}')"
  rm -rf "$out" "$out.log"
done
