#!/usr/bin/env bash
# Build-time installer shared by every Dockerfile and .def: one venv (/opt/venv) from the target's one
# lock file, then the build info that result fingerprints read (/opt/accel/build-info.json).
#
# Usage: install-env.sh TARGET LOCK WHEELHOUSE
#   WHEELHOUSE    folder of wheels; when it holds any, pip installs from it alone (--no-index: air-gapped)
#   OFFLINE       1 = the wheelhouse must be used (an empty one is an error); default 0
#   BASE_IMAGE    the base image reference, recorded; BASE_DIGEST its digest or "unresolved"
#   PIP_INDEX_URL / PIP_EXTRA_INDEX_URL   read by pip itself when no wheelhouse is given
#   /run/secrets/pip_cert   CA bundle passed as a build secret, used by pip when present
set -euo pipefail

[[ $# -eq 3 ]] || { echo "usage: install-env.sh TARGET LOCK WHEELHOUSE" >&2; exit 2; }
target="$1" lock="$2" wheelhouse="$3"
venv=/opt/venv
OFFLINE="${OFFLINE:-0}"
BASE_IMAGE="${BASE_IMAGE:-unknown}"
BASE_DIGEST="${BASE_DIGEST:-unresolved}"
[[ -f /run/secrets/pip_cert ]] && export PIP_CERT=/run/secrets/pip_cert

python3 -m venv "$venv"
hashes=(--require-hashes)
if ! grep -q -- '--hash=sha256:' "$lock"; then
  echo "install-env: $lock has no hashes (see its header); installing its exact pins without hash checks" >&2
  hashes=()
fi
if compgen -G "$wheelhouse/*.whl" >/dev/null; then
  echo "install-env: air-gapped install from $wheelhouse" >&2
  source_args=(--no-index --find-links "$wheelhouse")
elif [[ "$OFFLINE" == 1 ]]; then
  echo "install-env: OFFLINE=1 but $wheelhouse holds no wheels; run: make wheelhouse TARGET=$target" >&2
  exit 2
else
  echo "install-env: installing from ${PIP_INDEX_URL:-the default index}" >&2
  source_args=()
fi
"$venv/bin/pip" install --no-cache-dir --disable-pip-version-check --progress-bar off "${hashes[@]}" "${source_args[@]}" -r "$lock"

lock_sha256="$(sha256sum "$lock" | cut -d' ' -f1)"
mkdir -p /opt/accel
[[ "$lock" -ef /opt/accel/requirements.lock ]] || cp "$lock" /opt/accel/requirements.lock
TARGET="$target" LOCK_SHA256="$lock_sha256" BASE_IMAGE="$BASE_IMAGE" BASE_DIGEST="$BASE_DIGEST" \
  BUILT_AT="$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$venv/bin/python" - <<'PY'
import json
import os
import platform
from importlib import metadata

info = {
    "schema": "accel.image/1",
    "target": os.environ["TARGET"],
    "base_image": os.environ["BASE_IMAGE"],
    "base_digest": os.environ["BASE_DIGEST"],
    "lock_sha256": os.environ["LOCK_SHA256"],
    "python": platform.python_version(),
    "torch": metadata.version("torch"),
    "torchvision": metadata.version("torchvision"),
    "built_at": os.environ["BUILT_AT"],
}
with open("/opt/accel/build-info.json", "w") as out:
    json.dump(info, out, indent=1, sort_keys=True)
print(json.dumps(info, sort_keys=True))
PY
# `accel` runs the bind-mounted checkout's package (nothing of the code is installed in the image).
cat > "$venv/bin/accel" <<'SH'
#!/bin/sh
# accel inside the image: the checkout is bind-mounted, not installed; run it from there (or ACCEL_REPO).
if [ -n "${ACCEL_REPO:-}" ]; then cd "$ACCEL_REPO" || exit 2; fi
[ -d pipelines ] || { echo "accel: error: no checkout here; cd to the bind-mounted repository or set ACCEL_REPO" >&2; exit 2; }
exec python3 -m pipelines "$@"
SH
chmod 755 "$venv/bin/accel"
chmod a+r /opt/accel/build-info.json /opt/accel/requirements.lock && chmod -R a+rX "$venv"
