#!/usr/bin/env bash
# Start one accel command as NP processes under Open MPI's mpirun (chapter 11; any backend).
#
# Usage: [KNOB=value ...] launch/mpirun.sh ACCEL-ARGS...
#   NP=2 launch/mpirun.sh run ch8-ddp-template -o backend=gloo --scale smoke
#   NP=16 HOSTS=machine1:8,machine2:8 MASTER_ADDR=machine1 launch/mpirun.sh run ch11-multinode-mpi-nccl
#
# Knobs (echoed below):
#   NP           total processes (default 2; on this host alone, at most 4 per usable core)
#   HOSTS        host:slots,host:slots (default: this host only; inside SLURM, mpirun asks SLURM)
#   MAP_BY       slot | node | core | socket (default slot)    BIND_TO  none | core | socket (default none:
#                dist.py gives each rank a disjoint core range itself)
#   MASTER_ADDR  rendezvous host (default: the first of HOSTS, else 127.0.0.1)
#   MASTER_PORT  rendezvous port (default: a free one when every rank is here, else 29500; refused if in use
#                on this host when it is the master)
#   THREADS      OMP_NUM_THREADS per rank (default: usable cores / ranks on this host, at least 1)
#   ALLOCATOR    default | pinned | tcmalloc | jemalloc for every rank (launch/local.sh has the details)
#   RSH_AGENT    Open MPI's remote agent (plm_rsh_agent), e.g. ssh or a wrapper script
#   GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, NCCL_DEBUG   exported to every rank (-x) when set
#   PYTHON       interpreter (default .venv/bin/python, else python3)
#   IMAGE        path.sif | podman:tag | docker:tag   each rank runs inside that container
# Running as root (CI containers) adds --allow-run-as-root, which Open MPI otherwise refuses.
# The accel arguments are checked before mpirun starts (launch/_common.sh preflight); Open MPI's wire-up
# waits at most the run's -o timeout_s (orte_startup_timeout), as does every rank's rendezvous.
set -euo pipefail
# shellcheck source=launch/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
resolve_knobs mpirun "$@"  # checks the knobs (hosts resolve, port free, IMAGE on every host) and sets RANKS_AT

hosts=()
[[ -z "$HOSTS" ]] || hosts=(--host "$HOSTS")
image_command  # the host's mpirun starts one container per rank
preflight "$NP" 0 "$RANKS_AT" "$@"
common=(-wdir "$repo" -x MASTER_ADDR -x MASTER_PORT -x OMP_NUM_THREADS -x PATH)
# With IMAGE each rank runs launch/_container.sh, which reads these (remote ranks see only what -x sends).
for name in GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME NCCL_DEBUG LD_PRELOAD GLIBC_TUNABLES ALLOCATOR PYTHONPATH IMAGE \
    IMAGE_PREFIX GPUS DATA_DIR RESULTS_DIR CONTAINER_ARGS CONTAINER_USER SHM_SIZE NETWORK APPTAINER; do
  [[ -n "${!name:-}" ]] && common+=(-x "$name")
done
[[ -n "${RSH_AGENT:-}" ]] && common+=(--mca plm_rsh_agent "$RSH_AGENT")
common+=(--mca orte_startup_timeout "$(( ${TIMEOUT_S%.*} + 1 ))")  # whole seconds, at least the run's wait
[[ $(id -u) -eq 0 ]] && common+=(--allow-run-as-root)
# Loopback-only runs keep Open MPI's own wire-up off other interfaces.
[[ -z "$HOSTS" ]] && common+=(--mca btl "self,vader" --mca oob_tcp_if_include lo)
echo_knobs NP HOSTS MAP_BY BIND_TO MASTER_ADDR MASTER_PORT OMP_NUM_THREADS ALLOCATOR GLIBC_TUNABLES RSH_AGENT \
  GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME NCCL_DEBUG IMAGE
[[ -n "${ACCEL_PRINT:-}" ]] || echo "launch: any rendezvous waits at most $TIMEOUT_S s (-o timeout_s)" >&2
run_launcher mpirun -np "$NP" "${hosts[@]}" --map-by "$MAP_BY" --bind-to "$BIND_TO" "${common[@]}" \
  "${wrap[@]}" "$py" -m pipelines "$@"
