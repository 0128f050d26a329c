# shellcheck shell=bash
# Shared by ci/reference-timings.sh, ci/gpu-reference.sh and ci/gpu-lease.sh (sourced, not run): the catalog's id lists,
# data preparation, and one measured launch that must leave a new record. The caller sets PYTHON, DATA,
# ROUNDS, the array SIZE (--scale and how much each arm runs) and an array `failed`; `accel` runs the
# package with PYTHON.

accel() { "$PYTHON" -m pipelines "$@"; }

# READY / KNOWN: the catalog's ready ids and all its ids.
# shellcheck disable=SC2034  # READY and KNOWN are read by the sourcing script
load_catalog() {
  mapfile -t READY < <("$PYTHON" -m pipelines.core.config.experiments ready)
  mapfile -t KNOWN < <("$PYTHON" -m pipelines.core.config.experiments ids)
}

is_in() { local x="$1"; shift; local y; for y in "$@"; do [[ "$x" == "$y" ]] && return 0; done; return 1; }

# ensure_data TAG NAME...: generate each dataset that does not verify under DATA (records say generated).
# Fashion-MNIST at its real size (60,000 / 10,000: 6 s), so the book's 54,000-image epoch has its real shape.
ensure_data() {
  local tag="$1" name size
  shift
  for name in "$@"; do
    if ! accel data verify "$name" --root "$DATA" >/dev/null 2>&1; then
      echo "$tag: no verified $name under $DATA/: generating one (records say data_source=generated)"
      size=(--train 6000 --test 1000)
      [[ "$name" != fashion_mnist ]] || size=(--train 60000 --test 10000)
      accel data generate "$name" --root "$DATA" "${size[@]}"
    fi
  done
}

# "id:KEY=V:--arg" -> knobs (KEY=V) and extra arguments, in the arrays knobs and extra.
split_spec() {
  local token
  knobs=() extra=()
  IFS=: read -r -a tokens <<< "${1#*:}"
  [[ "$1" == *:* ]] || tokens=()
  for token in "${tokens[@]}"; do
    if [[ "$token" =~ ^[A-Z_]+= ]]; then knobs+=("$token"); else extra+=("$token"); fi
  done
}

# records_of OUT ID: how many record files ID has in OUT.
records_of() { find "$1" -maxdepth 1 -name "$2--*.jsonl" | wc -l; }

# measure OUT ID [KNOB=VALUE...] [-- ACCEL_ARGS...]: one bench-scale launch into OUT; a non-zero exit (a run
# past ENTRY_TIMEOUT seconds, when that is set, too) or no new record appends to `failed`. --no-baseline:
# the list names every baseline itself (a baseline brought along would be measured twice).
measure() {
  local out="$1" id="$2" knobs=() before
  shift 2
  while [[ $# -gt 0 && "$1" != "--" ]]; do knobs+=("$1"); shift; done
  [[ "${1:-}" == "--" ]] && shift
  echo "== $id ${knobs[*]} $*"
  before="$(records_of "$out" "$id")"
  local limit=()
  [[ "${ENTRY_TIMEOUT:-0}" -gt 0 ]] && limit=(timeout -k 15 "$ENTRY_TIMEOUT")
  # shellcheck disable=SC2153  # SIZE is the sourcing script's array (see the header)
  if ! "${limit[@]}" env "${knobs[@]}" "$PYTHON" -m pipelines launch "$id" "${SIZE[@]}" "$@" \
       --rounds "$ROUNDS" --data-root "$DATA" --results-dir "$out" --no-baseline; then
    failed+=("$id (exit code)")
    return 0
  fi
  [[ "$(records_of "$out" "$id")" -gt "$before" ]] || failed+=("$id (no record written)")
}

# compare_argv OUT ID[@ARM]...: sets `argv` to the `accel compare` command that measures them as one
# comparison: ROUNDS rounds, each one process per slot (the arms that share one), slots in ABBA order. The
# rounds are the rule, as ROUNDS is for one launch, so the time budget is out of the way.
compare_argv() {
  local out="$1"
  shift
  argv=("$PYTHON" -m pipelines compare "$@" --rounds "$ROUNDS" --budget-s 86400 --results-dir "$out"
        "${SIZE[@]}" --data-root "$DATA")
}

# members_and_extra ID... [-- ACCEL_ARGS...]: splits the arguments into the arrays members and extra.
members_and_extra() {
  members=() extra=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do members+=("$1"); shift; done
  [[ "${1:-}" == "--" ]] && shift
  extra=("$@")
}

# measure_alternating OUT ID... [-- ACCEL_ARGS...]: the IDs as one comparison (see compare_argv), the
# arguments after -- given to every process; a non-zero exit (or a run past ENTRY_TIMEOUT seconds per id) or
# an id left without a new record appends to `failed`.
measure_alternating() {
  local out="$1" id before=() members extra
  shift
  members_and_extra "$@"
  echo "== as one comparison: $*"
  for id in "${members[@]}"; do before+=("$(records_of "$out" "${id%%@*}")"); done
  compare_argv "$out" "${members[@]}" "${extra[@]}"
  local limit=()
  [[ "${ENTRY_TIMEOUT:-0}" -gt 0 ]] && limit=(timeout -k 15 "$((ENTRY_TIMEOUT * ${#members[@]}))")
  if ! "${limit[@]}" "${argv[@]}"; then
    failed+=("${members[*]} (exit code)")
    return 0
  fi
  for id in "${members[@]}"; do
    [[ "$(records_of "$out" "${id%%@*}")" -gt "${before[0]}" ]] || failed+=("$id (no record written)")
    before=("${before[@]:1}")
  done
}
