#!/usr/bin/env bash
# Build step of the images that carry the ccl backend (the `cpu-intel` target; containers/recipe.py), after
# install-python.sh made /opt/venv from a lock that holds oneCCL's wheels (oneccl-cpu, oneccl-cpu-devel,
# impi-rt) and setuptools: compiles accel's own binding (backends/ccl, staged into the build context as
# sources/ccl by containers/build.sh) against the image's torch and installs it. The compiler and Python
# headers are installed for this step and removed in it, so the image carries no compiler.
#
# Usage: install-ccl.sh SOURCE_DIR
set -euo pipefail

venv=/opt/venv build_deps=(g++ python3-dev)
die() { echo "install-ccl: $*" >&2; exit 2; }

[[ $# -eq 1 ]] || die "usage: install-ccl.sh SOURCE_DIR"
[[ -f "$1/setup.py" ]] || die "no $1/setup.py: the backend's source was not staged; build through containers/build.sh"
[[ -x "$venv/bin/python" ]] || die "no $venv; run install-python.sh first"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${build_deps[@]}"
work="$(mktemp -d)"
cp -r "$1/." "$work/"  # the source may be a read-only bind mount; the build writes beside it
"$venv/bin/pip" install --no-cache-dir --disable-pip-version-check --no-index --no-build-isolation --no-deps "$work"
rm -rf "$work"
apt-get purge -y --auto-remove "${build_deps[@]}"
apt-get clean  # the downloaded .debs too (a base without Debian's docker-clean hook keeps them)
rm -rf /var/lib/apt/lists/*
# The binding loads in the image as built (libccl through its $ORIGIN rpath, no LD_LIBRARY_PATH).
"$venv/bin/python" -c 'import accel_ccl; print("install-ccl: accel_ccl on oneCCL", accel_ccl.ONECCL_VERSION)'
