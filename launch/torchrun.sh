#!/usr/bin/env bash
# Start one accel command as NPROC processes per node under torchrun (chapters 8-10, the talk's DDP/FSDP).
# The accel arguments are checked first (launch/_common.sh preflight): a mistake is one line, nothing starts.
# torchrun's agent runs in pipelines/core/distributed/agent.py: every rendezvous wait is bounded by the run's
# -o timeout_s (default 120), the ranks' output is tee'd to the terminal and to a log folder under the
# results folder (torchrun-<time>-node<N>-<pid>/, kept only when the run fails), and a failure ends in one
# `accel: error:` line naming the failed rank, its exit code or signal and that folder.
#
# Usage: [KNOB=value ...] launch/torchrun.sh ACCEL-ARGS...
#   NPROC=4 launch/torchrun.sh run ch9-cpu-gloo --variant ranks=4
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 GLOO_SOCKET_IFNAME=eth1 launch/torchrun.sh run ch8-ddp-template
#
# Knobs (echoed below; dist.py records each rank's cores, threads and host):
#   NPROC        processes on this node (default 2; at most 4 per usable core)
#   NNODES       nodes taking part (default 1); MIN:MAX: elastic (RDZV=c10d), a run that loses a node goes
#                on with fewer, resuming with -o checkpoint_any_world=true (then no verdict)
#   NODE_RANK    this node's index (default 0)
#   MASTER_ADDR  rendezvous host (default 127.0.0.1)  MASTER_PORT rendezvous port (default: a free one
#                when NNODES=1, else 29500; node 0 refuses a port already in use)
#   RDZV         static | c10d (default static)       RDZV_ID     c10d run id (default accel)
#   LOCAL_ADDR   this node's address as the other nodes reach it (default: MASTER_ADDR on node 0 of
#                several, else torchrun's hostname lookup, which is wrong on multi-homed hosts)
#   MAX_RESTARTS torchrun restarts of the whole worker group after a failure (default 0)
#   THREADS      OMP_NUM_THREADS per rank (default: usable cores / NPROC, at least 1)
#   ALLOCATOR    default | pinned | tcmalloc | jemalloc for every rank (launch/local.sh has the details)
#   GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, NCCL_DEBUG   passed through when set
#   PYTHON       interpreter (default .venv/bin/python, else python3)
#   IMAGE        path.sif | podman:tag | docker:tag   run torchrun inside that container
set -euo pipefail
# shellcheck source=launch/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
resolve_knobs torchrun "$@"  # checks the knobs above, sets their defaults (pipelines/core/distributed/launchers.py)

rendezvous=(--node-rank "$NODE_RANK" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT")
if [[ "$RDZV" == c10d ]]; then
  # node 0 hosts the rendezvous store (torchrun's own guess misses addresses not tied to the hostname)
  rendezvous=(--node-rank "$NODE_RANK"  # names this node in a failure's line; c10d assigns the ranks
              --rdzv-backend c10d --rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv-id "$RDZV_ID"
              --rdzv-conf "is_host=$(( NODE_RANK == 0 ? 1 : 0 ))")  # its waits: the agent adds timeouts
  [[ -z "$LOCAL_ADDR" ]] || rendezvous+=(--local-addr "$LOCAL_ADDR")
fi
image_command  # with IMAGE, torchrun runs inside one container and starts the ranks there
preflight $((NPROC * ${NNODES##*:})) $((NODE_RANK * NPROC)) here "$@"  # MIN:MAX (elastic): planned for MAX
echo_knobs NPROC NNODES NODE_RANK MASTER_ADDR MASTER_PORT RDZV LOCAL_ADDR MAX_RESTARTS OMP_NUM_THREADS ALLOCATOR \
  GLIBC_TUNABLES GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME NCCL_DEBUG IMAGE
[[ -n "${ACCEL_PRINT:-}" ]] || echo "launch: any rendezvous waits at most $TIMEOUT_S s (-o timeout_s)" >&2
log_dir="$RUN_RESULTS/torchrun-$(date -u +%Y%m%dT%H%M%SZ)-node$NODE_RANK-$$"
probe=()  # a node that does not host the rendezvous first proves the host answers, within TIMEOUT_S
[[ "$NODE_RANK" -eq 0 ]] || probe=(--probe "$MASTER_ADDR:$MASTER_PORT")
run_launcher "${wrap[@]}" "$py" -m pipelines.core.distributed.agent --timeout-s "$TIMEOUT_S" --log-dir "$log_dir" \
  "${probe[@]}" -- --nnodes "$NNODES" --nproc-per-node "$NPROC" "${rendezvous[@]}" \
  --max-restarts "$MAX_RESTARTS" -m pipelines "$@"
