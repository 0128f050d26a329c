# shellcheck shell=bash
# Shared by ci/reference-timings.sh and ci/gpu-reference.sh (sourced, not run): the catalog's id lists,
# data preparation, and one measured launch that must leave a new record. The caller sets PYTHON, DATA,
# STEPS, REPEATS and an array `failed`; `accel` runs the package with PYTHON.

accel() { "$PYTHON" -m pipelines "$@"; }

# READY / KNOWN: the catalog's ready ids and all its ids.
# shellcheck disable=SC2034  # READY and KNOWN are read by the sourcing script
load_catalog() {
  mapfile -t READY < <("$PYTHON" -m pipelines.core.experiments ready)
  mapfile -t KNOWN < <("$PYTHON" -m pipelines.core.experiments ids)
}

is_in() { local x="$1"; shift; local y; for y in "$@"; do [[ "$x" == "$y" ]] && return 0; done; return 1; }

# ensure_data TAG NAME...: generate each dataset that does not verify under DATA (records say generated).
ensure_data() {
  local tag="$1" name
  shift
  for name in "$@"; do
    if ! accel data verify "$name" --root "$DATA" >/dev/null 2>&1; then
      echo "$tag: no verified $name under $DATA/: generating one (records say data_source=generated)"
      accel data generate "$name" --root "$DATA" --train 6000 --test 1000
    fi
  done
}

# measure OUT ID [KNOB=VALUE...] [-- ACCEL_ARGS...]: one bench-scale launch into OUT; a non-zero exit (a run
# past ENTRY_TIMEOUT seconds, when that is set, too) or no new record appends to `failed`.
measure() {
  local out="$1" id="$2" knobs=() before after
  shift 2
  while [[ $# -gt 0 && "$1" != "--" ]]; do knobs+=("$1"); shift; done
  [[ "${1:-}" == "--" ]] && shift
  echo "== $id ${knobs[*]} $*"
  before="$(find "$out" -maxdepth 1 -name "$id--*.jsonl" | wc -l)"
  local limit=()
  [[ "${ENTRY_TIMEOUT:-0}" -gt 0 ]] && limit=(timeout -k 15 "$ENTRY_TIMEOUT")
  if ! "${limit[@]}" env "${knobs[@]}" "$PYTHON" -m pipelines launch "$id" "$@" --scale bench --steps "$STEPS" \
       --repeats "$REPEATS" --data-root "$DATA" --results-dir "$out"; then
    failed+=("$id (exit code)")
    return 0
  fi
  after="$(find "$out" -maxdepth 1 -name "$id--*.jsonl" | wc -l)"
  [[ "$after" -gt "$before" ]] || failed+=("$id (no record written)")
}
