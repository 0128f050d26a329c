#!/usr/bin/env bash
# Helpers shared by the launch scripts and launch/_container.sh (sourced, not run). Sourcing sets `here`
# (launch/) and `repo` (the checkout). Each helper is small and has one job.

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")" checked=""

# The launcher's knobs, checked and completed in Python (pipelines/core/distributed/launchers.py and the knobs,
# hosts and containers modules beside it: where launch refusals live): shell assignments on success; a bad
# knob ends the script with its one `launch: error:` line and exit 2. resolve_knobs LAUNCHER ACCEL-ARGS...
# Under `accel launch` that Python already ran: it resolved the knobs and preflighted the run in its own
# process (pipelines/core/harness/launch.py prepare) and hands the assignments over in ACCEL_CHECKED_KNOBS, with
# TIMEOUT_S and RUN_RESULTS; they are used as they are, and `preflight` below has nothing left to do.
# (Unset after use: the processes this script starts, such as the container wrapper, check their own.)
resolve_knobs() {
  [[ -z "${ACCEL_CHECKED_KNOBS:-}" ]] || { eval "$ACCEL_CHECKED_KNOBS"; unset ACCEL_CHECKED_KNOBS; checked=1; return; }
  local out; out="$(cd "$repo" && "$(python_bin)" -m pipelines.core.distributed.launchers "$@")" || exit $?
  eval "$out"
}

# The interpreter to run: PYTHON, else the repo's venv, else python3 (inside containers).
python_bin() {
  if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"
  elif [[ -x "${repo:?}/.venv/bin/python" && -z "${IMAGE:-}" ]]; then echo "$repo/.venv/bin/python"
  else echo python3
  fi
}

shown_knobs=()  # what echo_knobs named: the assignments a printed command line starts with
echo_knobs() {
  local name
  for name in "$@"; do
    [[ -n "${!name:-}" ]] || continue
    [[ -n "${ACCEL_PRINT:-}" ]] || echo "launch: $name=${!name}" >&2
    shown_knobs+=("$name=${!name}")
  done
  return 0
}

# With IMAGE (checked by resolve_knobs): sets `wrap` to the words that run a command
# inside it (launch/_container.sh) and `py` to the image's python3. Without: `wrap` is empty and `py` is
# python_bin. Where "${wrap[@]}" stands says the model: before a launcher = the launcher in one container
# (torchrun); after mpirun/srun's own options = one container per rank, the host's launcher outermost.
# shellcheck disable=SC2034  # wrap and py are read by the launchers that source this file
image_command() {
  wrap=() py="$(python_bin)"
  [[ -z "${IMAGE:-}" ]] || wrap=("$repo/launch/_container.sh") py=python3
}

# Check the accel arguments as every rank will, before torchrun, mpirun or srun starts: a user mistake
# (unknown id, bad option, missing data, unwritable results) is one line and exit 2 (3: cannot run here),
# instead of one line per rank and the launcher's traceback. Sets TIMEOUT_S (the run's -o timeout_s: how
# long any rendezvous may wait) and RUN_RESULTS (its results folder).
#   preflight WORLD_SIZE FIRST_RANK here|elsewhere ACCEL-ARGS...
# `here`: the ranks run on this host with this host's software, so what it cannot do (no GPU, no backend)
# is refused too. With IMAGE the check runs in the checkout's .venv when there is one (the image's
# libraries are for the ranks to judge), else inside the image (call image_command first).
# shellcheck disable=SC2034  # TIMEOUT_S and RUN_RESULTS are read by the launchers that source this file
preflight() {
  local world="$1" rank="$2" where="$3" out
  shift 3
  [[ -z "$checked" ]] || return 0  # `accel launch` preflighted the run (resolve_knobs)
  local -a check=("${wrap[@]}" "$py")
  [[ -n "${IMAGE:-}" && -x "$repo/.venv/bin/python" ]] && check=("$repo/.venv/bin/python") where=elsewhere
  local capabilities=--capabilities
  [[ "$where" == here ]] || capabilities=--no-capabilities
  out="$(cd "$repo" && "${check[@]}" -m pipelines preflight --world-size "$world" --rank "$rank" \
         "$capabilities" "$@")" || exit $?
  read -r TIMEOUT_S RUN_RESULTS <<< "${out##*$'\n'}"
}

# Run a command line (python, torchrun, mpirun, srun) from the checkout, echoed first. With ACCEL_PRINT=1
# (`accel launch ID --print`) print it instead, shell-quoted, and start nothing; a command that starts
# with the container wrapper is handed to it, which prints the engine's full command line.
run_launcher() {
  cd "$repo" || exit
  if [[ -n "${ACCEL_PRINT:-}" ]]; then
    [[ "$1" == "$repo/launch/_container.sh" ]] && exec "$@"
    { [[ ${#shown_knobs[@]} -eq 0 ]] || printf '%q ' "${shown_knobs[@]}"; printf '%q ' "$@"; } | sed 's/ $//'
    echo
    exit 0
  fi
  echo "+ $*" >&2
  exec "$@"
}
