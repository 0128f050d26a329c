#!/usr/bin/env bash
# One short GPU lease, prepared: the GPU reference's most wanted rows in priority order, each stage under a
# time cap, inside one deadline, so that a lease of a few minutes brings back everything it finished.
#
#   machine   nvidia-smi, accel doctor, the measured matmul peak (ci/matmul-peak.py)
#   data      generated CIFAR-10 (6000 train / 1000 test images, marked generated), when missing
#   vit       the talk's step 04 pair, true fp32 (step 03 at 'highest') against bf16-mixed, alternated in 3 rounds
#             (the pair only: the baseline entry's TF32 arm would add a third process to every round)
#   profile   where a ViT-B/16 step's time goes (ci/gpu-step-profile.py: host or kernels, batch 16 and 128)
#   densenet  ch3's DenseNet121 compile and backends entries as one comparison, 3 rounds (inductor caches on:
#             round 1 compiles, rounds 2-3 load; steady-state ratios are unaffected, end-to-end ones say so)
#   ch5       ch5-pipeline: the book's pair (no workers, no pinning -> 8 workers + pinned memory), 3 rounds
#   ch7       ch7-amp: fp32, bf16, fp16 + GradScaler, 3 rounds
#
# Sizes measured on an NVIDIA H200 lease (2026-11-28, results/reference/h200-bench/lease.log): machine 13 s;
# the ViT pair 23 s a process (46 s a round); profile 50 s; DenseNet's round 1 185 s (its cold compile 100 s
# of it); a ch7-amp process 73 s (EfficientNet-B7 at batch 2048). A 15-minute lease (1 to 2 minutes of it
# the machine's start) fits machine + data + vit + profile + densenet; ch5 and ch7 need leases of their own
# (ch7's 3 arms x 3 rounds are about 11 minutes: STAGES="machine data ch7" DEADLINE_S=570 runs 2 rounds):
#   STAGES="machine data ch5 ch7" ci/gpu-lease.sh
#
# A stage starts only when its minimum fits before the deadline; a stage cut by its cap keeps the rounds it
# finished (accel keeps finished work on SIGTERM). Records land in WORK; every 15 s and at the end WORK is
# packed into LEASE_OUT/records.tgz (written whole, then renamed), so a call killed at its limit still
# returns what was measured. The report is made afterwards, on any machine: accel report --results-dir DIR.
#
# Usage: [KNOB=value ...] ci/gpu-lease.sh
# Knobs: DEADLINE_S (default 540: seconds from start for every stage); PYTHON (default: the python3 on the
#   PATH, the GPU image's; the launchers need its full path); LEASE_OUT (default $OUT, else
#   /tmp/gpu-lease-out); WORK (default /tmp/gpu-lease); STAGES (default "machine data vit profile densenet
#   ch5 ch7"); DEVICE (default cuda; cpu with SCALE=smoke rehearses the flow without a GPU); SCALE (bench)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

PYTHON="${PYTHON:-$(command -v python3)}"
DEADLINE_S="${DEADLINE_S:-540}"
LEASE_OUT="${LEASE_OUT:-${OUT:-/tmp/gpu-lease-out}}"
WORK="${WORK:-/tmp/gpu-lease}"
STAGES="${STAGES:-machine data vit profile densenet ch5 ch7}"
DEVICE="${DEVICE:-cuda}"
SCALE="${SCALE:-bench}"
[[ -x "$PYTHON" ]] || { echo "gpu-lease: error: PYTHON=${PYTHON:-(no python3 on the PATH)} is not an executable file; give its full path (PYTHON=\$(command -v python3))" >&2; exit 2; }
[[ "$DEADLINE_S" =~ ^[0-9]+$ ]] || { echo "gpu-lease: error: DEADLINE_S=$DEADLINE_S is not a whole number of seconds (e.g. DEADLINE_S=540)" >&2; exit 2; }
mkdir -p "$LEASE_OUT" "$WORK/records"
began=$SECONDS
export PYTHONUNBUFFERED=1
# shellcheck source=ci/_timings.sh
source ci/_timings.sh  # accel, ensure_data
DATA="$WORK/data"
COMMON=(--scale "$SCALE" --device "$DEVICE" --data-root "$WORK/data" --results-dir "$WORK/records")

pack() {  # WORK's records and logs into LEASE_OUT/records.tgz, never half-written
  tar czf "$LEASE_OUT/.records.tgz" -C "$WORK" records 2>/dev/null && mv "$LEASE_OUT/.records.tgz" "$LEASE_OUT/records.tgz"
}
(while sleep 15; do pack; done) &
packer=$!
trap 'kill $packer 2>/dev/null; pack' EXIT

# stage NAME MIN_S CAP_S COMMAND...: runs COMMAND under min(CAP_S, time left) when MIN_S still fits
stage() {
  local name="$1" min="$2" cap="$3" left rc
  shift 3
  [[ " $STAGES " == *" $name "* ]] || return 0
  left=$(( DEADLINE_S - (SECONDS - began) ))
  (( left < 0 )) && left=0  # past the deadline (SECONDS ticks in whole seconds): none left, never "-1s"
  if (( left < min )); then
    echo "gpu-lease: $name skipped: ${left}s left of DEADLINE_S=$DEADLINE_S, it needs ${min}s" | tee -a "$WORK/records/lease.log"
    return 0
  fi
  (( cap > left )) && cap=$left
  echo "gpu-lease: $name (cap ${cap}s, ${left}s left) at $(( SECONDS - began ))s: $*" | tee -a "$WORK/records/lease.log"
  timeout -k 10 "$cap" "$@" 2>&1 | tee "$WORK/records/$name.log"
  rc=${PIPESTATUS[0]}
  echo "gpu-lease: $name ended rc=$rc at $(( SECONDS - began ))s" | tee -a "$WORK/records/lease.log"
}

machine() {
  nvidia-smi > "$WORK/records/nvidia-smi.txt" 2>&1 || echo "no nvidia-smi" > "$WORK/records/nvidia-smi.txt"
  accel doctor > "$WORK/records/doctor.txt" 2>&1
  [[ "$DEVICE" == cuda ]] || return 0
  "$PYTHON" ci/matmul-peak.py --repeats 10 --out "$WORK/records/matmul-peak.json"
}
data() { ensure_data gpu-lease cifar10; }
export -f accel ensure_data machine data
export PYTHON WORK DEVICE DATA
# smoke scale runs in one process: a launch there repeats instead of running rounds of processes
rounds=(--rounds 3)
[[ "$SCALE" == smoke ]] && rounds=(--repeats 3)
peak=()
[[ "$DEVICE" == cuda ]] && peak=(--peak "$WORK/records/matmul-peak.json")
profile_size=(--batch-sizes "16,128")
[[ "$SCALE" == smoke ]] && profile_size=(--model vit_tiny --batch-sizes 2 --steps 2 --warmup 1 --profile-steps 1)

stage machine 40 40 bash -c machine
stage data 20 30 bash -c data
stage vit 120 170 "$PYTHON" -m pipelines compare vit-fabric-baseline@fabric-32-true vit-bf16-mixed --rounds 3 --budget-s 86400 \
  --steps 20 "${COMMON[@]}"
stage profile 40 70 "$PYTHON" ci/gpu-step-profile.py --device "$DEVICE" "${profile_size[@]}" "${peak[@]}" \
  --out "$WORK/records/step-profile.json"
stage densenet 200 330 "$PYTHON" -m pipelines compare ch3-compile-densenet-gpu ch3-backends-densenet-gpu --rounds 3 \
  --budget-s 86400 --steps 12 --blocks 6 -o cache=true "${COMMON[@]}"
stage ch5 45 100 "$PYTHON" -m pipelines launch ch5-pipeline --variant baseline --variant w8-pin "${rounds[@]}" \
  --steps 6 --blocks 6 --warmup-steps 2 --no-baseline "${COMMON[@]}"
stage ch7 60 200 "$PYTHON" -m pipelines launch ch7-amp --variant fp32 --variant bf16 --variant fp16 "${rounds[@]}" \
  --steps 6 --blocks 6 --warmup-steps 3 --no-baseline "${COMMON[@]}"
echo "gpu-lease: done at $(( SECONDS - began ))s; records: $LEASE_OUT/records.tgz"
