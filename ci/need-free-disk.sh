#!/usr/bin/env bash
# Usage: ci/need-free-disk.sh GIB PATH WHAT
# Refuses, in one line and before any byte is written, a step that needs GIB GiB free on PATH's file system.
# Why: pip, venv and image builds that run out of disk stop half-way with "[Errno 28] No space left on
# device" and a half-built folder; the PyPI stack is large (a CUDA build of torch even on a CPU-only
# machine: .venv about 6.5 GB, .venv-ipex about 7 GB, an image about 7 GB), so say so first.
# ACCEL_SKIP_DISK_CHECK=1 skips the check (a file system whose free count lies, e.g. some network mounts).
set -euo pipefail
if [[ $# -ne 3 || ! "${1:-}" =~ ^[0-9]+$ ]]; then
  echo "usage: ci/need-free-disk.sh GIB PATH WHAT (GIB a whole number of GiB; got: $*)" >&2
  exit 2
fi
need_gib="$1" path="$2" what="$3"
[[ "${ACCEL_SKIP_DISK_CHECK:-0}" == 1 ]] && exit 0
probe="$path"
while [[ ! -d "$probe" ]]; do probe="$(dirname "$probe")"; done
free_kib="$(df -Pk "$probe" | awk 'NR == 2 {print $4}')"
need_kib=$((need_gib * 1024 * 1024))
if ((free_kib < need_kib)); then
  echo "$what needs about $need_gib GiB free in $probe, which has $((free_kib / 1024 / 1024)) GiB" \
    "($((free_kib / 1024)) MiB) free; free some space there (old clones, podman image prune), or put it" \
    "on a larger disk (VENV=... and IPEX_VENV=... name the folders), or set ACCEL_SKIP_DISK_CHECK=1" >&2
  exit 2
fi
