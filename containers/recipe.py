#!/usr/bin/env python3
"""One HPC Container Maker (hpccm) recipe for every container target: it writes each target's Dockerfile
and Apptainer .def (containers/<target>/Dockerfile and <target>.def), which stay committed for users to
read. Edit this file, never the generated ones; tests/test_containers.py fails when they drift.

    containers/build.sh recipes               regenerate all (make recipes)
    containers/build.sh recipes --check       name the generated files that differ from the recipe
    python3 containers/recipe.py --print mpi singularity    one file to stdout
    python3 containers/recipe.py --ompi 5.0.8 --pmix 5.0.7 --ucx 1.18.1   the `mpi` image's MPI stack,
                                              set to the cluster's (host mpirun -> one container per rank)

The steps every image shares live in two scripts, so the generated files stay short and alike only in
form: install-env.sh (apt packages, one venv from the target's hashed lock installed with
--require-hashes, /opt/accel/build-info.json, the unprivileged user) and check-env.sh (the self-test: the
final RUN and %test). hpccm's building blocks build the `mpi` image's UCX, PMIx and Open MPI. Its python
and pip blocks do not fit: pip installs into the system Python and can neither pass --require-hashes with
a requirements file nor bind-mount the wheelhouse or read the CA secret, so install-env.sh does that part
in both formats.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import hpccm.config
from hpccm import Stage
from hpccm.building_blocks import openmpi, pmix, ucx
from hpccm.common import container_type
from hpccm.primitives import (baseimage, comment, copy, environment, label, raw, runscript, shell, user,
                              workdir)
from packaging.version import Version

HERE = Path(__file__).resolve().parent
FORMATS = {"docker": container_type.DOCKER, "singularity": container_type.SINGULARITY}
DEBIAN = "docker.io/library/debian:bookworm-20250520-slim"
CUDA_RUNTIME = "docker.io/nvidia/cuda:13.0.1-runtime-ubuntu24.04"
CUDA_DEVEL = "docker.io/nvidia/cuda:13.0.1-devel-ubuntu24.04"
PYPI = "https://pypi.org/simple"
MPI_PREFIX = "/opt/mpi"


@dataclass(frozen=True)
class Target:
    name: str
    about: str  # the header's first lines
    base: str  # pinned tag; its digest lives in containers/base-digests.txt
    distro: str  # hpccm's name for the base's package family (it has no Debian; apt is apt)
    apt: tuple[str, ...]  # Debian/Ubuntu packages of the final image
    pip_index: str = PYPI
    pip_extra_index: str = ""
    check_modules: tuple[str, ...] = ()  # imported by the self-test besides torch/torchvision
    mpi_stack: bool = False  # UCX + PMIx + Open MPI built in a stage of their own (hpccm building blocks)
    base_user: str = ""  # a user the base ships with uid 1000, removed so that ours takes the uid
    extra_env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MpiVersions:
    ompi: str = "5.0.7"
    pmix: str = "5.0.6"
    ucx: str = "1.18.0"


DEBIAN_APT = ("python3", "python3-venv", "ca-certificates", "libgoogle-perftools4", "libjemalloc2",
              "openmpi-bin", "libopenmpi3")
UBUNTU_APT = ("python3", "python3-venv", "ca-certificates", "libgoogle-perftools4t64", "libjemalloc2")
TARGETS = {t.name: t for t in (
    Target("cpu", "current torch/torchvision (the host venv's pins), intel-openmp, tcmalloc/jemalloc and the "
                  "Open MPI client", DEBIAN, "ubuntu", DEBIAN_APT),
    Target("cpu-intel", "the frozen Intel line: torch 2.7.1+cpu, Intel Extension for PyTorch 2.7.0, oneCCL "
                        "bindings 2.7.0+cpu, intel-openmp (why frozen: containers/cpu-intel/README.md)",
           DEBIAN, "ubuntu", DEBIAN_APT, pip_index="https://download.pytorch.org/whl/cpu",
           # pip reads a space-separated list: Intel's index (oneccl_bind_pt), then PyPI (IPEX's deps).
           pip_extra_index=f"https://pytorch-extension.intel.com/release-whl/stable/cpu/us/ {PYPI}",
           check_modules=("intel_extension_for_pytorch", "oneccl_bindings_for_pytorch")),
    Target("cuda", "the CUDA runtime base, torch/torchvision's CUDA 13 build (the host venv's pins) and NCCL "
                   "(the nvidia-nccl-cu13 wheel in the lock); the host needs an NVIDIA driver for CUDA 13 "
                   "(>= 580)", CUDA_RUNTIME, "ubuntu24", UBUNTU_APT,
           base_user="ubuntu"),
    Target("mpi", "the `cuda` environment plus UCX, PMIx and Open MPI (--with-slurm, external PMIx and UCX) "
                  "for the hybrid model: host mpirun/srun -> one container per rank. Their versions must "
                  "match the cluster's (recipe.py --ompi/--pmix/--ucx)", CUDA_RUNTIME, "ubuntu24",
           UBUNTU_APT + ("libhwloc15", "libevent-core-2.1-7t64", "libevent-pthreads-2.1-7t64", "libnuma1",
                         "libibverbs1", "librdmacm1", "openssh-client"),
           mpi_stack=True, base_user="ubuntu",
           extra_env={"PATH": f"/opt/venv/bin:{MPI_PREFIX}/bin:$PATH",
                      "LD_LIBRARY_PATH": f"{MPI_PREFIX}/lib"}),
)}


def docker() -> bool:
    return hpccm.config.g_ctype == container_type.DOCKER


def header(target: Target) -> comment:
    build = ("make image TARGET={0} (context = containers/); air-gapped: make wheelhouse TARGET={0}, copy "
             "containers/ over, make image TARGET={0} OFFLINE=1" if docker() else
             "make sif TARGET={0} (apptainer build {0}.sif {0}/{0}.def from containers/); air-gapped: "
             "make wheelhouse TARGET={0}, then make sif TARGET={0} OFFLINE=1").format(target.name)
    lines = [f"accel `{target.name}` image: {target.about}. The environment only: the launchers bind-mount "
             "the checkout.",
             f"Build: {build}.",
             "Generated from containers/recipe.py (HPC Container Maker) by `make recipes`; edit the recipe."]
    text = "\n".join(textwrap.fill(line, width=106, subsequent_indent="  ", break_on_hyphens=False)
                     for line in lines)
    return comment(text, reformat=False)


def mpi_build_stage(versions: MpiVersions) -> Stage:
    """UCX, PMIx and Open MPI into /opt/mpi, configured as SLURM sites run them: Open MPI with SLURM support
    and external PMIx (to match the host's) and UCX (InfiniBand verbs/RDMA-CM, CUDA)."""
    stage = Stage()
    image = "${BUILDER_IMAGE}" if docker() else CUDA_DEVEL
    stage += baseimage(image=image, _as="mpi-build", _distro="ubuntu24", _arch="x86_64")
    stage += ucx(version=versions.ucx, prefix=MPI_PREFIX, cuda=True, ofed=True, knem=False, xpmem=False,
                 gdrcopy=False, environment=False,
                 ospackages=["build-essential", "ca-certificates", "wget", "file", "libnuma-dev",
                             "libibverbs-dev", "librdmacm-dev", "libevent-dev", "zlib1g-dev"])
    stage += pmix(version=versions.pmix, prefix=MPI_PREFIX, with_hwloc="/usr", with_libevent="/usr",
                  environment=False, ospackages=["libhwloc-dev"])
    stage += openmpi(version=versions.ompi, prefix=MPI_PREFIX, pmix=MPI_PREFIX, ucx=MPI_PREFIX, cuda=True,
                     infiniband=False, with_slurm=True, with_hwloc="/usr", with_libevent="/usr",
                     environment=False,
                     configure_opts=["--disable-getpwuid", "--enable-prte-prefix-by-default"],
                     ospackages=["bzip2", "openssh-client", "perl"])
    listing = f"openmpi {versions.ompi}\\npmix {versions.pmix}\\nucx {versions.ucx}\\n"
    stage += shell(chdir=False, commands=[f"printf '{listing}' > {MPI_PREFIX}/versions.txt"])
    return stage


def final_stage(target: Target) -> Stage:
    """The image itself: base, build arguments, runtime environment, the installed environment, the
    unprivileged user (OCI) and the self-test. Docker lines are kept few: one line each where hpccm allows."""
    stage = Stage()
    lock, wheelhouse = "/opt/accel/requirements.lock", "/opt/accel/wheelhouse"
    install = f"/opt/accel/install-env.sh {target.name} {lock} {wheelhouse} {' '.join(target.apt)}"
    files = {"install-env.sh": "/opt/accel/install-env.sh", "check-env.sh": "/opt/accel/check-env.sh",
             f"{target.name}/requirements.lock": lock}
    check = ["/opt/accel/check-env.sh" + "".join(f" {m}" for m in target.check_modules)]
    if target.mpi_stack:
        check += ["ompi_info --version", f"cat {MPI_PREFIX}/versions.txt"]
    env = {"LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/opt/venv/bin:$PATH",
           **target.extra_env}
    args = {"PIP_INDEX_URL": target.pip_index, "PIP_EXTRA_INDEX_URL": target.pip_extra_index,
            "BASE_DIGEST": "unresolved", "OFFLINE": "0"}
    base = "${BASE_IMAGE}" if docker() else target.base
    stage += baseimage(image=base, _as="final" if target.mpi_stack else "", _distro=target.distro,
                       _arch="x86_64")  # the locks are resolved for x86_64
    quoted = {k: f'"{v}"' if " " in v else v for k, v in args.items()}
    # One ARG line (hadolint reads the first name of it: ACCEL_UID, which USER needs as a number).
    stage += raw(docker="ARG ACCEL_UID=1000 BASE_IMAGE " + " ".join(f"{k}={v}" for k, v in quoted.items()),
                 singularity="%arguments\n" + "\n".join(f"    {k}={v}" for k, v in args.items() if v))
    stage += environment(variables=env, _export=False)
    if docker() and target.base_user:
        name = target.base_user
        stage += shell(commands=[f"if id {name} >/dev/null 2>&1; then userdel --remove {name}; fi"])
    if target.mpi_stack:
        stage += copy(_from="mpi-build", src=MPI_PREFIX, dest=MPI_PREFIX)
    stage += label(metadata={"org.opencontainers.image.title": f"accel-{target.name}",
                             "org.opencontainers.image.base.name": base})
    if docker():
        stage += copy(files=files)
        # The wheelhouse is bind-mounted for this step only, so wheels never land in a layer.
        stage += shell(commands=[install], _arguments=f"--mount=type=bind,source=wheelhouse/{target.name},"
                                                      f"target={wheelhouse} --mount=type=secret,id=pip_cert")
        stage += user(user="${ACCEL_UID}")
        stage += workdir(directory="/home/accel")
    else:
        stage += copy(files={**files, f"wheelhouse/{target.name}": wheelhouse})
        values = " ".join(f'{k}="{{{{ {k} }}}}"' for k, v in args.items() if v)
        stage += shell(chdir=False, commands=[f"{values} BASE_IMAGE={target.base} \\\n        {install}",
                                              f"rm -rf {wheelhouse}"])
    stage += shell(chdir=False, _test=True, commands=check)  # the last RUN, or %test
    if docker():
        stage += raw(docker='CMD ["python3", "-m", "pipelines", "--help"]')
    else:
        stage += runscript(commands=["python3 -m pipelines"])
    return stage


def render(target: Target, fmt: str, versions: MpiVersions = MpiVersions()) -> str:
    """The Dockerfile (fmt docker) or Apptainer definition (fmt singularity) of one target."""
    hpccm.config.g_ctype = FORMATS[fmt]
    hpccm.config.g_singularity_version = Version("3.2")  # multi-stage .def: Stage:, %files from
    parts = [str(header(target))]
    if docker():
        builder = [f"ARG BUILDER_IMAGE={CUDA_DEVEL}"] if target.mpi_stack else []
        parts.append("\n".join([*builder, f"ARG BASE_IMAGE={target.base}"]))
    stages = [mpi_build_stage(versions)] if target.mpi_stack else []
    parts.append("\n\n".join(str(stage) for stage in [*stages, final_stage(target)]))
    return "\n".join(parts) + "\n"


def outputs(versions: MpiVersions) -> dict[Path, str]:
    files = {}
    for target in TARGETS.values():
        files[HERE / target.name / "Dockerfile"] = render(target, "docker", versions)
        files[HERE / target.name / f"{target.name}.def"] = render(target, "singularity", versions)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    parser.add_argument("--print", nargs=2, metavar=("TARGET", "FORMAT"), help="one file to stdout")
    defaults = MpiVersions()
    parser.add_argument("--ompi", default=defaults.ompi, help="Open MPI version of the mpi image")
    parser.add_argument("--pmix", default=defaults.pmix, help="PMIx version of the mpi image")
    parser.add_argument("--ucx", default=defaults.ucx, help="UCX version of the mpi image")
    args = parser.parse_args(argv)
    versions = MpiVersions(ompi=args.ompi, pmix=args.pmix, ucx=args.ucx)
    if args.print:
        name, fmt = args.print
        if name not in TARGETS or fmt not in FORMATS:
            parser.error(f"--print TARGET FORMAT: TARGET one of {', '.join(TARGETS)}, FORMAT one of "
                         f"{', '.join(FORMATS)}")
        sys.stdout.write(render(TARGETS[name], fmt, versions))
        return 0
    drift = []
    for path, text in outputs(versions).items():
        if path.is_file() and path.read_text() == text:
            continue
        drift.append(path.relative_to(HERE.parent))
        if not args.check:
            path.write_text(text)
    verb = "differ from containers/recipe.py (regenerate: make recipes)" if args.check else "written"
    for path in drift:
        print(f"recipe: {path} {verb}", file=sys.stderr)
    return 1 if args.check and drift else 0


if __name__ == "__main__":
    sys.exit(main())
