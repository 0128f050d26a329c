"""Build of accel_ccl, torch.distributed's "ccl" backend on oneCCL (csrc/ccl_backend.cpp), at install time.

`make venv` runs `pip install --no-build-isolation --no-deps backends/ccl` after the oneCCL wheels
(pyproject.toml's `ccl` group: oneccl-cpu, oneccl-cpu-devel for the headers, impi-rt for libfabric) are in
the environment: torch.utils.cpp_extension compiles against that environment's torch (its own C++ standard:
C++17 for torch 2.8, C++20 for 2.14) and links libccl with an rpath, so no LD_LIBRARY_PATH is needed: first
relative to the extension (<prefix>/lib/pythonX.Y/site-packages/accel_ccl/ -> <prefix>/lib, so a venv that
is moved or copied into an image keeps working), then the prefix it was built against.
ONECCL_ROOT names another prefix holding include/oneapi/ccl.hpp and lib/libccl.so.1 (a cluster's oneAPI).
Each environment builds in a folder of its own (build/<venv>-torch-<version>).
"""

import os
import sys
from pathlib import Path

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

prefix = Path(os.environ.get("ONECCL_ROOT") or sys.prefix)
include, lib = prefix / "include", prefix / "lib"
for needed, package in ((include / "oneapi" / "ccl.hpp", "oneccl-cpu-devel"), (lib / "libccl.so.1", "oneccl-cpu")):
    if not needed.exists():
        sys.exit(f"accel_ccl: {needed} is missing; pip install {package} (pyproject.toml's ccl group) into this "
                 "environment, or set ONECCL_ROOT to a prefix that has it")

setup(
    name="accel-ccl",
    version="1.0.0",
    description="oneCCL as torch.distributed's ccl backend on CPU (accel's own, against oneCCL's C++ API)",
    packages=["accel_ccl"],
    ext_modules=[CppExtension(name="accel_ccl._C", sources=["csrc/ccl_backend.cpp"], include_dirs=[str(include)],
                              library_dirs=[str(lib)], libraries=["ccl"], extra_compile_args=["-O2", "-g0"],
                              extra_link_args=[f"-Wl,-rpath,$ORIGIN/../../..:{lib}"])],
    cmdclass={"build_ext": BuildExtension},
    # one build folder per environment (interpreter prefix and torch): the host venv (torch 2.14) and .venv-ipex
    # (torch 2.8) build from this one source folder, and setuptools reuses an object file that is newer than
    # its source, so a shared build/ would link one torch's objects into the other's extension
    options={"build": {"build_base": f"build/{Path(sys.prefix).name.lstrip('.')}-torch-{torch.__version__}"}},
)
