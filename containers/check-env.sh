#!/usr/bin/env bash
# Image self-test (the final Dockerfile step and every .def's %test): the environment is consistent,
# torch and torchvision import, and the parallel backend is what the build info says; absent parts and
# the GPU state are reported (a CUDA build on a machine without a GPU reports "no GPU visible").
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
for name, why in info.get("absent", {}).items():
    print(f"absent: {name}: {why}")
# A CUDA build on a machine without a GPU or driver says so and goes on: the driver comes from the host.
if torch.cuda.is_available():
    print("GPUs:", ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())))
else:
    print("no GPU visible" + (" (CUDA build: the host's driver comes in with --nv / CDI)" if torch.version.cuda else ""))
print(torch.__config__.parallel_info())
PY
