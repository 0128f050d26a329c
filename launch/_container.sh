#!/usr/bin/env bash
# Run one command inside the container named by IMAGE. The launchers put it in front of their command
# (launch/_common.sh image_command): around torchrun or the single process, and around each rank under the
# host's mpirun/srun. The image holds the environment; the checkout is mounted read-only at its host path,
# data read-only, results writable, and the launcher's knobs are passed through (they are recorded inside).
#
# Usage: IMAGE=... launch/_container.sh COMMAND [ARGS...]
#        IMAGE=... launch/_container.sh --check     only the checks below, silent when they pass (a
#                                                   launcher's pre-flight on every host: runtime, image)
# The image must carry the project's build info (label accel.build-info, /opt/accel/build-info.json, made
# by containers/build.sh): another image is refused, since results would not say what ran.
#   IMAGE           path/to/x.sif     apptainer exec --cleanenv (--nv when GPUs exist)
#                   podman:TAG        podman run --rm --ipc=host
#                   docker:TAG        docker run --rm --ipc=host
#   GPUS            auto | yes | no   auto: pass GPUs through when nvidia-smi lists one (default auto)
#   DATA_DIR        host data folder, read-only (default: the --data-root argument, else REPO/data)
#   RESULTS_DIR     host results folder, writable (default: the --results-dir argument, else REPO/results)
#   CONTAINER_ARGS  extra words for `run`/`exec`; e.g. rootful Podman without CAP_SYS_RESOURCE needs
#                   '--runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096'
#   CONTAINER_USER  uid:gid in Docker/Podman (default: the caller's, so results belong to the caller)
#   SHM_SIZE        e.g. 16g: use --shm-size instead of --ipc=host
#   NETWORK         Docker/Podman network (default host: rendezvous ports and hostnames as on the host)
# Passed in: every variable named by a prefix in pipelines/core/record/knobs.txt (what the fingerprint records).
set -euo pipefail
# shellcheck source=launch/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

check_only=0
if [[ "${1:-}" == --check ]]; then check_only=1; shift; set -- true; fi
need_args "usage: IMAGE=x.sif|podman:TAG|docker:TAG launch/_container.sh COMMAND [ARGS...] | --check" "$@"
[[ -n "${IMAGE:-}" ]] || die "IMAGE is empty; set IMAGE=path.sif, podman:TAG or docker:TAG"
check_image
GPUS="${GPUS:-auto}"
NETWORK="${NETWORK:-host}"

# Knobs that cross into the container: knobs.txt lines without a second word or with `pass`.
knob_file="$repo/pipelines/core/record/knobs.txt"
[[ -f "$knob_file" ]] || die "$knob_file is missing; it lists the variables that cross into the container"
mapfile -t PASS_PREFIXES < <(sed 's/#.*//' "$knob_file" | awk 'NF == 1 || $2 == "pass" {print $1}')
knobs() {
  local name prefix
  while IFS= read -r name; do
    [[ "$name" != ACCEL_PRINT ]] || continue  # accel launch --print's own switch, never the run's
    for prefix in "${PASS_PREFIXES[@]}"; do
      [[ "$name" == "$prefix"* ]] && { echo "$name"; break; }
    done
  done < <(compgen -e | sort)
}

# The value of --NAME in the accel arguments (either `--NAME V` or `--NAME=V`), or nothing.
arg_value() {
  local want="$1"; shift
  while [[ $# -gt 0 ]]; do
    case "$1" in
      "$want") echo "${2:-}"; return ;;
      "$want"=*) echo "${1#*=}"; return ;;
    esac
    shift
  done
}

# Relative paths are relative to the checkout (the launchers run there); mounts need absolute ones.
absolute() { if [[ "$1" == /* ]]; then echo "$1"; else echo "$repo/$1"; fi; }

# An image of this project says where its build info is (label accel.build-info); refuse any other.
need_build_info() {
  [[ -z "${ACCEL_PRINT:-}" ]] || return 0  # printing the command line: the image need not exist yet
  [[ "$1" == /* ]] || die "IMAGE=$IMAGE has no accel build info (label accel.build-info); it was not built from containers/: make image TARGET=<target> (or make sif TARGET=<target>)"
}

gpus_present() { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }

want_gpus=0
case "$GPUS" in
  auto) gpus_present && want_gpus=1 ;;
  yes) gpus_present || die "GPUS=yes but no NVIDIA GPU is visible here (nvidia-smi -L lists none); run on a GPU node or set GPUS=auto" ; want_gpus=1 ;;
  no) ;;
  *) die "GPUS=$GPUS is not auto, yes or no" ;;
esac
if [[ "$(arg_value --device "$@")" == cuda* && $want_gpus -eq 0 ]]; then
  die "--device $(arg_value --device "$@") but no GPU is passed into the container (GPUS=$GPUS, nvidia-smi -L lists none); run on a GPU node or use --device cpu"
fi

data="$(absolute "${DATA_DIR:-$(arg_value --data-root "$@")}")"
[[ -n "${DATA_DIR:-}$(arg_value --data-root "$@")" ]] || data="$repo/data"
results="$(absolute "${RESULTS_DIR:-$(arg_value --results-dir "$@")}")"
[[ -n "${RESULTS_DIR:-}$(arg_value --results-dir "$@")" ]] || results="$repo/results"
data_mount=()

# shellcheck disable=SC2206  # CONTAINER_ARGS is a user-supplied list of words
extra=(${CONTAINER_ARGS:-})

case "$IMAGE" in
  podman:*|docker:*)
    engine="${IMAGE%%:*}" tag="${IMAGE#*:}"
    need_build_info "$("$engine" image inspect --format '{{index .Config.Labels "accel.build-info"}}' "$tag" 2>/dev/null)"
    [[ -d "$data" ]] && data_mount=(-v "$data:$data:ro")
    cmd=("$engine" run --rm --network "$NETWORK" -v "$repo:$repo:ro" "${data_mount[@]}" -v "$results:$results:rw"
      -w "$repo" --user "${CONTAINER_USER:-$(id -u):$(id -g)}" -e HOME=/tmp -e PYTHONDONTWRITEBYTECODE=1)
    if [[ -n "${SHM_SIZE:-}" ]]; then cmd+=(--shm-size "$SHM_SIZE"); else cmd+=(--ipc=host); fi
    if [[ $want_gpus -eq 1 ]]; then
      if [[ "$engine" == docker ]]; then cmd+=(--gpus all); else cmd+=(--device nvidia.com/gpu=all); fi
    fi
    while IFS= read -r name; do cmd+=(-e "$name=${!name}"); done < <(knobs)
    cmd+=("${extra[@]}" "$tag" "$@")
    ;;
  *.sif)
    APPTAINER="${APPTAINER:-apptainer}"
    need_build_info "$("$APPTAINER" inspect --labels "$IMAGE" 2>/dev/null | sed -n 's/^accel.build-info: *//p')"
    [[ -d "$data" ]] && data_mount=(--bind "$data:$data:ro")
    # --cleanenv drops the host environment; APPTAINERENV_NAME=value still crosses (commas are safe here,
    # unlike --env, and KMP_AFFINITY has commas).
    cmd=(env)
    while IFS= read -r name; do cmd+=("APPTAINERENV_$name=${!name}"); done < <(knobs)
    cmd+=("$APPTAINER" exec --cleanenv --bind "$repo:$repo:ro" "${data_mount[@]}" --bind "$results:$results:rw"
      --pwd "$repo")
    [[ $want_gpus -eq 1 ]] && cmd+=(--nv)
    cmd+=("${extra[@]}" "$IMAGE" "$@")
    ;;
esac

[[ $check_only -eq 0 ]] || exit 0  # silent when all is well
if [[ -n "${ACCEL_PRINT:-}" ]]; then  # accel launch --print: the command line, nothing started or written
  printf '%q ' "${cmd[@]}" | sed 's/ $//'
  echo
  exit 0
fi
mkdir -p "$results" || die "cannot create the results folder $results"  # after the checks: nothing written on error
echo "+ $(printf '%q ' "${cmd[@]}")" >&2
exec "${cmd[@]}"
