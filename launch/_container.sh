#!/usr/bin/env bash
# Run one command inside the container named by IMAGE. The launchers put it in front of their command
# (launch/_common.sh image_command): around torchrun or the single process, and around each rank under the
# host's mpirun/srun. The image holds the environment; the checkout is mounted read-only at its host path,
# data read-only, results and checkpoints writable, and the launcher's knobs are passed through (they are
# recorded inside).
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
#   TMPDIR          where the engine's first stderr lines wait to be explained if it refuses the start (/tmp)
# Passed in: every variable named by a prefix in pipelines/core/record/knobs.txt (what the fingerprint records).
set -euo pipefail
# shellcheck source=launch/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
# Checks IMAGE, GPUS and --device, and sets WANT_GPUS, DATA, RESULTS, CHECKPOINTS (the -o checkpoint_dir
# argument, mounted writable), PASS_NAMES (the knobs that cross in), NETWORK and APPTAINER
# (pipelines/core/distributed/containers.py); --check stops after the checks, silently.
resolve_knobs container "$@"
[[ "${1:-}" != --check ]] || exit 0
# shellcheck disable=SC2206  # CONTAINER_ARGS and PASS_NAMES are lists of words
extra=(${CONTAINER_ARGS:-}) names=($PASS_NAMES) data_mount=() ckpt_mount=()
case "$IMAGE" in
  podman:*|docker:*)
    engine="${IMAGE%%:*}" tag="${IMAGE#*:}"
    [[ -d "$DATA" ]] && data_mount=(-v "$DATA:$DATA:ro")
    [[ -n "$CHECKPOINTS" ]] && ckpt_mount=(-v "$CHECKPOINTS:$CHECKPOINTS:rw")
    cmd=("$engine" run --rm --network "$NETWORK" -v "$repo:$repo:ro" "${data_mount[@]}" "${ckpt_mount[@]}"
      -v "$RESULTS:$RESULTS:rw"
      -w "$repo" --user "${CONTAINER_USER:-$(id -u):$(id -g)}" -e HOME=/tmp -e PYTHONDONTWRITEBYTECODE=1)
    if [[ -n "${SHM_SIZE:-}" ]]; then cmd+=(--shm-size "$SHM_SIZE"); else cmd+=(--ipc=host); fi
    if [[ $WANT_GPUS -eq 1 ]]; then
      if [[ "$engine" == docker ]]; then cmd+=(--gpus all); else cmd+=(--device nvidia.com/gpu=all); fi
    fi
    for name in "${names[@]}"; do cmd+=(-e "$name=${!name}"); done
    cmd+=("${extra[@]}" "$tag" "$@") ;;
  *.sif)
    [[ -d "$DATA" ]] && data_mount=(--bind "$DATA:$DATA:ro")
    [[ -n "$CHECKPOINTS" ]] && ckpt_mount=(--bind "$CHECKPOINTS:$CHECKPOINTS:rw")
    # --cleanenv drops the host environment; APPTAINERENV_NAME=value still crosses (commas are safe here,
    # unlike --env, and KMP_AFFINITY has commas).
    cmd=(env)
    for name in "${names[@]}"; do cmd+=("APPTAINERENV_$name=${!name}"); done
    cmd+=("$APPTAINER" exec --cleanenv --bind "$repo:$repo:ro" "${data_mount[@]}" "${ckpt_mount[@]}"
      --bind "$RESULTS:$RESULTS:rw" --pwd "$repo")
    [[ $WANT_GPUS -eq 1 ]] && cmd+=(--nv)
    cmd+=("${extra[@]}" "$IMAGE" "$@") ;;
esac
if [[ -n "${ACCEL_PRINT:-}" ]]; then  # accel launch --print: the command line, nothing started or written
  printf '%q ' "${cmd[@]}" | sed 's/ $//'
  echo
  exit 0
fi
echo "+ $(printf '%q ' "${cmd[@]}")" >&2
if [[ "$IMAGE" == *.sif ]]; then exec "${cmd[@]}"; fi
# Docker/Podman: the engine runs as a child, so that a start it refuses (exit 125-127, before the command
# inside ran) ends in one `launch: error:` line naming the knob that fixes it (containers.py start_failure
# reads the engine's first 64 KiB of stderr, which still reach the terminal). TERM/INT/HUP are passed on, and
# USR1 (SLURM's warning before a time limit: the ranks checkpoint and stop for a requeue).
start_log="$(mktemp "${TMPDIR:-/tmp}/accel-container.XXXXXX")"
trap 'rm -f "$start_log"' EXIT
# The tee ignores the signals passed on (a launcher may signal the whole process group: srun does): it ends
# when the engine's stderr does, so the ranks' last lines, written as they stop, still arrive.
"${cmd[@]}" 2> >(trap '' TERM INT HUP USR1; exec tee >(head -c 65536 >"$start_log") >&2) &
engine_pid=$! status=0
# shellcheck disable=SC2064  # expanded now on purpose: this engine's pid and the signal's name
for signal in TERM INT HUP USR1; do trap "kill -$signal $engine_pid 2>/dev/null" "$signal"; done
while :; do  # a trapped signal interrupts `wait`: wait again until the engine has ended
  wait "$engine_pid" && status=0 || status=$?
  kill -0 "$engine_pid" 2>/dev/null || break
done
if ((status >= 125 && status <= 127)); then
  sleep 0.2  # the tee may still be writing the engine's last line
  "$(python_bin)" -m pipelines.core.distributed.launchers start-failure "$engine" "$status" "$start_log" || true
fi
exit "$status"
