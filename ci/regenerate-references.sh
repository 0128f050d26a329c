#!/usr/bin/env bash
# Rewrite every committed reference's report (report.md, .csv, .html and the plots) from its records with
# today's code, so no committed verdict keeps the judgement of the day it was made. Each folder's header note
# is its report-note.txt. tests/unit/test_reference_reports.py fails when a committed report.csv differs from
# what today's code gives, and names this script.
# Usage: ci/regenerate-references.sh [results/reference/NAME ...]   (default: every folder)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
folders=("$@")
[[ ${#folders[@]} -gt 0 ]] || folders=(results/reference/*/)
for folder in "${folders[@]}"; do
  folder="${folder%/}"
  note=""
  [[ -f "$folder/report-note.txt" ]] && note="$(cat "$folder/report-note.txt")"
  "$PYTHON" -m pipelines report --results-dir "$folder" --out "$folder" --note "$note" | tail -n 1
done
