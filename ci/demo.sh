#!/usr/bin/env bash
# `make demo`: a short CPU ladder of real experiments at bench scale on offline data, then the table.
# Knobs: PYTHON (interpreter with the package installed), DATA (dataset root, default data/),
#        LADDER_BUDGET_S (seconds for the chapter 2 ladder's alternating rounds, default 110),
#        CH3_BUDGET_S (seconds for chapter 3's eager/compiled rounds, default 60).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
DATA="${DATA:-data}"
out="results/demo-$(date -u +%Y%m%dT%H%M%SZ)"
accel() { "$PYTHON" -m pipelines "$@"; }

# The demo ladder needs Fashion-MNIST; the card's next command (make cpu-ddp) and chapters 4-9 need
# CIFAR-10. Both are prepared here, offline, in their real on-disk formats, unless real copies verify.
for dataset in "fashion_mnist 6000" "cifar10 5000"; do
  read -r name train <<< "$dataset"
  if ! accel data verify "$name" --root "$DATA" >/dev/null 2>&1; then
    echo "demo: no verified $name under $DATA/; generating a small offline copy in its real format"
    echo "demo: (records will say data_source=generated; fetch the real set with: accel data fetch $name)"
    accel data generate "$name" --root "$DATA" --train "$train" --test 1000
  fi
done

# The chapter 2 ladder is one comparison: its arms alternate (ABBA rounds, one process each) until every
# ratio's interval is within 5 % or the budget runs out, so machine drift hits every arm alike.
echo "== chapter 2 ladder: ch2-baseline, ch2-nobias, ch2-bs256 in alternation"
# 20 timed steps a round keep three rounds (the fewest that give a verdict) within the demo's minutes.
accel compare ch2-baseline ch2-nobias ch2-bs256 --rounds auto --budget-s "${LADDER_BUDGET_S:-110}" \
  --results-dir "$out" --scale bench --steps 20 --data-root "$DATA"
# Chapter 3's two arms (eager, compiled) share one process: its repeats alternate inside it (ABBA rounds,
# --repeats auto: until both intervals are within 5 % or the budget is spent).
echo "== ch3-compile-cnn-cpu"
accel launch ch3-compile-cnn-cpu --scale bench --steps 20 --repeats auto --budget-s "${CH3_BUDGET_S:-60}" \
  --data-root "$DATA" --results-dir "$out"

echo
echo "== published vs reproduced ($out)"
accel report --results-dir "$out"
