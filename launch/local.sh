#!/usr/bin/env bash
# Run one accel command in a single local process, with the runtime knobs set here and nowhere else.
#
# Usage: [KNOB=value ...] launch/local.sh ACCEL-ARGS...
#   launch/local.sh run ch2-baseline --scale bench
#   OMP_RUNTIME=intel launch/local.sh run ch2-iomp --scale bench
#
# Knobs (echoed below; the result's fingerprint records what actually loaded):
#   OMP_RUNTIME   gnu | intel      gnu: torch's bundled libgomp. intel: preload libiomp5 from the
#                                  Python environment (pip package intel-openmp); missing = error.
#   THREADS       N                OMP_NUM_THREADS (default: the cores this process may use)
#   KMP_AFFINITY  (intel only)     default granularity=fine,compact,1,0 (the book's setting)
#   KMP_BLOCKTIME (intel only)     default 0 (the book's ch2 setting)
#   OMP_BIND      none | pinned    pinned (gnu only): OMP_PROC_BIND=TRUE, OMP_SCHEDULE=STATIC and
#                                  GOMP_CPU_AFFINITY = the cores this process may use, physical cores
#                                  first (python -m pipelines.core.dist.affinity). Intel binds via KMP_AFFINITY.
#   ALLOCATOR     default | tcmalloc | jemalloc   preload Debian's libtcmalloc_minimal / libjemalloc
#                                  (packages libtcmalloc-minimal4 / libjemalloc2); missing = error.
#   ALLOCATOR_PATH dir:dir...      where to look for it (default: the system library folders)
#   PYTHON        interpreter      default .venv/bin/python if present, else python3
#   IMAGE         path.sif | podman:tag | docker:tag   run inside that container (launch/_container.sh)
#   IMAGE_PREFIX  the image's Python environment (default /opt/venv), where libiomp5.so is found
#   OPENBLAS_NUM_THREADS N         numpy's OpenBLAS pool (default 1: no thread floats beside the pinned ones)
set -euo pipefail
# shellcheck source=launch/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
need_args "usage: launch/local.sh ACCEL-ARGS... (e.g. run ch2-baseline --scale bench)" "$@"

THREADS="${THREADS:-$(threads_per_rank 1)}"  # one process: every usable core
check_positive_int THREADS "$THREADS"
OMP_RUNTIME="${OMP_RUNTIME:-gnu}"
OMP_BIND="${OMP_BIND:-none}"
ALLOCATOR="${ALLOCATOR:-default}"
export OMP_RUNTIME OMP_NUM_THREADS="$THREADS"
# numpy (imported for the statistics before torch) loads OpenBLAS, whose pool would start threads before the
# OpenMP runtime binds this process, floating over every core beside the measured ones. Training never uses
# numpy's BLAS, so its pool stays at the calling thread.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"

case "$OMP_RUNTIME" in
  gnu) ;;
  intel)
    if [[ -n "${IMAGE:-}" ]]; then
      # Inside an image the environment lives at IMAGE_PREFIX; the runner there refuses a GNU run.
      iomp="${IMAGE_PREFIX:-/opt/venv}/lib/libiomp5.so"
    else
      iomp="$(python_prefix)/lib/libiomp5.so"
      [[ -f "$iomp" ]] || die "OMP_RUNTIME=intel but $iomp does not exist; install intel-openmp into that environment (make venv does)"
    fi
    export LD_PRELOAD="$iomp${LD_PRELOAD:+:$LD_PRELOAD}"
    export KMP_AFFINITY="${KMP_AFFINITY:-granularity=fine,compact,1,0}"
    export KMP_BLOCKTIME="${KMP_BLOCKTIME:-0}"
    ;;
  *) die "OMP_RUNTIME=$OMP_RUNTIME is not gnu or intel" ;;
esac

case "$OMP_BIND" in
  none) ;;
  pinned)
    [[ "$OMP_RUNTIME" == gnu ]] || die "OMP_BIND=pinned is for OMP_RUNTIME=gnu; Intel OpenMP binds with KMP_AFFINITY"
    export OMP_PROC_BIND=TRUE OMP_SCHEDULE=STATIC
    GOMP_CPU_AFFINITY="$(physical_first_cpus "$THREADS")" || die "could not compute GOMP_CPU_AFFINITY"
    export GOMP_CPU_AFFINITY
    ;;
  *) die "OMP_BIND=$OMP_BIND is not none or pinned" ;;
esac

case "$ALLOCATOR" in
  default) ;;
  tcmalloc|jemalloc)
    lib="$(allocator_library "$ALLOCATOR")" || die "ALLOCATOR=$ALLOCATOR but its library is not installed; apt-get install $(allocator_package "$ALLOCATOR")"
    export LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}"
    ;;
  *) die "ALLOCATOR=$ALLOCATOR is not default, tcmalloc or jemalloc" ;;
esac
export OMP_BIND ALLOCATOR

echo_knobs OMP_RUNTIME OMP_NUM_THREADS OPENBLAS_NUM_THREADS OMP_BIND OMP_PROC_BIND OMP_SCHEDULE GOMP_CPU_AFFINITY ALLOCATOR \
  LD_PRELOAD KMP_AFFINITY KMP_BLOCKTIME IMAGE
image_command here
run_launcher "${wrap[@]}" "$py" -m pipelines "$@"
