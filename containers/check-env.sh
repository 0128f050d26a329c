#!/usr/bin/env bash
# Image self-test (the final Dockerfile step and every .def's %test): the environment is consistent,
# torch and torchvision import, and the parallel backend is what the build info says.
# Usage: check-env.sh [EXTRA_MODULE ...]   e.g. check-env.sh intel_extension_for_pytorch
set -euo pipefail

python3 -m pip check
python3 - "$@" <<'PY'
import importlib
import json
import sys

import torch
import torchvision

info = json.load(open("/opt/accel/build-info.json"))
assert info["torch"] == torch.__version__.split("+")[0] or info["torch"] == torch.__version__, info
for name in sys.argv[1:]:
    importlib.import_module(name)
print("build info:", json.dumps(info, sort_keys=True))
print("torch", torch.__version__, "torchvision", torchvision.__version__, "cuda", torch.version.cuda)
print(torch.__config__.parallel_info())
PY
