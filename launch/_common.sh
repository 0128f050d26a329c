#!/usr/bin/env bash
# Helpers shared by the launch scripts and launch/_container.sh (sourced, not run). Sourcing sets `here`
# (launch/) and `repo` (the checkout). Each helper is small and has one job.

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"

die() { echo "launch: error: $*" >&2; exit 2; }

# Refuse a call without accel arguments: need_args "USAGE" "$@".
need_args() { [[ $# -gt 1 ]] || die "$1"; }

# The interpreter to run: PYTHON, else the repo's venv, else python3 (inside containers).
python_bin() {
  if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"
  elif [[ -x "${repo:?}/.venv/bin/python" && -z "${IMAGE:-}" ]]; then echo "$repo/.venv/bin/python"
  else echo python3
  fi
}

python_prefix() { "$(python_bin)" -c 'import sys; print(sys.prefix)'; }

check_positive_int() {
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1=$2 is not a positive integer"
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

# Refuse an IMAGE that cannot start (unknown scheme, missing .sif; where the containers start on this
# host, also a missing engine or local image) before any launcher starts: mpirun and srun would
# otherwise fail once per rank. check_image [here|elsewhere] (elsewhere: the ranks start on other nodes).
# A program on PATH that can run (bash's `command -v` also names a file that is there but not executable).
installed() { local path; path="$(command -v "$1")" && [[ -x "$path" ]]; }

check_image() {
  local where="${1:-here}"
  [[ -z "${ACCEL_PRINT:-}" ]] || where=elsewhere  # printing a command line: the image need not be here
  case "$IMAGE" in
    podman:*|docker:*)
      local engine="${IMAGE%%:*}" tag="${IMAGE#*:}"
      [[ -n "$tag" ]] || die "IMAGE=$IMAGE names no image; use $engine:TAG (e.g. $engine:accel-cpu:local from make image TARGET=cpu)"
      [[ "$where" == here ]] || return 0
      installed "$engine" || die "IMAGE=$IMAGE but $engine is not installed on $(hostname); install it there or use another IMAGE scheme"
      "$engine" image inspect "$tag" >/dev/null 2>&1 \
        || die "IMAGE=$IMAGE: $engine has no image $tag on $(hostname); build it there (make image TARGET=<target> IMAGE_TAG=$tag) or pull it first" ;;
    *.sif)
      [[ -f "$IMAGE" ]] || die "IMAGE=$IMAGE does not exist; build it with: make sif TARGET=cpu (or make sif-from-image TARGET=cpu)"
      [[ "$where" == here ]] || return 0
      installed "${APPTAINER:-apptainer}" \
        || die "IMAGE=$IMAGE needs apptainer, which is not installed on $(hostname); install Apptainer there or use IMAGE=podman:TAG" ;;
    *) die "IMAGE=$IMAGE: unknown scheme; use path/to/image.sif, podman:TAG or docker:TAG" ;;
  esac
}

# With IMAGE (checked first: check_image here|elsewhere): sets `wrap` to the words that run a command
# inside it (launch/_container.sh) and `py` to the image's python3. Without: `wrap` is empty and `py` is
# python_bin. Where "${wrap[@]}" stands says the model: before a launcher = the launcher in one container
# (torchrun); after mpirun/srun's own options = one container per rank, the host's launcher outermost.
# shellcheck disable=SC2034  # wrap and py are read by the launchers that source this file
image_command() {
  wrap=() py="$(python_bin)"
  [[ -n "${IMAGE:-}" ]] || return 0
  check_image "${1:-here}"
  [[ -x "$repo/launch/_container.sh" ]] || die "IMAGE=$IMAGE needs launch/_container.sh, which is missing"
  wrap=("$repo/launch/_container.sh") py=python3
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
  local -a check=("${wrap[@]}" "$py")
  [[ -n "${IMAGE:-}" && -x "$repo/.venv/bin/python" ]] && check=("$repo/.venv/bin/python") where=elsewhere
  local capabilities=--capabilities
  [[ "$where" == here ]] || capabilities=--no-capabilities
  out="$(cd "$repo" && "${check[@]}" -m pipelines preflight --world-size "$world" --rank "$rank" \
         "$capabilities" "$@")" || exit $?
  read -r TIMEOUT_S RUN_RESULTS <<< "${out##*$'\n'}"
}

# Refuse more processes than 4 per usable core of this host (NPROC=400 would swamp it): check_ranks_here NAME N.
check_ranks_here() {
  local cores
  cores="$(nproc)"
  (( $2 <= 4 * cores )) || die "$1=$2 is more than 4 processes per usable core ($cores here); use at most $((4 * cores))"
}

# Run a command line (python, torchrun, mpirun, srun) from the checkout, echoed first. With ACCEL_PRINT=1
# (`accel launch ID --print`) print it instead, shell-quoted, and start nothing; a command that starts
# with the container wrapper is handed to it, which prints the engine's full command line.
run_launcher() {
  cd "$repo" || die "cannot enter $repo"
  if [[ -n "${ACCEL_PRINT:-}" ]]; then
    [[ "$1" == "$repo/launch/_container.sh" ]] && exec "$@"
    { [[ ${#shown_knobs[@]} -eq 0 ]] || printf '%q ' "${shown_knobs[@]}"; printf '%q ' "$@"; } | sed 's/ $//'
    echo
    exit 0
  fi
  echo "+ $*" >&2
  exec "$@"
}

# GOMP_CPU_AFFINITY for N threads: the usable cpus, one per physical core first (pipelines/core/dist/affinity.py).
physical_first_cpus() { (cd "${repo:?}" && "$(python_bin)" -m pipelines.core.dist.affinity gomp "$1"); }

# Debian package and shared object of a preloadable allocator (tcmalloc | jemalloc).
allocator_package() {
  case "$1" in tcmalloc) echo libtcmalloc-minimal4 ;; jemalloc) echo libjemalloc2 ;; esac
}
allocator_library() {
  local name dir
  case "$1" in tcmalloc) name=libtcmalloc_minimal.so.4 ;; jemalloc) name=libjemalloc.so.2 ;; *) return 1 ;; esac
  local -a dirs
  IFS=: read -r -a dirs <<< "${ALLOCATOR_PATH:-/usr/lib/$(uname -m)-linux-gnu:/usr/lib64:/usr/lib:/usr/local/lib}"
  for dir in "${dirs[@]}"; do
    [[ -f "$dir/$name" ]] && { echo "$dir/$name"; return 0; }
  done
  return 1
}

# --- distributed launchers (torchrun.sh, mpirun.sh, srun.sh, slurm.sbatch) ---

check_port() {
  if ! [[ "$2" =~ ^[0-9]+$ ]] || (( $2 < 1 || $2 > 65535 )); then die "$1=$2 is not a TCP port (1-65535)"; fi
}

# Refuse a rendezvous port that something on this host already listens on (exit 2, names the port).
check_port_free() {
  local addr="$1" port="$2"
  "$(python_bin)" - "$addr" "$port" <<'PY' || die "MASTER_PORT=$port is already in use on $addr; pick another (e.g. MASTER_PORT=$((port + 1)))"
import socket, sys
addr, port = sys.argv[1], int(sys.argv[2])
with socket.socket() as s:
    try:
        s.bind(("" if addr in ("localhost", "127.0.0.1", "0.0.0.0") else addr, port))
    except OSError:
        sys.exit(1)
PY
}

# A free TCP port on this host (for the default rendezvous port).
free_port() {
  "$(python_bin)" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# Threads per rank for N ranks on this node: the smallest core slice of the per-rank policy
# (pipelines/core/dist/affinity.py rank_cores; the usable cores / N, at least 1).
threads_per_rank() { (cd "${repo:?}" && "$(python_bin)" -m pipelines.core.dist.affinity threads-per-rank "$1"); }
