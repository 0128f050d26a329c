#!/usr/bin/env bash
# Start one accel command as NTASKS SLURM tasks with srun (inside an allocation, or asking for one).
#
# Usage: [KNOB=value ...] launch/srun.sh ACCEL-ARGS...
#   NTASKS=2 launch/srun.sh run ch8-ddp-template --scale smoke
#   sbatch launch/slurm.sbatch run ch8-ddp-template      (the batch script calls this one)
#
# Knobs (echoed below):
#   NTASKS       tasks in total (default: SLURM_NTASKS of the allocation, else 2)
#   NODES        nodes (default: SLURM_JOB_NUM_NODES, else 1)
#   MASTER_ADDR  rendezvous host (default: the first node of the allocation, from scontrol show hostnames)
#   MASTER_PORT  rendezvous port (default 29500)
#   THREADS      OMP_NUM_THREADS per task (default: usable cores / tasks per node, at least 1)
#   SRUN_ARGS    extra srun arguments (e.g. "--partition debug")
#   GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, NCCL_DEBUG   exported to every task when set
#   PYTHON       interpreter (default .venv/bin/python, else python3)
#   IMAGE        path.sif | podman:tag | docker:tag   each task runs inside that container
# --kill-on-bad-exit: one failed task ends the step, so the others never wait for it; --wait: a task
# still running the run's -o timeout_s after another ended is stopped (they end together otherwise).
# The accel arguments are checked before srun starts (launch/_common.sh preflight).
set -euo pipefail
# shellcheck source=launch/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
repo="${ACCEL_REPO:-$repo}"  # sbatch runs a spooled copy of slurm.sbatch; the job names the checkout
need_args "usage: launch/srun.sh ACCEL-ARGS... (e.g. run ch8-ddp-template --scale smoke)" "$@"
command -v srun >/dev/null || die "srun not found; run on a SLURM cluster (Debian: slurm-wlm) or use torchrun.sh"

NTASKS="${NTASKS:-${SLURM_NTASKS:-2}}"
NODES="${NODES:-${SLURM_JOB_NUM_NODES:-1}}"
MASTER_PORT="${MASTER_PORT:-29500}"
check_positive_int NTASKS "$NTASKS"
check_positive_int NODES "$NODES"
check_port MASTER_PORT "$MASTER_PORT"
if [[ -z "${MASTER_ADDR:-}" ]]; then
  if [[ -n "${SLURM_JOB_NODELIST:-}" ]]; then
    MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
  else
    MASTER_ADDR="$(hostname)"
  fi
fi
[[ -n "$MASTER_ADDR" ]] || die "could not find the first node of the allocation; set MASTER_ADDR"
per_node=$(( (NTASKS + NODES - 1) / NODES ))
THREADS="${THREADS:-$(threads_per_rank "$per_node")}"
check_positive_int THREADS "$THREADS"
export MASTER_ADDR MASTER_PORT OMP_NUM_THREADS="$THREADS"
for name in GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME NCCL_DEBUG; do
  [[ -n "${!name:-}" ]] && export "${name?}"
done
read -r -a extra <<< "${SRUN_ARGS:-}"
image_command elsewhere  # the host's srun starts one container per task, on the allocation's nodes
preflight "$NTASKS" 0 elsewhere "$@"

echo_knobs NTASKS NODES MASTER_ADDR MASTER_PORT OMP_NUM_THREADS SRUN_ARGS GLOO_SOCKET_IFNAME IMAGE
if [[ -n "${IMAGE:-}" ]]; then
  if [[ -n "${SLURM_JOB_ID:-}" ]]; then
    # Inside the allocation: `_container.sh --check` once per node, so a node without the container runtime
    # or the image fails here in one line naming it, before any task starts.
    if ! out="$(srun --nodes "$NODES" --ntasks "$NODES" --ntasks-per-node 1 --export=ALL "${extra[@]}" \
        "$repo/launch/_container.sh" --check 2>&1)"; then
      line="$(grep -m1 -o 'launch: error: .*' <<< "$out" || echo "launch: error: IMAGE=$IMAGE: the pre-flight srun failed ($(tail -n 1 <<< "$out"))")"
      die "${line#launch: error: }"
    fi
  else
    "$repo/launch/_container.sh" --check  # no allocation yet: this host (its own one-line error, exit 2)
  fi
fi
[[ -n "${ACCEL_PRINT:-}" ]] || echo "launch: any rendezvous waits at most $TIMEOUT_S s (-o timeout_s)" >&2
args=(--ntasks "$NTASKS" --nodes "$NODES" --kill-on-bad-exit=1 --wait="$(( ${TIMEOUT_S%.*} + 1 ))" --export=ALL
      "${extra[@]}")
run_launcher srun "${args[@]}" "${wrap[@]}" "$py" -m pipelines "$@"
