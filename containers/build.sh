#!/usr/bin/env bash
# Container builds for one target (make image/sif/sif-from-image/wheelhouse/lock/image-digests/recipes
# call this).
#
# Usage: containers/build.sh image|sif|sif-from-image|wheelhouse|lock TARGET
#        containers/build.sh digests
#        containers/build.sh recipes [--check]   every target's Dockerfile and .def from containers/recipe.py
# Knobs:
#   ENGINE         podman | docker    default: whichever exists and answers `info` (podman first)
#   IMAGE_TAG      default accel-TARGET:local (the local OCI image `image` builds, `sif-from-image` reads)
#   BASE_IMAGE     override the Dockerfile's pinned base (e.g. a local debootstrap'd image, which is then
#                  pinned by its own digest)
#   OFFLINE        1 = install only from containers/wheelhouse/LOCK (air-gapped); default 0
#   PIP_INDEX_URL  package index for non-air-gapped builds and `lock` (default: PyPI)
#   PIP_EXTRA_INDEX_URL  a second index (e.g. PyPI beside torch's CPU index)
#   PIP_CERT_FILE  CA bundle passed as the build secret pip_cert (default /etc/ssl/certs/ca-certificates.crt)
#   BUILD_ARGS     extra arguments for the engine's build command
#   PYTHON         interpreter whose pip downloads the wheelhouse and that runs the recipe (with hpccm;
#                  default .venv/bin/python, else python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TARGETS=(cpu cpu-intel cuda mpi)
die() { echo "containers: error: $*" >&2; exit 2; }

# Every image is Debian bookworm: its python3.11 and glibc 2.36 are what the locks are resolved for.
PY_VERSION=3.11 PY_PLATFORM=x86_64-manylinux_2_36

# The lock (containers/locks/NAME.lock) a target installs: cpu, cuda and mpi share one environment.
lock_of() { case "$1" in cpu-intel) echo ipex ;; *) echo torch ;; esac; }

check_target() {
  local t
  for t in "${TARGETS[@]}"; do [[ "$1" == "$t" ]] && return 0; done
  die "TARGET=$1 is not one of: ${TARGETS[*]} (e.g. make image TARGET=cpu)"
}

# The default base: the Dockerfile's `ARG BASE_IMAGE=` (every .def's From: matches it).
default_base() { sed -n 's/^ARG BASE_IMAGE=//p' "$here/Dockerfile" | head -1; }

# The digest of a base reference: recorded in containers/base-digests.txt (make image-digests), else the
# local image's own when the engine holds one (a debootstrap'd base), else "unresolved".
base_digest() {
  local ref="${1%@*}" found engine="${2:-}"
  [[ "$1" == *@sha256:* ]] && { echo "${1#*@}"; return; }
  found="$(awk -v ref="$ref" '$1 == ref {print $2}' "$here/base-digests.txt" 2>/dev/null | head -1)"
  if [[ "$found" != sha256:* && -n "$engine" ]]; then
    found="$("$engine" image inspect --format '{{.Digest}}' "$ref" 2>/dev/null || true)"
  fi
  [[ "$found" == sha256:* ]] && echo "$found" || echo unresolved
}

pick_engine() {
  local e
  if [[ -n "${ENGINE:-}" ]]; then
    command -v "$ENGINE" >/dev/null || die "ENGINE=$ENGINE is not installed; install podman or docker"
    echo "$ENGINE"; return
  fi
  for e in podman docker; do
    if command -v "$e" >/dev/null && "$e" info >/dev/null 2>&1; then echo "$e"; return; fi
  done
  die "neither podman nor docker works here (install podman, or start the docker daemon)"
}

# The interpreter for pip downloads and the recipe: PYTHON, else the repo's venv, else python3.
python_bin() {
  if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"
  elif [[ -x "$here/../.venv/bin/python" ]]; then echo "$here/../.venv/bin/python"
  else echo python3
  fi
}

# Sources an image compiles that live outside the build context (containers/): backends/ccl, which the
# cpu-intel image builds against its own torch (install-ccl.sh). Copied afresh for every build, without
# the host's build outputs, into containers/sources/ (never committed).
stage_sources() {
  local src="$here/../backends/ccl" dest="$here/sources/ccl"
  [[ -f "$src/setup.py" ]] || die "no $src/setup.py: build the images from a full checkout (the ccl backend's source)"
  rm -rf "$dest" && mkdir -p "$dest"
  tar -C "$src" --exclude=build --exclude='*.so' --exclude='*.egg-info' --exclude=__pycache__ -cf - . | tar -C "$dest" -xf -
}

need_apptainer() {
  command -v apptainer >/dev/null || die "apptainer is not installed; install it (https://apptainer.org) or build the OCI image with: make image TARGET=$1"
}

cmd_image() {
  local target="$1" engine base digest tag secret=()
  engine="$(pick_engine)"
  base="${BASE_IMAGE:-$(default_base "$target")}"
  digest="$(base_digest "$base" "$engine")"
  base="${base%@*}"
  tag="${IMAGE_TAG:-accel-$target:local}"
  mkdir -p "$here/wheelhouse/$(lock_of "$target")"
  stage_sources
  cert="${PIP_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}"
  [[ -f "$cert" ]] && secret=(--secret "id=pip_cert,src=$cert")
  local from="$base"
  [[ "$digest" != unresolved ]] && from="$base@$digest"
  # Podman writes OCI images by default; docker format is what `docker build` makes (and keeps SHELL).
  local format=()
  [[ "$engine" == podman ]] && format=(--format docker)
  # One Dockerfile, one stage per target (FROM the shared env-LOCK stage of its Python environment).
  local cmd=("$engine" build "${format[@]}" --network host -f "$here/Dockerfile" --target "$target" -t "$tag"
    --build-arg "BASE_IMAGE=$from" --build-arg "BASE_DIGEST=$digest" --build-arg "OFFLINE=${OFFLINE:-0}"
    "${secret[@]}")
  [[ -n "${PIP_INDEX_URL:-}" ]] && cmd+=(--build-arg "PIP_INDEX_URL=$PIP_INDEX_URL")
  [[ -n "${PIP_EXTRA_INDEX_URL:-}" ]] && cmd+=(--build-arg "PIP_EXTRA_INDEX_URL=$PIP_EXTRA_INDEX_URL")
  # shellcheck disable=SC2206  # BUILD_ARGS is a user-supplied list of words
  cmd+=(${BUILD_ARGS:-} "$here")
  echo "+ ${cmd[*]}" >&2
  SECONDS=0
  "${cmd[@]}"
  echo "containers: built $tag in ${SECONDS} s, $("$engine" image inspect --format '{{.Size}}' "$tag" | numfmt --to=si)B" >&2
}

cmd_sif() {
  local target="$1"
  need_apptainer "$target"
  mkdir -p "$here/wheelhouse/$(lock_of "$target")"
  stage_sources
  local cmd=(apptainer build --build-arg "BASE_DIGEST=$(base_digest "$(default_base "$target")")")
  [[ -n "${PIP_INDEX_URL:-}" ]] && cmd+=(--build-arg "PIP_INDEX_URL=$PIP_INDEX_URL")
  [[ "${OFFLINE:-0}" == 1 ]] && cmd+=(--build-arg "OFFLINE=1")
  cmd+=("$target.sif" "$target/$target.def")
  echo "+ (cd $here && ${cmd[*]})" >&2
  cd "$here" && "${cmd[@]}"
}

cmd_sif_from_image() {
  local target="$1" tag engine archive
  need_apptainer "$target"
  engine="$(pick_engine)"
  tag="${IMAGE_TAG:-accel-$target:local}"
  "$engine" image exists "$tag" 2>/dev/null || "$engine" image inspect "$tag" >/dev/null 2>&1 \
    || die "no local image $tag; build it first: make image TARGET=$target"
  archive="$here/accel-$target.tar"
  echo "+ $engine save -o $archive $tag && apptainer build $here/$target.sif docker-archive:$archive" >&2
  "$engine" save -o "$archive" "$tag"
  apptainer build "$here/$target.sif" "docker-archive:$archive"
}

cmd_wheelhouse() {
  local target="$1" py dest
  py="$(python_bin)"
  dest="$here/wheelhouse/$(lock_of "$target")"
  mkdir -p "$dest"
  stage_sources  # what an air-gapped build copies over with containers/
  # Every manylinux tag up to the base image's glibc (pip does not expand --platform by itself).
  local glibc platforms=() v
  glibc="${PY_PLATFORM##*_}"
  for ((v = glibc; v >= 5; v--)); do platforms+=(--platform "manylinux_2_${v}_x86_64"); done
  local cmd=("$py" -m pip download --dest "$dest" --require-hashes --no-deps --only-binary=:all:
    --implementation cp --python-version "$PY_VERSION" "${platforms[@]}"
    --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64
    --platform linux_x86_64 -r "$here/locks/$(lock_of "$target").lock")
  echo "+ ${cmd[*]}" >&2
  "${cmd[@]}"
  du -sh "$dest" >&2
}

cmd_lock() {
  local target="$1" uv="${UV:-uv}" lock
  command -v "$uv" >/dev/null || die "uv is not installed; pip install uv==0.13.8 (or set UV=/path/to/uv)"
  lock="$(lock_of "$target")"
  # Relative paths from containers/, so the lock's "via" lines do not depend on where it was made.
  local cmd=("$uv" pip compile "locks/$lock.in" --generate-hashes --custom-compile-command "make lock TARGET=$target"
    --python-version "$PY_VERSION" --python-platform "$PY_PLATFORM" -o "locks/$lock.lock"
    --index-url "${PIP_INDEX_URL:-https://pypi.org/simple}")
  local url
  for url in ${PIP_EXTRA_INDEX_URL:-}; do cmd+=(--extra-index-url "$url" --index-strategy unsafe-best-match); done
  echo "+ (cd $here && ${cmd[*]})" >&2
  cd "$here" && "${cmd[@]}"
}

# Write (or with --check, compare) every target's Dockerfile and .def from the one hpccm recipe.
cmd_recipes() {
  local py
  py="$(python_bin)"
  "$py" -c 'import hpccm' 2>/dev/null || die "hpccm is not installed for $py; pip install hpccm==26.5.0 (make venv does)"
  echo "+ $py $here/recipe.py $*" >&2
  "$py" "$here/recipe.py" "$@"
}

# Resolve every pinned base tag to its digest where a registry answers; never invent one.
cmd_digests() {
  local out="$here/base-digests.txt" ref digest refs
  refs="$(sed -n 's/^ARG BASE_IMAGE=//p' "$here/Dockerfile" | sed 's/@sha256:.*//' | sort -u)"
  {
    echo "# base image -> digest (make image-digests); 'unresolved' = no registry answered where it ran"
    for ref in $refs; do
      digest=""
      if command -v skopeo >/dev/null; then
        digest="$(skopeo inspect --format '{{.Digest}}' "docker://$ref" 2>/dev/null || true)"
      fi
      if [[ -z "$digest" ]] && command -v docker >/dev/null; then
        digest="$(docker buildx imagetools inspect --format '{{json .Manifest.Digest}}' "$ref" 2>/dev/null | tr -d '"' || true)"
      fi
      [[ "$digest" == sha256:* ]] || digest=unresolved
      echo "$ref $digest"
    done
  } > "$out.tmp"
  mv "$out.tmp" "$out"
  cat "$out"
  cmd_recipes  # a resolved digest pins every FROM and From: (base@sha256:...)
}

[[ $# -ge 1 ]] || die "usage: containers/build.sh image|sif|sif-from-image|wheelhouse|lock TARGET | digests | recipes [--check]"
action="$1"; shift
if [[ "$action" == digests ]]; then cmd_digests; exit; fi
if [[ "$action" == recipes ]]; then cmd_recipes "$@"; exit; fi
[[ $# -eq 1 && -n "$1" ]] || die "$action needs a TARGET (one of: ${TARGETS[*]}), e.g. make $action TARGET=cpu"
check_target "$1"
case "$action" in
  image) cmd_image "$1" ;;
  sif) cmd_sif "$1" ;;
  sif-from-image) cmd_sif_from_image "$1" ;;
  wheelhouse) cmd_wheelhouse "$1" ;;
  lock) cmd_lock "$1" ;;
  *) die "unknown action $action (image, sif, sif-from-image, wheelhouse, lock, digests, recipes)" ;;
esac
