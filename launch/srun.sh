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
#   ALLOCATOR    default | pinned | tcmalloc | jemalloc for every task (launch/local.sh has the details)
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
resolve_knobs srun "$@"  # checks the knobs (and, with IMAGE, the image on every node of the allocation)

read -r -a extra <<< "${SRUN_ARGS:-}"
image_command  # the host's srun starts one container per task, on the allocation's nodes
preflight "$NTASKS" 0 elsewhere "$@"
echo_knobs NTASKS NODES MASTER_ADDR MASTER_PORT OMP_NUM_THREADS ALLOCATOR GLIBC_TUNABLES SRUN_ARGS \
  GLOO_SOCKET_IFNAME IMAGE
[[ -n "${ACCEL_PRINT:-}" ]] || echo "launch: any rendezvous waits at most $TIMEOUT_S s (-o timeout_s)" >&2
args=(--ntasks "$NTASKS" --nodes "$NODES" --kill-on-bad-exit=1 --wait="$(( ${TIMEOUT_S%.*} + 1 ))" --export=ALL
      "${extra[@]}")
run_launcher srun "${args[@]}" "${wrap[@]}" "$py" -m pipelines "$@"
