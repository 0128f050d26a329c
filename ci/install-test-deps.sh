#!/usr/bin/env bash
# Debian packages the test suite uses for real (not mocked). Installs only what is missing.
set -euo pipefail

needed=()
command -v shellcheck >/dev/null || needed+=(shellcheck)
# Container tests: a real Podman build (runc runtime) from a debootstrap'd Debian base.
command -v podman >/dev/null || needed+=(podman)
command -v runc >/dev/null || needed+=(runc)
command -v debootstrap >/dev/null || needed+=(debootstrap)

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
