#!/usr/bin/env bash
# A local stand-in for the pinned public Debian base (debian:bookworm-*-slim): a debootstrap'd bookworm
# minbase imported into Podman, so container builds are tested without a registry. Same distro and the
# same Debian python3.11 the real base gets from apt. Cached as a tarball between runs on one machine.
#
# Usage: ci/debootstrap-base.sh [IMAGE]       prints the image reference it made (or found)
#   IMAGE        default localhost/accel-base:bookworm-minbase
#   CACHE        default /var/cache/accel (the tarball lives here)
#   MIRROR       default: the first Debian mirror apt uses here, else http://deb.debian.org/debian
set -euo pipefail

IMAGE="${1:-localhost/accel-base:bookworm-minbase}"
CACHE="${CACHE:-/var/cache/accel}"
tarball="$CACHE/bookworm-minbase.tar"

command -v podman >/dev/null || { echo "debootstrap-base: podman is not installed (ci/install-test-deps.sh)" >&2; exit 2; }
if podman image exists "$IMAGE"; then echo "$IMAGE"; exit 0; fi

if [[ ! -s "$tarball" ]]; then
  command -v debootstrap >/dev/null || { echo "debootstrap-base: debootstrap is not installed (ci/install-test-deps.sh)" >&2; exit 2; }
  MIRROR="${MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)}"
  MIRROR="${MIRROR:-http://deb.debian.org/debian}"
  mkdir -p "$CACHE"
  root="$(mktemp -d "$CACHE/rootfs.XXXXXX")"
  trap 'rm -rf "$root"' EXIT
  echo "debootstrap-base: debootstrap --variant=minbase bookworm from $MIRROR (about 2 minutes)" >&2
  debootstrap --variant=minbase bookworm "$root" "$MIRROR" >&2
  tar -C "$root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi
podman import --change 'CMD ["/bin/bash"]' "$tarball" "$IMAGE" >&2
echo "$IMAGE"
