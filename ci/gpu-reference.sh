#!/usr/bin/env bash
# GPU reference timings: the GPU experiments at bench scale in one go (--device cuda), then the report
# beside the book's A100 numbers. NOT RUN FOR REAL YET: no GPU was available when this was written; only
# its --dry-run path is tested. Run it on a GPU machine and commit $GPU_OUT as the GPU reference.
#
# Usage: [KNOB=value ...] ci/gpu-reference.sh [--dry-run] [OUT_DIR]
#   ci/gpu-reference.sh --dry-run                 # check the ids exist, print the exact commands
#   ci/gpu-reference.sh results/reference/gpu-a100-bench
#
# Knobs (echoed below):
#   GPU_OUT   output folder (default: OUT_DIR argument, else $OUT/gpu-reference when $OUT is set, else
#             results/reference/gpu-bench)
#   STEPS     timed steps per repeat (default 30)     REPEATS  repeats per variant (default 3)
#   DATA      dataset root (default data/; cifar10 is generated when missing, labelled generated)
#   PYTHON    interpreter with the package installed (default .venv/bin/python)
#   IDS       override the experiment list (space-separated)
# Entries that are not ready are reported as "not run"; the job fails only on a ready entry's error or a
# missing record.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
DATA="${DATA:-data}"
STEPS="${STEPS:-30}"
REPEATS="${REPEATS:-3}"
dry=0
if [[ "${1:-}" == "--dry-run" ]]; then dry=1; shift; fi
default_out="results/reference/gpu-bench"
[[ -n "${OUT:-}" ]] && default_out="$OUT/gpu-reference"
GPU_OUT="${GPU_OUT:-${1:-$default_out}}"
DEFAULT_IDS="ch3-compile-densenet-gpu ch5-pipeline ch7-amp vit-bf16-mixed ch10-gpu-nccl"
IDS="${IDS:-$DEFAULT_IDS}"
echo "gpu-reference: GPU_OUT=$GPU_OUT STEPS=$STEPS REPEATS=$REPEATS DATA=$DATA PYTHON=$PYTHON dry_run=$dry"
# shellcheck source=ci/_timings.sh
source ci/_timings.sh
load_catalog

run_ids=() listed=()
for id in $IDS; do
  is_in "$id" "${KNOWN[@]}" || { echo "gpu-reference: error: unknown experiment id $id (see accel list)" >&2; exit 2; }
  listed+=("$id")
  if is_in "$id" "${READY[@]}"; then run_ids+=("$id"); else echo "gpu-reference: $id is not ready: reported as not run"; fi
done
command_for() {  # ch10 runs at 1 GPU here: torchrun with one process
  local extra=()
  [[ "$1" == ch10-* ]] && extra=(NPROC=1)
  echo "${extra[*]:+${extra[*]} }$PYTHON -m pipelines launch $1 --scale bench --device cuda --steps $STEPS --repeats $REPEATS --data-root $DATA --results-dir $GPU_OUT"
}

if [[ $dry -eq 1 ]]; then
  for id in "${run_ids[@]}"; do command_for "$id"; done
  exit 0
fi

mkdir -p "$GPU_OUT"
if command -v nvidia-smi >/dev/null; then nvidia-smi > "$GPU_OUT/nvidia-smi.txt" 2>&1 || true; fi
if accel doctor --help >/dev/null 2>&1; then accel doctor > "$GPU_OUT/doctor.txt" 2>&1 || true; fi
ensure_data gpu-reference cifar10

failed=()
for id in "${run_ids[@]}"; do
  nproc_knob=()
  [[ "$id" == ch10-* ]] && nproc_knob=(NPROC=1)  # ch10 at 1 GPU here: torchrun with one process
  measure "$GPU_OUT" "$id" "${nproc_knob[@]}" -- --device cuda
done

only="$(IFS=,; echo "${listed[*]}")"
accel report --results-dir "$GPU_OUT" --out "$GPU_OUT" --experiments "$only" \
  --note "GPU bench scale, $STEPS steps x $REPEATS repeats; published figures are the book's A100 runs"
if [[ ${#failed[@]} -gt 0 ]]; then echo "gpu-reference: FAILED: ${failed[*]}" >&2; exit 1; fi
echo "gpu-reference: done; see $GPU_OUT/report.md"
