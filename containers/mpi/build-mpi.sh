#!/usr/bin/env bash
# Build UCX, PMIx and Open MPI into /opt/mpi (the `mpi` image's build stage; Dockerfile and .def alike).
# For the hybrid model (host mpirun -> apptainer exec per rank) the container's Open MPI and PMIx must
# match the host's: set the versions to the cluster's (`ompi_info`, `pmix_info` on the host).
#
# Usage: build-mpi.sh          (as root, in the builder image)
#   OMPI_VERSION, PMIX_VERSION, UCX_VERSION   release versions (exact; never a branch)
#   OMPI_SHA256, PMIX_SHA256, UCX_SHA256      the release tarballs' sha256 (from the release pages);
#                                             checked when given, reported as unverified when not
#   PREFIX                                    default /opt/mpi
set -euo pipefail

OMPI_VERSION="${OMPI_VERSION:?set OMPI_VERSION}" PMIX_VERSION="${PMIX_VERSION:?set PMIX_VERSION}"
UCX_VERSION="${UCX_VERSION:?set UCX_VERSION}" PREFIX="${PREFIX:-/opt/mpi}"
jobs="$(nproc)"
work="$(mktemp -d)"
cd "$work"

fetch() {  # fetch URL SHA256
  local file="${1##*/}"
  curl -fsSL --retry 3 -o "$file" "$1"
  if [[ -n "$2" ]]; then
    echo "$2  $file" | sha256sum -c -
  else
    echo "build-mpi: $file unverified (no sha256 given): $(sha256sum "$file")" >&2
  fi
  tar -xf "$file"
}

fetch "https://github.com/openucx/ucx/releases/download/v$UCX_VERSION/ucx-$UCX_VERSION.tar.gz" "${UCX_SHA256:-}"
(cd "ucx-$UCX_VERSION" && ./contrib/configure-release --prefix="$PREFIX" --with-cuda=/usr/local/cuda \
  && make -j"$jobs" && make install)

fetch "https://github.com/openpmix/openpmix/releases/download/v$PMIX_VERSION/pmix-$PMIX_VERSION.tar.bz2" "${PMIX_SHA256:-}"
(cd "pmix-$PMIX_VERSION" && ./configure --prefix="$PREFIX" --with-hwloc=/usr --with-libevent=/usr \
  && make -j"$jobs" && make install)

fetch "https://download.open-mpi.org/release/open-mpi/v${OMPI_VERSION%.*}/openmpi-$OMPI_VERSION.tar.bz2" "${OMPI_SHA256:-}"
(cd "openmpi-$OMPI_VERSION" && ./configure --prefix="$PREFIX" --with-pmix="$PREFIX" --with-ucx="$PREFIX" \
  --with-cuda=/usr/local/cuda --with-hwloc=/usr --with-libevent=/usr --with-slurm \
  && make -j"$jobs" && make install)

cat > "$PREFIX/versions.txt" <<TXT
openmpi $OMPI_VERSION
pmix $PMIX_VERSION
ucx $UCX_VERSION
TXT
cd / && rm -rf "$work"
