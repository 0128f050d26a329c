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
#                                  first (python -m pipelines.core.distributed.affinity). Intel binds via KMP_AFFINITY.
#   ALLOCATOR     default | pinned | tcmalloc | jemalloc
#                                  pinned: glibc with its mmap/trim thresholds and top pad fixed through
#                                  GLIBC_TUNABLES (what bench-scale comparisons use; docs/timing.md).
#                                  tcmalloc / jemalloc: preload Debian's libtcmalloc_minimal / libjemalloc
#                                  (packages libtcmalloc-minimal4 / libjemalloc2); missing = error.
#   ALLOCATOR_PATH dir:dir...      where to look for it (default: the system library folders)
#   PYTHON        interpreter      default .venv/bin/python if present, else python3
#   IMAGE         path.sif | podman:tag | docker:tag   run inside that container (launch/_container.sh)
#   IMAGE_PREFIX  the image's Python environment (default /opt/venv), where libiomp5.so is found
#   OPENBLAS_NUM_THREADS N         numpy's OpenBLAS pool (default 1: no thread floats beside the pinned ones)
set -euo pipefail
# shellcheck source=launch/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
resolve_knobs local "$@"  # checks and exports the knobs above (pipelines/core/distributed/launchers.py)

echo_knobs OMP_RUNTIME OMP_NUM_THREADS OPENBLAS_NUM_THREADS OMP_BIND OMP_PROC_BIND OMP_SCHEDULE GOMP_CPU_AFFINITY \
  ALLOCATOR GLIBC_TUNABLES LD_PRELOAD KMP_AFFINITY KMP_BLOCKTIME IMAGE
image_command
run_launcher "${wrap[@]}" "$py" -m pipelines "$@"
