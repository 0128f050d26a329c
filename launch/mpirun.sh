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
#   MASTER_PORT  rendezvous port (default 29500; refused if in use on this host when it is the master)
#   THREADS      OMP_NUM_THREADS per rank (default: usable cores / ranks on this host, at least 1)
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
need_args "usage: launch/mpirun.sh ACCEL-ARGS... (e.g. run ch8-ddp-template --scale smoke)" "$@"
command -v mpirun >/dev/null || die "mpirun not found; install Open MPI (Debian: openmpi-bin) or use the mpi image"

NP="${NP:-2}"
HOSTS="${HOSTS:-}"
MAP_BY="${MAP_BY:-slot}"
BIND_TO="${BIND_TO:-none}"
MASTER_PORT="${MASTER_PORT:-29500}"
check_positive_int NP "$NP"
check_port MASTER_PORT "$MASTER_PORT"
case "$MAP_BY" in slot|node|core|socket) ;; *) die "MAP_BY=$MAP_BY is not slot, node, core or socket" ;; esac
case "$BIND_TO" in none|core|socket) ;; *) die "BIND_TO=$BIND_TO is not none, core or socket" ;; esac

hosts=()
local_ranks="$NP"
if [[ -n "$HOSTS" ]]; then
  [[ "$HOSTS" =~ ^[A-Za-z0-9._-]+(:[1-9][0-9]*)?(,[A-Za-z0-9._-]+(:[1-9][0-9]*)?)*$ ]] \
    || die "HOSTS=$HOSTS is not host[:slots][,host[:slots]...] (e.g. node1:8,node2:8)"
  IFS=, read -r -a entries <<< "$HOSTS"
  for entry in "${entries[@]}"; do
    name="${entry%%:*}"
    [[ "$name" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || getent hosts "$name" >/dev/null \
      || die "HOSTS=$HOSTS: host $name does not resolve"
  done
  first="${entries[0]%%:*}"
  if [[ "$first" =~ ^[0-9.]+$ ]]; then MASTER_ADDR="${MASTER_ADDR:-$first}"; fi
  MASTER_ADDR="${MASTER_ADDR:-$(getent hosts "$first" | awk '{print $1; exit}')}"
  [[ "${entries[0]}" == *:* ]] && local_ranks="${entries[0]##*:}"
  hosts=(--host "$HOSTS")
fi
MASTER_ADDR="${MASTER_ADDR:-127.0.0.1}"
if ip -o addr show 2>/dev/null | grep -qw "inet ${MASTER_ADDR}" || [[ "$MASTER_ADDR" =~ ^(127\.|localhost$) ]]; then
  check_port_free "$MASTER_ADDR" "$MASTER_PORT"
fi
[[ -n "$HOSTS" ]] || check_ranks_here NP "$NP"
THREADS="${THREADS:-$(threads_per_rank "$local_ranks")}"
check_positive_int THREADS "$THREADS"
export MASTER_ADDR MASTER_PORT OMP_NUM_THREADS="$THREADS"
where=here  # the ranks (and their containers) start on this host
[[ -z "$HOSTS" ]] || where=elsewhere
image_command "$where"  # the host's mpirun starts one container per rank
preflight "$NP" 0 "$where" "$@"

common=(-wdir "$repo" -x MASTER_ADDR -x MASTER_PORT -x OMP_NUM_THREADS -x PATH)
# With IMAGE each rank runs launch/_container.sh, which reads these (remote ranks see only what -x sends).
for name in GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME NCCL_DEBUG LD_PRELOAD PYTHONPATH IMAGE IMAGE_PREFIX GPUS \
    DATA_DIR RESULTS_DIR CONTAINER_ARGS CONTAINER_USER SHM_SIZE NETWORK APPTAINER; do
  [[ -n "${!name:-}" ]] && common+=(-x "$name")
done
[[ -n "${RSH_AGENT:-}" ]] && common+=(--mca plm_rsh_agent "$RSH_AGENT")
common+=(--mca orte_startup_timeout "$(( ${TIMEOUT_S%.*} + 1 ))")  # whole seconds, at least the run's wait
[[ $(id -u) -eq 0 ]] && common+=(--allow-run-as-root)
# Loopback-only runs keep Open MPI's own wire-up off other interfaces.
[[ -z "$HOSTS" ]] && common+=(--mca btl "self,vader" --mca oob_tcp_if_include lo)

# With IMAGE across HOSTS: `_container.sh --check` once per host, started by mpirun itself, so a host without
# the container runtime or the image fails here, in one line naming it, before any rank starts.
check_image_on_hosts() {
  local names=() entry out line rank
  for entry in "${entries[@]}"; do names+=("${entry%%:*}"); done
  local one_each
  one_each="$(IFS=,; echo "${names[*]/%/:1}")"
  if out="$(mpirun -np "${#names[@]}" --host "$one_each" --map-by node --tag-output "${common[@]}" \
      "$repo/launch/_container.sh" --check 2>&1)"; then
    return 0
  fi
  line="$(grep -m1 -o '^\[[0-9]*,[0-9]*\]<std...>:launch: error: .*' <<< "$out" || true)"
  [[ -n "$line" ]] || die "IMAGE=$IMAGE: the pre-flight mpirun across HOSTS=$HOSTS failed ($(tail -n 1 <<< "$out")); check that every host is reachable (RSH_AGENT, ssh)"
  [[ "$line" =~ ^\[[0-9]+,([0-9]+)\] ]] && rank="${BASH_REMATCH[1]}"
  die "host ${names[${rank:-0}]}: ${line#*launch: error: }"
}

echo_knobs NP HOSTS MAP_BY BIND_TO MASTER_ADDR MASTER_PORT OMP_NUM_THREADS RSH_AGENT GLOO_SOCKET_IFNAME \
  NCCL_SOCKET_IFNAME NCCL_DEBUG IMAGE
if [[ -n "${IMAGE:-}" ]]; then  # the image's build info, on this host or on every host of HOSTS
  if [[ -z "$HOSTS" ]]; then "$repo/launch/_container.sh" --check; else check_image_on_hosts; fi
fi
[[ -n "${ACCEL_PRINT:-}" ]] || echo "launch: any rendezvous waits at most $TIMEOUT_S s (-o timeout_s)" >&2
run_launcher mpirun -np "$NP" "${hosts[@]}" --map-by "$MAP_BY" --bind-to "$BIND_TO" "${common[@]}" \
  "${wrap[@]}" "$py" -m pipelines "$@"
