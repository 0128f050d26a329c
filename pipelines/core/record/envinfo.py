"""Environment fingerprint: what actually ran, read from the process. It records; it never mutates.

The OpenMP runtime is read from the loaded libraries (the one that provides `GOMP_parallel`, which
libtorch calls), not from what a launcher asked for, so a record proves which runtime ran.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import sys
from importlib import metadata, resources
from pathlib import Path
from typing import Any, Mapping

import torch

from pipelines.core.record.version import git_commit

# Variables that change how the run behaves; every one that is set is recorded. The prefixes live in
# knobs.txt beside this module, which launch/_container.sh also reads (what crosses into a container).
KNOBS_FILE = "knobs.txt"


def knob_prefixes(reader: str, text: str | None = None) -> tuple[str, ...]:
    """The knobs.txt prefixes for one reader, "record" (this fingerprint) or "pass" (the container hook):
    every line without a second word, plus the lines whose second word names that reader."""
    if text is None:
        text = resources.files(__package__).joinpath(KNOBS_FILE).read_text()
    out = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if words and (len(words) == 1 or words[1] == reader):
            out.append(words[0])
    return tuple(out)


RECORDED_PREFIXES = knob_prefixes("record")
NOT_RECORDED = ("ACCEL_CHECKED_KNOBS",)  # what `accel launch` hands its launcher script: checked knobs, not one
PACKAGES = ("torch", "torchvision", "intel-openmp", "intel-extension-for-pytorch", "oneccl-bind-pt", "accel-ccl",
            "oneccl-cpu", "impi-rt", "lightning", "numpy", "click")
IMAGE_INFO_PATHS = ("/opt/accel/build-info.json",)


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def symbol_library(symbol: str) -> str | None:
    """Path of the shared object that provides `symbol` in this process (dladdr), or None."""
    process = ctypes.CDLL(None)
    try:
        address = ctypes.cast(getattr(process, symbol), ctypes.c_void_p).value
    except AttributeError:
        return None
    info = _DlInfo()
    if not process.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        return None
    return info.dli_fname.decode()


def openmp_runtime() -> dict[str, Any]:
    """Which OpenMP runtime torch's parallel regions use, and every OpenMP library mapped."""
    maps = Path("/proc/self/maps").read_text() if Path("/proc/self/maps").exists() else ""
    mapped = sorted(set(re.findall(r"(/\S*lib(?:gomp|iomp5|omp)[^/\s]*\.so[^/\s]*)", maps)))
    provider = symbol_library("GOMP_parallel") or symbol_library("omp_get_max_threads")
    name = "unknown"
    if provider:
        base = os.path.basename(provider)
        name = "intel" if "iomp" in base else "gnu" if "gomp" in base else "llvm" if "libomp" in base \
            else "unknown"
    return {"openmp_runtime": name, "openmp_library": provider, "openmp_libraries_mapped": mapped}


def allocator() -> dict[str, Any]:
    """The malloc in use: a preloaded tcmalloc/jemalloc/mimalloc if one is mapped, else the C library's."""
    maps = Path("/proc/self/maps").read_text() if Path("/proc/self/maps").exists() else ""
    mapped = sorted(set(re.findall(r"(/\S*lib(?:tcmalloc|jemalloc|mimalloc)[^/\s]*\.so[^/\s]*)", maps)))
    name = "libc"
    for candidate in ("tcmalloc", "jemalloc", "mimalloc"):
        if any(candidate in os.path.basename(path) for path in mapped):
            name = candidate
            break
    return {"allocator": name, "allocator_libraries_mapped": mapped, "allocator_settings": allocator_settings(name)}


def allocator_settings(name: str = "libc", env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """How the allocator was set up: the launcher's ALLOCATOR knob, glibc's malloc tunables as this process
    started with them, and one line a plan or verdict can print ("pinned (glibc: mmap_threshold 32 MiB,
    ...)" or "default glibc (dynamic thresholds)")."""
    env = os.environ if env is None else env
    tunables = {key.removeprefix("glibc.malloc."): value for key, _, value in
                (item.partition("=") for item in env.get("GLIBC_TUNABLES", "").split(":") if item)
                if key.startswith("glibc.malloc.")}
    knob = env.get("ALLOCATOR") or "default"
    if name != "libc":
        text = f"{name} (preloaded)"
    elif tunables:
        shown = ", ".join(f"{key} {_mib(value)}" for key, value in tunables.items())
        text = f"{'pinned' if knob == 'pinned' else 'glibc tunables'} (glibc: {shown})"
    else:
        text = "default glibc (dynamic mmap/trim thresholds)"
    return {"knob": knob, "glibc_malloc_tunables": tunables, "text": text}


def _mib(value: str) -> str:
    return f"{int(value) >> 20} MiB" if value.isdigit() and int(value) % (1 << 20) == 0 else value


def thread_affinity() -> dict[str, str]:
    """Cores each thread of this process may run on (Cpus_allowed_list per task), grouped."""
    groups: dict[str, int] = {}
    for status in Path("/proc/self/task").glob("*/status"):
        try:
            match = re.search(r"^Cpus_allowed_list:\s*(\S+)", status.read_text(), re.M)
        except OSError:  # the thread ended between listing and reading
            continue
        if match:
            groups[match.group(1)] = groups.get(match.group(1), 0) + 1
    return {cores: f"{count} thread(s)" for cores, count in sorted(groups.items())}


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return fields
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model() -> str:
    return _cpuinfo().get("model name") or platform.processor() or platform.machine()


# Vector units a CPU kernel may be built for: two hosts whose model name is the same generic string
# ("AMD EPYC" in a VM) can differ here, and bf16 on a CPU without avx512_bf16/AMX is emulated (10x slower).
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "asimd", "sve")


def cpu_class() -> dict[str, str | None]:
    """`cpu_id` (vendor, family, model: the generation a VM's model name may hide) and `cpu_isa` (which of
    ISA_FLAGS the CPU has): with the model name, what makes two CPUs' times comparable."""
    info = _cpuinfo()
    family, model = info.get("cpu family"), info.get("model")
    flags = set((info.get("flags") or info.get("Features") or "").split())
    return {"cpu_id": f"{info.get('vendor_id', '?')} family {family} model {model}" if family else None,
            "cpu_isa": " ".join(flag for flag in ISA_FLAGS if flag in flags) if flags else None}


def image_info() -> dict[str, Any] | None:
    """Build info baked into a container image, if this process runs in one."""
    for candidate in (os.environ.get("ACCEL_IMAGE_INFO"), *IMAGE_INFO_PATHS):
        if candidate and Path(candidate).is_file():
            return json.loads(Path(candidate).read_text())
    return None


def gpus() -> list[dict[str, Any]]:
    if not torch.cuda.is_available():
        return []
    out = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        out.append({"index": index, "name": props.name, "capability": f"{props.major}.{props.minor}",
                    "memory_gib": round(props.total_memory / 2**30, 1)})
    return out


def packages() -> dict[str, str]:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def fingerprint() -> dict[str, Any]:
    """The environment record. Call it after training so thread pools exist and are visible."""
    return {
        **git_commit(),
        "image": image_info(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        **cpu_class(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "parallel_info": torch.__config__.parallel_info(),
        **openmp_runtime(),
        **allocator(),
        "thread_affinity": thread_affinity(),
        "gpus": gpus(),
        "packages": packages(),
        "executable": sys.executable,
        "vars": {k: v for k, v in sorted(os.environ.items())
                 if k.startswith(RECORDED_PREFIXES) and k not in NOT_RECORDED},
    }

