#!/usr/bin/env bash
# Python starts (and plan builds) of one make command: docs/design.md "What a command costs in processes".
# Every interpreter appends its sys.orig_argv to a log (a sitecustomize.py on PYTHONPATH); with PLANS=1 a
# profile hook also logs each call of harness/plan.py `plan` (it slows the run: count with it, time without).
# Usage: [PLANS=1] ci/process-count.sh CHECKOUT MAKE-ARGS...
#   ci/process-count.sh . ch2-nobias ARGS="--rounds 3"
#   ci/process-count.sh . cpu-ddp NPROC=4
set -euo pipefail
checkout="$(cd "$1" && pwd)"
shift
site="$(mktemp -d)" log="$(mktemp)"
trap 'rm -rf "$site" "$log"' EXIT
cat > "$site/sitecustomize.py" <<'PY'
import json, os, sys, time
with open(os.environ["ACCEL_COUNT_LOG"], "a") as out:
    out.write(json.dumps({"t": time.time(), "argv": sys.orig_argv}) + "\n")
if os.environ.get("ACCEL_COUNT_PLANS"):
    def _profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "plan" and frame.f_code.co_filename.endswith("harness/plan.py"):
            with open(os.environ["ACCEL_COUNT_LOG"], "a") as out:
                out.write(json.dumps({"plan": os.getpid()}) + "\n")
    sys.setprofile(_profile)
PY
start=$(date +%s.%N)
(cd "$checkout" && PYTHONPATH="$site" ACCEL_COUNT_LOG="$log" ACCEL_COUNT_PLANS="${PLANS:-}" make "$@" >&2)
end=$(date +%s.%N)
python3 - "$log" "$start" "$end" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
start, end = float(sys.argv[2]), float(sys.argv[3])
starts = [r for r in rows if "argv" in r]
print(f"{len(starts)} Python starts, {sum('plan' in r for r in rows)} plan builds, {end - start:.1f} s")
for r in starts:
    argv = r["argv"]
    at = argv.index("-m") if "-m" in argv else 0
    print(f"  +{r['t'] - start:6.1f} s  {' '.join(argv[at:at + 4])[:100]}")
PY
