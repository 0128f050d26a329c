#!/usr/bin/env bash
# GPU reference timings: every GPU entry of the catalog at bench scale (--device cuda), the GPU's measured
# matmul peak, the harness overhead on the GPU, then the report beside the book's and the talk's numbers.
# First run for real on an NVIDIA H100 80GB HBM3 (results/reference/h100-bench/, docs/timing.md: GPU reference).
#
# Usage: [KNOB=value ...] ci/gpu-reference.sh [--dry-run] [OUT_DIR]
#   ci/gpu-reference.sh --dry-run                 # check the ids exist, print the exact commands
#   ci/gpu-reference.sh results/reference/gpu-a100-bench
#
# Knobs (echoed below):
#   GPU_OUT   output folder (default: OUT_DIR argument, else $OUT/gpu-reference when $OUT is set, else
#             results/reference/gpu-bench)
#   STEPS     timed steps per arm and process (default 30)     ROUNDS  rounds of processes (default 3)
#   DATA      dataset root (default data/; cifar10 and imdb are generated when missing, labelled generated)
#   PYTHON    interpreter with the package installed (default .venv/bin/python)
#   IDS       override the experiment list (space-separated; default: every ready entry whose target is cuda,
#             the talk's fp32 and bf16-mixed steps as one comparison). As in ci/reference-timings.sh, ids
#             joined by + are one comparison (accel compare, ID@ARM for one arm), and colon-separated extras
#             after an id are launcher knobs (KEY=VALUE) or accel arguments: IDS="ch7-amp:--steps=8"
#   GPUS      GPUs to use (default: what nvidia-smi -L lists). A torchrun entry asks for NPROC ranks; it gets
#             at most GPUS, and the arms that need more ranks write `skipped` records saying so
#   ENTRY_TIMEOUT  seconds one entry may run (default 0: no limit); past it the entry counts as failed
#   EXTRAS    1 (default) also measures the matmul peak (ci/matmul-peak.py) and the harness overhead
#             (ci/harness-overhead.py --device cuda); 0 skips both
# Entries that are not ready are reported as "not run"; the job fails only on a ready entry's error or a
# missing record.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
DATA="${DATA:-data}"
STEPS="${STEPS:-30}"
SIZE=(--scale bench --steps "$STEPS")  # how much each arm runs (ci/_timings.sh's measure reads it)
if [[ -n "${REPEATS:-}" ]]; then  # the knob's old name: rounds of processes are ROUNDS (docs/design.md)
  echo "gpu-reference: REPEATS=$REPEATS is now called ROUNDS (rounds of processes): pass ROUNDS=$REPEATS" >&2
  exit 2
fi
ROUNDS="${ROUNDS:-3}"
EXTRAS="${EXTRAS:-1}"
ENTRY_TIMEOUT="${ENTRY_TIMEOUT:-0}"
dry=0
if [[ "${1:-}" == "--dry-run" ]]; then dry=1; shift; fi
default_out="results/reference/gpu-bench"
[[ -n "${OUT:-}" ]] && default_out="$OUT/gpu-reference"
GPU_OUT="${GPU_OUT:-${1:-$default_out}}"
if [[ -z "${GPUS:-}" ]]; then
  GPUS=0
  command -v nvidia-smi >/dev/null && GPUS="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
  [[ $dry -eq 1 && "$GPUS" -eq 0 ]] && GPUS=1  # a dry run prints the commands of a one-GPU machine
fi
# The talk's step 04 ratio (bf16-mixed against true fp32) is measured as one comparison: its two sides
# alternate in the same rounds, instead of two launches minutes apart.
VIT_PAIR="vit-fabric-baseline+vit-bf16-mixed"
if [[ -z "${IDS:-}" ]]; then
  IDS=""
  for id in $("$PYTHON" -m pipelines.core.config.experiments gpu); do
    case "$id" in
      vit-fabric-baseline) IDS+="$VIT_PAIR " ;;
      vit-bf16-mixed) ;;
      *) IDS+="$id " ;;
    esac
  done
fi
echo "gpu-reference: GPU_OUT=$GPU_OUT STEPS=$STEPS ROUNDS=$ROUNDS DATA=$DATA PYTHON=$PYTHON GPUS=$GPUS" \
     "ENTRY_TIMEOUT=$ENTRY_TIMEOUT EXTRAS=$EXTRAS dry_run=$dry"
for knob in ENTRY_TIMEOUT GPUS; do
  [[ "${!knob}" =~ ^[0-9]+$ ]] || { echo "gpu-reference: error: $knob=${!knob} is not a whole number (e.g. $knob=2)" >&2; exit 2; }
done
# shellcheck source=ci/_timings.sh
source ci/_timings.sh
load_catalog

# run_ids: the specs to measure (a comparison keeps its ready members); listed: every id, for the report
run_ids=() listed=()
for spec in $IDS; do
  kept=()
  IFS=+ read -r -a members <<< "${spec%%:*}"
  for member in "${members[@]}"; do
    id="${member%%@*}"
    is_in "$id" "${KNOWN[@]}" || { echo "gpu-reference: error: unknown experiment id $id (see accel list)" >&2; exit 2; }
    is_in "$id" "${listed[@]}" || listed+=("$id")
    if is_in "$id" "${READY[@]}"; then kept+=("$member"); else echo "gpu-reference: $id is not ready: reported as not run"; fi
  done
  [[ ${#kept[@]} -gt 0 ]] || continue
  if [[ ${#members[@]} -gt 1 ]]; then run_ids+=("$(IFS=+; echo "${kept[*]}")"); else run_ids+=("$spec"); fi
done
# nproc_knob ID: NPROC=n for a torchrun entry, n = the catalog's NPROC capped at the GPUs here (one rank per GPU)
nproc_knob() {
  local wanted
  wanted="$("$PYTHON" -c 'import sys; from pipelines.core.config import experiments as e; x = e.get(sys.argv[1]);
print(x.knobs.get("NPROC", "") if x.launcher == "torchrun" else "")' "$1")"
  [[ -z "$wanted" ]] && return 0
  echo "NPROC=$(( wanted < GPUS ? wanted : GPUS ))"
}

# measure_spec SPEC: one comparison (ids joined by +) or one launch with the spec's knobs and extras
measure_spec() {
  local spec="$1" knob
  if [[ "$spec" == *+* ]]; then
    # shellcheck disable=SC2086  # the members, one word each
    if [[ $dry -eq 1 ]]; then compare_argv "$GPU_OUT" ${spec//+/ } --device cuda; echo "${argv[*]}"
    else measure_alternating "$GPU_OUT" ${spec//+/ } -- --device cuda; fi
    return 0
  fi
  split_spec "$spec"
  knob="$(nproc_knob "${spec%%:*}")"
  [[ -z "$knob" ]] || knobs=("$knob" "${knobs[@]}")
  if [[ $dry -eq 1 ]]; then
    local line=("${knobs[@]}" "$PYTHON" -m pipelines launch "${spec%%:*}" "${SIZE[@]}" --device cuda "${extra[@]}"
                --rounds "$ROUNDS" --data-root "$DATA" --results-dir "$GPU_OUT" --no-baseline)
    echo "${line[*]}"
  else
    measure "$GPU_OUT" "${spec%%:*}" "${knobs[@]}" -- --device cuda "${extra[@]}"
  fi
}

if [[ $dry -eq 1 ]]; then
  for spec in "${run_ids[@]}"; do measure_spec "$spec"; done
  exit 0
fi
[[ "$GPUS" -ge 1 ]] || { echo "gpu-reference: error: no GPU (nvidia-smi lists none); run it on a GPU machine, or --dry-run here" >&2; exit 2; }

mkdir -p "$GPU_OUT"
nvidia-smi > "$GPU_OUT/nvidia-smi.txt" 2>&1 || true
accel doctor > "$GPU_OUT/doctor.txt" 2>&1 || true
ensure_data gpu-reference cifar10 imdb
failed=()
if [[ "$EXTRAS" == 1 ]]; then
  "$PYTHON" ci/matmul-peak.py --out "$GPU_OUT/matmul-peak.json" || failed+=("matmul-peak")
  # two workloads: a small CNN, where per-step costs show most, and the talk's ViT-B/16 at its batch size
  "$PYTHON" ci/harness-overhead.py --device cuda --steps 200 --repeats 6 --results-dir "$GPU_OUT" \
    || failed+=("harness-overhead cnn")
  "$PYTHON" ci/harness-overhead.py --device cuda --model vit_b_16 --batch-size 16 --steps 60 --repeats 6 \
    --results-dir "$GPU_OUT" || failed+=("harness-overhead vit_b_16")
fi

for spec in "${run_ids[@]}"; do measure_spec "$spec"; done
only="$(IFS=,; echo "${listed[*]}")"
accel report --results-dir "$GPU_OUT" --out "$GPU_OUT" --experiments "$only" \
  --note "GPU bench scale, $STEPS steps x $ROUNDS rounds; published figures are the book's A100 runs and the talk's (its GPU model unrecorded)"
if [[ ${#failed[@]} -gt 0 ]]; then echo "gpu-reference: FAILED: ${failed[*]}" >&2; exit 1; fi
echo "gpu-reference: done; see $GPU_OUT/report.md"
