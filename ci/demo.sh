#!/usr/bin/env bash
# `make demo`: a short CPU ladder of real experiments at bench scale on offline data, then the table.
# Knobs: PYTHON (interpreter with the package installed), DATA (dataset root, default data/).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
DATA="${DATA:-data}"
out="results/demo-$(date -u +%Y%m%dT%H%M%SZ)"
accel() { "$PYTHON" -m pipelines "$@"; }

if ! accel data verify fashion_mnist --root "$DATA" >/dev/null 2>&1; then
  echo "demo: no verified Fashion-MNIST under $DATA/; generating a small offline copy in the real IDX"
  echo "demo: format (records will say data_source=generated; fetch the real set with: accel data fetch fashion_mnist)"
  accel data generate fashion_mnist --root "$DATA" --train 6000 --test 1000
fi

for id in ch2-baseline ch2-nobias ch2-bs256 ch3-compile-cnn-cpu; do
  echo "== $id"
  accel launch "$id" --scale bench --data-root "$DATA" --results-dir "$out"
done

echo
echo "== published vs reproduced ($out)"
accel report --results-dir "$out"
