#!/usr/bin/env bash
# Reference timings: the CPU-reproducible experiments at bench scale with repeats, then the report.
#
# Usage: [KNOB=value ...] ci/reference-timings.sh [--dry-run]
#   make reference-timings                          # writes $REF_OUT (default below)
#   REF_OUT=results/mine STEPS=10 ci/reference-timings.sh
#
# Knobs (echoed below):
#   REF_OUT   output folder (records + report.md/csv/html + PNGs; its old ones are replaced);
#             default results/reference/cpu-<cores>core-bench
#   ROUNDS    rounds of every comparison (default 3: the fewest a verdict needs; each round is one process
#             per slot, the arms that share one: core/harness/sharing.py)
#   BLOCKS    interleaved blocks per arm and process (default 6, about 0.5 s each)
#   STEPS     timed steps per arm and process instead of time-matched blocks (default: unset)
#   HARNESS_STEPS / HARNESS_REPEATS   for the harness-overhead benchmark (default 60 / 6); HARNESS_REPEATS=0
#             leaves it out, said in one line (CI's drift gate: about a minute on 2 cores for an interval of
#             +-15 % that no gate reads; `make harness-overhead` and the committed references run it)
#   DATA      dataset root (default data/); cifar10 + fashion_mnist are generated when missing (labelled
#             data_source=generated in every record)
#   NOTE      text for the report header (e.g. "shared, noisy machine")
#   PYTHON    interpreter with the package installed (default .venv/bin/python)
#   IDS       override the experiment list (space-separated), e.g. IDS="ch2-baseline ch2-nobias"
#   EXCLUDE   ids left out of the list (space-separated): CI leaves out ch7-amp (EfficientNet-B0 fp32/bf16,
#             about 10 of its 16 minutes on 2 cores), listed as not run
#   AGAINST   committed reference to compare with (default: the results/reference/cpu-<cores>core*-bench
#             folder whose records are of this machine's class, else results/reference/cpu-<cores>core-bench;
#             never REF_OUT itself): the report gets a drift table (both intervals, the difference) and the
#             job fails when a conclusive verdict reversed (faster <-> slower than published) or a
#             reproduction was lost or gained (reproduced <-> faster or slower); a reference
#             from another machine class is named and skipped, not compared.
#   REFERENCES  the folder of committed references (default results/reference): with none of this machine's
#             class there, the gate checks the directions every committed class agrees on instead
#             (core/report/invariants.py) and names the command that commits this run as the class's
#   DIFF_FAIL_ABOVE  with a same-class AGAINST, `accel diff AGAINST REF_OUT --fail-above` this percent
#             `--relative`: an arm fails when it is significantly slower than the machine's shift (the
#             median change of all arms) by more than this (default 50: a gross regression such as a lost
#             optimisation, far beyond the spread of bench runs on a shared 2-core machine); smaller changes
#             are printed with intervals, not gated
# Entries that are not `ready` in the catalog are listed in the report as "not run"; the job fails only
# when a ready entry exits non-zero or leaves no record, never on a timing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
DATA="${DATA:-data}"
STEPS="${STEPS:-}"
if [[ -n "${REPEATS:-}" ]]; then  # the knob's old name: rounds of processes are ROUNDS (docs/design.md)
  echo "reference-timings: REPEATS=$REPEATS is now called ROUNDS (rounds of processes): pass ROUNDS=$REPEATS" >&2
  exit 2
fi
ROUNDS="${ROUNDS:-3}"
BLOCKS="${BLOCKS:-6}"
DIFF_FAIL_ABOVE="${DIFF_FAIL_ABOVE:-50}"
# The overhead benchmark measures a few-percent effect: it gets twice the steps and repeats.
HARNESS_STEPS="${HARNESS_STEPS:-60}"
HARNESS_REPEATS="${HARNESS_REPEATS:-6}"
NOTE="${NOTE:-}"
cores="$(nproc)"
REFERENCES="${REFERENCES:-results/reference}"
COMMITTED_REF="$REFERENCES/cpu-${cores}core-bench"
# Machines change between sessions (AMD Zen 3 and 5, Intel Sapphire Rapids): each class keeps its own
# committed reference, cpu-<cores>core-bench (the first) or cpu-<cores>core-<vendor>-f<family>m<model>-bench.
shopt -s nullglob
SAME_CLASS_REF="$("$PYTHON" -m pipelines.core.report.drift pick "$REFERENCES"/cpu-"${cores}"core*-bench)"
shopt -u nullglob
# The new class's folder: vendor, family and model, and where a committed folder already has that name (one
# CPU model seen with other vector units, e.g. with and without AMX), its best vector unit too.
CLASS_TAG="$("$PYTHON" - "$REFERENCES/cpu-${cores}core" <<'PY'
import hashlib, os, sys
from pipelines.core.record import envinfo
cpu = envinfo.cpu_class()
w = (cpu["cpu_id"] or "").replace("AuthenticAMD", "amd").replace("GenuineIntel", "intel").split()
tag = f"{w[0]}-f{w[2]}m{w[4]}" if len(w) == 5 else "other"
isa = (cpu["cpu_isa"] or "").split()
best = next((label for flag, label in (("amx_tile", "amx"), ("avx512_bf16", "avx512bf16"), ("avx512f", "avx512"),
                                       ("avx2", "avx2")) if flag in isa), "novec")
for candidate in (tag, f"{tag}-{best}", f"{tag}-{best}-{hashlib.sha1(' '.join(isa).encode()).hexdigest()[:6]}"):
    if not os.path.exists(f"{sys.argv[1]}-{candidate}-bench"):
        break
print(candidate)
PY
)"
DEFAULT_REF_OUT="${SAME_CLASS_REF:-$REFERENCES/cpu-${cores}core-${CLASS_TAG}-bench}"
[[ -d "$COMMITTED_REF" || -n "$SAME_CLASS_REF" ]] || DEFAULT_REF_OUT="$COMMITTED_REF"
REF_OUT="${REF_OUT:-$DEFAULT_REF_OUT}"
AGAINST="${AGAINST-${SAME_CLASS_REF:-$COMMITTED_REF}}"
[[ -z "$AGAINST" || ! -d "$AGAINST" || "$(realpath -m "$AGAINST")" == "$(realpath -m "$REF_OUT")" ]] && AGAINST=""
# The explicit list, by chapter family. After an id, colon-separated extras: KEY=VALUE
# tokens are launcher knobs, the rest accel arguments. Ids joined by + are one comparison (accel compare;
# ID@ARM names one arm): its arms that share a process environment run in one process per round,
# interleaved in blocks, the others in processes of their own, ABBA, ROUNDS rounds. Thread and rank sweeps
# stop at this machine's cores; Table 9.2's ranks are compared with the threads arm of the same total cores,
# in the same rounds (one comparison). ch7 runs on CPU with EfficientNet-B0 at batch 64 (the book's B7 at batch 2048 is a GPU
# workload; with no loader workers, which would compete with its arms for the 2 cores, its fp32 and bf16
# arms share a process).
# Table 9.1's thread sweep and Table 9.2's same-cores arm are one comparison, so the threads arm both tables
# read runs once a round.
ranks=2
for n in 4 8; do if [[ $n -le $cores ]]; then ranks=$n; fi; done
same_cores=$(( ranks * (cores / ranks > 1 ? cores / ranks : 1) ))
ch9="" swept=0
for t in 1 2 4 8 12 16; do
  if [[ $t -le $cores ]]; then ch9+="ch9-cpu-threads@threads=$t+"; [[ $t -eq $same_cores ]] && swept=1; fi
done
[[ $swept -eq 1 ]] || ch9+="ch9-cpu-threads@threads=$same_cores+"
ch9+="ch9-cpu-gloo@ranks=$ranks"
DEFAULT_IDS="ch2-baseline+ch2-nobias+ch2-bs128+ch2-bs256+ch2-iomp+ch2-both-layers ch3-compile-cnn-cpu
ch4-gomp-default-cnn+ch4-gomp-pinned-cnn+ch4-iomp-cnn ch6-prune
ch7-amp:--device=cpu:--model=efficientnet_b0:--batch-size=64:--num-workers=0:--variant=fp32:--variant=bf16
$ch9"
IDS="${IDS:-$DEFAULT_IDS}"
EXCLUDE="${EXCLUDE:-}"
dry=0
[[ "${1:-}" == "--dry-run" ]] && dry=1

echo "reference-timings: REF_OUT=$REF_OUT ROUNDS=$ROUNDS BLOCKS=$BLOCKS STEPS=${STEPS:-time-matched blocks}" \
  "DATA=$DATA cores=$cores PYTHON=$PYTHON" \
  "AGAINST=${AGAINST:-none}" "EXCLUDE=${EXCLUDE:-none}"
# How much each arm runs in each process: time-matched blocks, or STEPS timed steps split over them.
SIZE=(--scale bench --blocks "$BLOCKS")
[[ -z "$STEPS" ]] || SIZE+=(--steps "$STEPS")
# shellcheck source=ci/_timings.sh
source ci/_timings.sh
load_catalog
for id in $EXCLUDE; do  # a mistyped id would otherwise exclude nothing, silently
  is_in "$id" "${KNOWN[@]}" \
    || { echo "reference-timings: error: EXCLUDE names unknown experiment id $id (see accel list)" >&2; exit 2; }
done

# keep SPEC: whether SPEC's id runs (excluded, unknown and planned ids are said and left out).
keep() {
  local id="${1%%:*}"
  id="${id%%@*}"
  # shellcheck disable=SC2086  # EXCLUDE is a space-separated list
  if is_in "$id" $EXCLUDE; then
    echo "reference-timings: $id is excluded (EXCLUDE): reported as not run"; listed+=("$id"); return 1
  elif ! is_in "$id" "${KNOWN[@]}"; then
    echo "reference-timings: $id is not in the catalog (yet); it is left out of the report"; return 1
  elif ! is_in "$id" "${READY[@]}"; then
    echo "reference-timings: $id is planned, not ready: reported as not run"; listed+=("$id"); return 1
  fi
  listed+=("$id")
}

# harness_overhead [--dry-run]: the shared loop against a hand-written one, unless HARNESS_REPEATS=0.
harness_overhead() {
  local line=("$PYTHON" ci/harness-overhead.py --steps "$HARNESS_STEPS" --repeats "$HARNESS_REPEATS"
              --results-dir "$REF_OUT")
  if [[ "$HARNESS_REPEATS" == 0 ]]; then
    echo "== harness overhead: not run (HARNESS_REPEATS=0); make harness-overhead measures it"
  elif [[ "${1:-}" == --dry-run ]]; then
    echo "${line[*]}"
  else
    echo "== harness overhead"
    "${line[@]}" || failed+=("harness-overhead (exit code)")
  fi
}

run_ids=() listed=()
for spec in $IDS; do
  if [[ "$spec" == *+* && "$spec" != *:* ]]; then  # one comparison: its runnable members
    kept=()
    IFS=+ read -r -a members <<< "$spec"
    for member in "${members[@]}"; do keep "$member" && kept+=("$member"); done
    [[ ${#kept[@]} -gt 0 ]] && run_ids+=("$(IFS=+; echo "${kept[*]}")")
  elif keep "$spec"; then
    run_ids+=("$spec")
  fi
done

# Nothing to measure is a mistake, said before REF_OUT's earlier records are replaced by an empty run.
if [[ ${#run_ids[@]} -eq 0 ]]; then
  echo "reference-timings: error: nothing to run: IDS='$IDS' EXCLUDE='$EXCLUDE' leave no ready experiment; name" \
    "ids from accel list" >&2
  exit 2
fi

if [[ $dry -eq 1 ]]; then
  for spec in "${run_ids[@]}"; do
    if [[ "$spec" == *+* ]]; then
      # shellcheck disable=SC2086  # the members, one word each
      compare_argv "$REF_OUT" ${spec//+/ }
      echo "${argv[*]}"
      continue
    fi
    split_spec "$spec"
    line=("${knobs[@]}" "$PYTHON" -m pipelines launch "${spec%%:*}" "${SIZE[@]}" "${extra[@]}"
          --rounds "$ROUNDS" --data-root "$DATA" --results-dir "$REF_OUT" --no-baseline)
    echo "${line[*]}"
  done
  harness_overhead --dry-run
  exit 0
fi

ensure_data reference-timings fashion_mnist cifar10

mkdir -p "$REF_OUT"
# A fresh reference: earlier records, plots and reports in REF_OUT are replaced, not mixed in.
rm -rf "$REF_OUT/.requests"  # the workers' requests of an earlier run
find "$REF_OUT" -maxdepth 1 \( -name '*.jsonl' -o -name 'comparison--*.json' -o -name 'comparison--*.log' -o -name 'alternation--*' -o -name '*.png' -o -name 'report.*' \) \
  -delete
failed=()
for spec in "${run_ids[@]}"; do
  if [[ "$spec" == *+* ]]; then
    # shellcheck disable=SC2086  # the members, one word each
    measure_alternating "$REF_OUT" ${spec//+/ }
    continue
  fi
  split_spec "$spec"
  measure "$REF_OUT" "${spec%%:*}" "${knobs[@]}" -- "${extra[@]}"
done

harness_overhead

only="$(IFS=,; echo "${listed[*]}")"
# The verdicts as CI systems show them (report/ci.py): JUnit XML beside the report (with the reversals, when
# there is a reference to compare with), and Markdown into GitHub's step summary when the job runs there
# (else summary.md beside the report). One report, with the drift table when AGAINST is set.
summary="${GITHUB_STEP_SUMMARY:-$REF_OUT/summary.md}"
[[ -n "${GITHUB_STEP_SUMMARY:-}" ]] || rm -f "$summary"
report=(accel report --results-dir "$REF_OUT" --out "$REF_OUT" --experiments "$only" --junit "$REF_OUT/verdicts.xml"
        --markdown "$summary"
        --note "${NOTE:-bench scale, ${STEPS:+$STEPS steps in }$BLOCKS blocks x $ROUNDS rounds on $cores cores}")
if [[ -z "$AGAINST" ]]; then
  echo "== report"
  "${report[@]}"
else
  echo "== report, with the drift against $AGAINST"
  # Exit 1: a conclusive verdict reversed, or a reproduction was lost or gained (the job fails). Exit 0
  # with report.md's "Drift check skipped" line: the reference is from another machine class, the full
  # report is written without a drift table (nothing compared, nothing to reverse). Exit 2: the reference
  # cannot be read (no usable records): the report is written again without it. Neither of the last two
  # is a failure of this run: each is said in one line.
  rc=0
  "${report[@]}" --against "$AGAINST" --fail-on-reversal || rc=$?
  if [[ $rc -eq 1 ]]; then
    failed+=("drift (a conclusive verdict reversed, or a reproduction lost or gained, against $AGAINST)")
  elif [[ $rc -ne 0 ]]; then
    echo "reference-timings: no drift table: $AGAINST cannot be compared with this run (see the line above)"
    "${report[@]}"
  elif grep -q "^Drift check skipped" "$REF_OUT/report.md"; then
    echo "reference-timings: no drift table: $AGAINST is from another machine class (report.md says which)"
  else
    # --relative: each arm against the median change of all arms. Quiet VMs of this class ran the set
    # 4-33 % and 23-45 % below the committed reference on two days; that is the host (stats/diff.py).
    echo "== accel diff against $AGAINST (gate: an arm significantly slower than the machine's shift," \
      "by more than $DIFF_FAIL_ABOVE %)"
    accel diff "$AGAINST" "$REF_OUT" --fail-above "$DIFF_FAIL_ABOVE" --relative \
      || failed+=("accel diff (an arm significantly slower than $AGAINST, against the machine's shift, by more" \
                  "than $DIFF_FAIL_ABOVE %)")
  fi
fi

# No reference of this machine class: the gate checks what holds on every class instead (an arm's direction
# against its baseline where every committed reference agrees, core/report/invariants.py), and this run is
# the new class's reference, ready to commit.
if [[ -z "$SAME_CLASS_REF" ]]; then
  shopt -s nullglob
  others=()
  for ref in "$REFERENCES"/cpu-*-bench; do
    [[ "$(realpath -m "$ref")" == "$(realpath -m "$REF_OUT")" ]] || others+=("$ref")
  done
  shopt -u nullglob
  if [[ ${#others[@]} -gt 0 ]]; then
    echo "== invariants: no reference of this machine class; the directions every committed class agrees on"
    "$PYTHON" -m pipelines.core.report.invariants "$REF_OUT" "${others[@]}" \
      || failed+=("invariants (an arm's direction opposite to every committed reference's)")
  fi
  new_ref="$REFERENCES/cpu-${cores}core-${CLASS_TAG}-bench"
  if [[ "$(realpath -m "$REF_OUT")" != "$(realpath -m "$new_ref")" ]]; then
    echo "reference-timings: this machine class has no committed reference; to make this run its reference:" \
      "rm -rf $new_ref && cp -r $REF_OUT $new_ref && git add $new_ref"
  fi
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "reference-timings: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "reference-timings: done; see $REF_OUT/report.md"
