#!/usr/bin/env python3
"""One HPC Container Maker (hpccm) recipe for every container target: it writes the Dockerfile (one stage
per target, containers/Dockerfile) and each target's Apptainer .def (containers/<target>/<target>.def), which
stay committed for users to read. Edit this file, never the generated ones; tests/containers/test_containers.py fails when they drift.

    containers/build.sh recipes               regenerate all (make recipes)
    containers/build.sh recipes --check       name the generated files that differ from the recipe
    python3 containers/recipe.py --print mpi singularity    one file to stdout
    python3 containers/recipe.py --ompi 5.0.8 --pmix 5.0.7 --ucx 1.18.1   the `mpi` image's MPI stack
                         built from release tarballs (hpccm building blocks) to match the cluster's; each
                         tarball must have its SHA-256 in containers/mpi/sources.sha256

Every image is Debian bookworm (the same python3.11 the locks are resolved for) and layers alike: the
Python environment first (install-python.sh: one venv from a hashed lock, installed with --require-hashes;
`cpu`, `cuda` and `mpi` share containers/locks/torch.lock, so that layer is built once and stored once),
then (cpu-intel only) the ccl backend compiled against that environment (install-ccl.sh, from the source
build.sh stages as sources/ccl), then the target's own system packages, build info and user
(install-env.sh), then the self-test (check-env.sh). The steps live in those scripts, so the generated files stay short and alike only in form.
hpccm's python and pip blocks do not fit: pip installs into the system Python and can neither pass
--require-hashes nor bind-mount the wheelhouse or read the CA secret. Its UCX, PMIx and Open MPI blocks build the `mpi` image's source stack when asked (--ompi ...); by
default the `mpi` image takes Debian's Open MPI 4.1 with its PMIx, which is what a bookworm host's mpirun
speaks and what builds without reaching the release sites.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import hpccm.config
from hpccm import Stage
from hpccm.building_blocks import openmpi, packages, pmix, ucx
from hpccm.common import container_type
from hpccm.primitives import (baseimage, comment, copy, environment, label, raw, runscript, shell, user,
                              workdir)
from packaging.version import InvalidVersion, Version

HERE = Path(__file__).resolve().parent
FORMATS = {"docker": container_type.DOCKER, "singularity": container_type.SINGULARITY}
DEBIAN = "docker.io/library/debian:bookworm-20250520-slim"
PYPI = "https://pypi.org/simple"
MPI_PREFIX = "/opt/mpi"
SOURCES_SHA256 = HERE / "mpi" / "sources.sha256"
LOCK, WHEELHOUSE = "/opt/accel/requirements.lock", "/opt/accel/wheelhouse"
# backends/ccl, staged into the build context by build.sh (the context is containers/, the source is not)
CCL_STAGED, CCL_SOURCE = "sources/ccl", "/opt/accel/ccl-src"
BUILD_INFO = "/opt/accel/build-info.json"  # written by install-env.sh; every result's env.image


class RecipeError(Exception):
    """A bad recipe option: one line on stderr, exit 2, nothing written."""


@dataclass(frozen=True)
class Target:
    name: str
    about: str  # the header's first lines
    lock: str  # containers/locks/<lock>.lock: the Python environment
    apt: tuple[str, ...] = ()  # Debian packages of this target, installed after the Python environment
    check_modules: tuple[str, ...] = ()  # imported by the self-test besides torch/torchvision
    absent: dict[str, str] = field(default_factory=dict)  # parts this image lacks and why (build info)
    extra_env: dict[str, str] = field(default_factory=dict)
    ccl: bool = False  # compile backends/ccl against the lock's torch and oneCCL (install-ccl.sh)


@dataclass(frozen=True)
class MpiSource:
    """The `mpi` image's MPI stack from release tarballs (None everywhere: Debian's packages)."""
    ompi: str
    pmix: str
    ucx: str


ALLOCATORS = ("libgoogle-perftools4", "libjemalloc2")
TARGETS = {t.name: t for t in (
    Target("cpu", "current torch/torchvision (the host venv's pins), intel-openmp, tcmalloc/jemalloc and the "
                  "Open MPI client", "torch", ALLOCATORS + ("openmpi-bin", "libopenmpi3")),
    Target("cpu-intel", "the frozen Intel line from PyPI: torch 2.8.0, Intel Extension for PyTorch 2.8.0, "
                        "intel-openmp, oneCCL 2021.16.2 under accel's own ccl backend (why frozen, and why not "
                        "Intel's oneCCL bindings: containers/cpu-intel/README.md)", "ipex", ALLOCATORS,
           check_modules=("intel_extension_for_pytorch", "accel_ccl"), ccl=True,
           absent={"oneccl_bind_pt": "published only on the Intel wheel index, unreachable where the lock was "
                                     "made; the ccl backend here is the project binding accel_ccl "
                                     "(containers/cpu-intel/README.md)"}),
    Target("cuda", "torch/torchvision's CUDA 13 build from PyPI (the host venv's pins): the nvidia-* wheels "
                   "bring the CUDA runtime, cuDNN and NCCL, so the base is plain Debian; the host's NVIDIA "
                   "driver (>= 580) comes in with --nv / CDI", "torch"),
    Target("mpi", "the `cuda` environment plus Open MPI and PMIx for the hybrid model: host mpirun/srun -> "
                  "one container per rank. Debian's Open MPI 4.1 by default (a bookworm host's mpirun); "
                  "recipe.py --ompi/--pmix/--ucx builds the cluster's versions from checked tarballs",
           "torch", ("openmpi-bin", "libopenmpi-dev", "openssh-client")),
)}
# Runtime libraries of the source-built stack (the build stage has the -dev packages).
SOURCE_RUNTIME_APT = ("libhwloc15", "libevent-core-2.1-7", "libevent-pthreads-2.1-7", "libnuma1",
                      "libibverbs1", "librdmacm1", "openssh-client")


def docker() -> bool:
    return hpccm.config.g_ctype == container_type.DOCKER


def base_digests() -> dict[str, str]:
    """containers/base-digests.txt: reference -> sha256 digest, where `make image-digests` resolved one."""
    path = HERE / "base-digests.txt"
    pairs = (line.split() for line in path.read_text().splitlines() if line.strip() and line[0] != "#")
    return {ref: digest for ref, digest in pairs if digest.startswith("sha256:")}


def pinned(ref: str) -> str:
    """The base reference by digest when one is recorded, else by its exact tag."""
    digest = base_digests().get(ref)
    return f"{ref}@{digest}" if digest else ref


def header(target: Target, source: MpiSource | None) -> comment:
    build = ("make image TARGET={0} (context = containers/); air-gapped: make wheelhouse TARGET={0}, copy "
             "containers/ over, make image TARGET={0} OFFLINE=1" if docker() else
             "make sif TARGET={0} (apptainer build {0}.sif {0}/{0}.def from containers/); air-gapped: "
             "make wheelhouse TARGET={0}, then make sif TARGET={0} OFFLINE=1").format(target.name)
    made = "`make recipes`" + (f" with --ompi {source.ompi} --pmix {source.pmix} --ucx {source.ucx}"
                               if source and target.name == "mpi" else "")
    lines = [f"accel `{target.name}` image: {target.about}. The environment only: the launchers bind-mount "
             "the checkout.",
             f"Build: {build}.",
             f"Generated from containers/recipe.py (HPC Container Maker) by {made}; edit the recipe."]
    text = "\n".join(textwrap.fill(line, width=106, subsequent_indent="  ", break_on_hyphens=False)
                     for line in lines)
    return comment(text, reformat=False)


def source_sums(path: Path = SOURCES_SHA256) -> dict[str, str]:
    """Committed SHA-256 of each release tarball, `sha256sum` format: file name -> digest."""
    sums = {}
    for line in path.read_text().splitlines() if path.is_file() else ():
        match = re.fullmatch(r"([0-9a-f]{64})\s+\*?(\S+)", line.strip())
        if match:
            sums[match.group(2)] = match.group(1)
    return sums


def verified_download(block, sums: dict[str, str]) -> shell:
    """Fetch a building block's tarball first and check it against its committed SHA-256. The block's own
    `wget -nc` then finds the file present and downloads nothing, so only checked bytes get configured."""
    url = re.search(r"wget -q -nc -P /var/tmp (\S+)", str(block)).group(1)
    name = url.rsplit("/", 1)[1]
    if name not in sums:
        raise RecipeError(f"no committed SHA-256 for {name}; add the line '<sha256>  {name}' (from the release "
                          f"page, or sha256sum of a tarball you verified) to {SOURCES_SHA256.relative_to(HERE.parent)}")
    return shell(chdir=False, commands=[f"mkdir -p /var/tmp && wget -q -O /var/tmp/{name} {url} && "
                                        f"echo '{sums[name]}  /var/tmp/{name}' | sha256sum -c -"])


def mpi_source_stage(source: MpiSource, sums: dict[str, str]) -> Stage:
    """UCX, PMIx and Open MPI into /opt/mpi, configured as SLURM sites run them: Open MPI with SLURM support,
    external PMIx (to match the host's) and UCX (InfiniBand verbs/RDMA-CM). No CUDA-aware MPI: torch's GPU
    collectives go through NCCL, and PyPI's torch is not built with MPI anyway. The build stage is the same
    Debian as the final image, so the libraries link against the glibc they run with."""
    stage = Stage()
    stage += baseimage(image="${BASE_IMAGE}" if docker() else pinned(DEBIAN), _as="mpi-build",
                       _distro="ubuntu", _arch="x86_64", _docker_env=False)
    blocks = [
        ucx(version=source.ucx, prefix=MPI_PREFIX, cuda=False, ofed=True, knem=False, xpmem=False,
            gdrcopy=False, environment=False,
            ospackages=["build-essential", "ca-certificates", "wget", "file", "libnuma-dev", "libibverbs-dev",
                        "librdmacm-dev", "libevent-dev", "zlib1g-dev"]),
        pmix(version=source.pmix, prefix=MPI_PREFIX, with_hwloc="/usr", with_libevent="/usr", environment=False,
             ospackages=["libhwloc-dev"]),
        openmpi(version=source.ompi, prefix=MPI_PREFIX, pmix=MPI_PREFIX, ucx=MPI_PREFIX, cuda=False,
                infiniband=False, with_slurm=True, with_hwloc="/usr", with_libevent="/usr", environment=False,
                configure_opts=["--disable-getpwuid", "--enable-prte-prefix-by-default"],
                ospackages=["bzip2", "openssh-client", "perl"]),
    ]
    stage += packages(ospackages=["ca-certificates", "wget"])
    for block in blocks:  # every tarball fetched and checked before anything is configured
        stage += verified_download(block, sums)
    for block in blocks:
        stage += block
    listing = f"openmpi {source.ompi}\\npmix {source.pmix}\\nucx {source.ucx}\\n"
    stage += shell(chdir=False, commands=[f"printf '{listing}' > {MPI_PREFIX}/versions.txt"])
    return stage


def install_commands(target: Target | None, apt: tuple[str, ...]) -> tuple[str, str]:
    """The two install steps: the Python environment (install-python.sh: shared by every target of one lock,
    hence its own layer, first), then the target's system packages, build info and user (install-env.sh).
    A target with `ccl` compiles the backend between the two (CCL_COMMAND)."""
    if target is None:
        return f"/opt/accel/install-python.sh {LOCK} {WHEELHOUSE}", ""
    absent = "".join(f" --absent {shlex.quote(f'{name}={why}')}" for name, why in target.absent.items())
    return (f"/opt/accel/install-python.sh {LOCK} {WHEELHOUSE}",
            f"/opt/accel/install-env.sh {target.name}{absent} {' '.join(apt)}".rstrip())


CCL_COMMAND = f"/opt/accel/install-ccl.sh {CCL_SOURCE}"

BUILD_ARGS = {"PIP_INDEX_URL": PYPI, "PIP_EXTRA_INDEX_URL": "", "BASE_DIGEST": "unresolved", "OFFLINE": "0"}


def python_env(stage: Stage) -> None:
    """What every image starts with: its build arguments and the runtime environment of /opt/venv."""
    # One ARG line (hadolint reads the first name of it: ACCEL_UID, which USER needs as a number).
    stage += raw(docker="ARG ACCEL_UID=1000 BASE_IMAGE " + " ".join(f"{k}={v}" for k, v in BUILD_ARGS.items()),
                 singularity="%arguments\n" + "\n".join(f"    {k}={v}" for k, v in BUILD_ARGS.items() if v))
    stage += environment(variables={"LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/opt/venv/bin:$PATH"},
                         _export=False)


def env_stage(lock: str) -> Stage:
    """Dockerfile stage env-LOCK: the Python environment of every target of one lock. Each target's stage
    starts FROM it, so that multi-GB layer is built once and stored once (cpu, cuda and mpi share it)."""
    stage = Stage()
    stage += baseimage(image="${BASE_IMAGE}", _as=f"env-{lock}", _distro="ubuntu", _arch="x86_64")
    python_env(stage)
    stage += copy(files={"install-python.sh": "/opt/accel/install-python.sh", f"locks/{lock}.lock": LOCK})
    # The wheelhouse is bind-mounted for this step only, so wheels never land in a layer.
    stage += shell(commands=[install_commands(None, ())[0]],
                   _arguments=f"--mount=type=bind,source=wheelhouse/{lock},target={WHEELHOUSE} "
                              "--mount=type=secret,id=pip_cert")
    return stage


def final_stage(target: Target, source: MpiSource | None) -> Stage:
    """The image itself: (in a .def, the build arguments and the Python environment,) the target's packages,
    the build info label, the unprivileged user (OCI) and the self-test."""
    stage = Stage()
    built_mpi = source is not None and target.name == "mpi"
    apt = (target.apt if not built_mpi else SOURCE_RUNTIME_APT)
    python_step, system_step = install_commands(target, apt)
    check = ["/opt/accel/check-env.sh" + "".join(f" {m}" for m in target.check_modules)]
    if target.name == "mpi":
        check += ["ompi_info --version"] + ([f"cat {MPI_PREFIX}/versions.txt"] if built_mpi else [])
    extra_env = dict(target.extra_env)
    if built_mpi:
        extra_env.update({"PATH": f"/opt/venv/bin:{MPI_PREFIX}/bin:$PATH", "LD_LIBRARY_PATH": f"{MPI_PREFIX}/lib"})
    if docker():
        stage += baseimage(image=f"env-{target.lock}", _as=target.name, _distro="ubuntu", _arch="x86_64")
        stage += raw(docker="ARG ACCEL_UID=1000 BASE_IMAGE BASE_DIGEST=unresolved")
        base = "${BASE_IMAGE}"
    else:
        base = pinned(DEBIAN)
        stage += baseimage(image=base, _as="final" if built_mpi else "", _distro="ubuntu", _arch="x86_64",
                           _docker_env=False)  # the locks are resolved for x86_64
        python_env(stage)
    if extra_env:
        stage += environment(variables=extra_env, _export=False)
    if built_mpi:
        stage += copy(_from="mpi-build", src=MPI_PREFIX, dest=MPI_PREFIX)
    # accel.build-info marks an image of this project: launch/_container.sh refuses an image without it.
    title = {"org.opencontainers.image.title": f"accel-{target.name}"} if docker() else {}
    stage += label(metadata={**title, "org.opencontainers.image.base.name": base, "accel.build-info": BUILD_INFO})
    if docker():
        stage += copy(src=["check-env.sh", "install-env.sh", *(["install-ccl.sh"] if target.ccl else [])],
                      dest="/opt/accel/")
        if target.ccl:  # the source is bind-mounted for this step only, like the wheelhouse
            stage += shell(commands=[CCL_COMMAND],
                           _arguments=f"--mount=type=bind,source={CCL_STAGED},target={CCL_SOURCE}")
        stage += shell(commands=[system_step])
        stage += user(user="${ACCEL_UID}")
        stage += workdir(directory="/home/accel")
    else:
        ccl_files = {"install-ccl.sh": "/opt/accel/install-ccl.sh", CCL_STAGED: CCL_SOURCE} if target.ccl else {}
        stage += copy(files={"install-python.sh": "/opt/accel/install-python.sh", f"locks/{target.lock}.lock": LOCK,
                             "install-env.sh": "/opt/accel/install-env.sh", "check-env.sh": "/opt/accel/check-env.sh",
                             f"wheelhouse/{target.lock}": WHEELHOUSE, **ccl_files})
        # %post runs under `sh -e` (Apptainer's default); every line is one whole command and carries the
        # build arguments it reads, so it also stands alone (as a RUN of spython's Dockerfile).
        values = " ".join(f'{k}="{{{{ {k} }}}}"' for k, v in BUILD_ARGS.items() if v)
        ccl_steps = [CCL_COMMAND, f"rm -rf {CCL_SOURCE}"] if target.ccl else []
        stage += shell(chdir=False, commands=[f"{values} {python_step}", f"rm -rf {WHEELHOUSE}", *ccl_steps,
                                              f"{values} BASE_IMAGE={pinned(DEBIAN)} {system_step}"])
    stage += shell(chdir=False, _test=True, commands=check)  # the last RUN, or %test
    if docker():
        stage += raw(docker='CMD ["python3", "-m", "pipelines", "--help"]')
    else:
        stage += runscript(commands=["python3 -m pipelines"])
    return stage


def source_stages(source: MpiSource | None, sums: dict[str, str] | None) -> list[Stage]:
    return [mpi_source_stage(source, source_sums() if sums is None else sums)] if source else []


def render(target: Target, fmt: str, source: MpiSource | None = None, sums: dict[str, str] | None = None) -> str:
    """The Apptainer definition (fmt singularity) of one target, or (fmt docker) the one Dockerfile of
    every target, whose stage named TARGET is that target (`podman build --target TARGET`)."""
    hpccm.config.g_ctype = FORMATS[fmt]
    hpccm.config.g_singularity_version = Version("3.2")  # multi-stage .def: Stage:, %files from
    if docker():
        return dockerfile(source, sums)
    source = source if target.name == "mpi" else None
    stages = [*source_stages(source, sums), final_stage(target, source)]
    return "\n".join([str(header(target, source)), "\n\n".join(str(stage) for stage in stages)]) + "\n"


def dockerfile(source: MpiSource | None = None, sums: dict[str, str] | None = None) -> str:
    hpccm.config.g_ctype = container_type.DOCKER
    locks = sorted({t.lock for t in TARGETS.values()})
    stages = [*source_stages(source, sums), *map(env_stage, locks),
              *(final_stage(t, source) for t in TARGETS.values())]
    text = ("accel images, one stage per target (cpu, cpu-intel, cuda, mpi), each FROM the stage env-LOCK of "
            "its Python environment (containers/locks/LOCK.lock), which is built once for all the targets "
            "that share it. The environment only: the launchers bind-mount the checkout.\n"
            "Build: make image TARGET=t (podman build --target t -f containers/Dockerfile containers/, after "
            "containers/build.sh has staged sources/ccl); air-gapped: make wheelhouse TARGET=t, copy containers/ "
            "over, make image TARGET=t OFFLINE=1.\n"
            + "".join(f"{t.name}: {t.about}.\n" for t in TARGETS.values())
            + "Generated from containers/recipe.py (HPC Container Maker) by `make recipes`"
            + (f" with --ompi {source.ompi} --pmix {source.pmix} --ucx {source.ucx}" if source else "")
            + "; edit the recipe.")
    head = comment("\n".join(textwrap.fill(line, width=106, subsequent_indent="  ", break_on_hyphens=False)
                              for line in text.splitlines()), reformat=False)
    return "\n".join([str(head), f"ARG BASE_IMAGE={pinned(DEBIAN)}",
                      "\n\n".join(str(stage) for stage in stages)]) + "\n"


def outputs(source: MpiSource | None) -> dict[Path, str]:
    files = {HERE / "Dockerfile": dockerfile(source)}
    for target in TARGETS.values():
        files[HERE / target.name / f"{target.name}.def"] = render(target, "singularity", source)
    return files


class OneLineParser(argparse.ArgumentParser):
    """Bad options are one line naming the fix (exit 2), not argparse's usage block."""

    def error(self, message: str):
        if message.startswith("unrecognized arguments"):
            message = (f"{message.split(': ', 1)[1]}: no building block for that in containers/recipe.py; "
                       "its options are --ompi, --pmix, --ucx (the mpi image's MPI stack), --print, --check")
        raise RecipeError(message)


def mpi_source(args: argparse.Namespace) -> MpiSource | None:
    given = {name: getattr(args, name) for name in ("ompi", "pmix", "ucx") if getattr(args, name)}
    if not given:
        return None
    missing = [f"--{name}" for name in ("ompi", "pmix", "ucx") if name not in given]
    if missing:
        raise RecipeError(f"--{' --'.join(given)} builds the MPI stack from source, which needs all of --ompi, "
                          f"--pmix and --ucx (the cluster's versions); missing {' '.join(missing)}")
    for name, value in given.items():
        try:
            Version(value)
        except InvalidVersion:
            raise RecipeError(f"--{name} {value} is not a release version (e.g. --{name} "
                              f"{dict(ompi='5.0.8', pmix='5.0.7', ucx='1.18.1')[name]})") from None
    return MpiSource(**given)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    parser.add_argument("--print", nargs=2, metavar=("TARGET", "FORMAT"), help="one file to stdout")
    parser.add_argument("--ompi", help="build Open MPI VERSION from its release tarball (with --pmix, --ucx)")
    parser.add_argument("--pmix", help="PMIx version of the source-built stack (the cluster's)")
    parser.add_argument("--ucx", help="UCX version of the source-built stack (the cluster's)")
    try:
        args = parser.parse_args(argv)
        source = mpi_source(args)
        if args.print:
            name, fmt = args.print
            if name not in TARGETS or fmt not in FORMATS:
                raise RecipeError(f"--print {name} {fmt}: TARGET is one of {', '.join(TARGETS)}, FORMAT one of "
                                  f"{', '.join(FORMATS)}")
            sys.stdout.write(render(TARGETS[name], fmt, source))
            return 0
        files = outputs(source)
    except RecipeError as error:
        print(f"recipe: error: {error}", file=sys.stderr)
        return 2
    drift = []
    for path, text in files.items():
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
