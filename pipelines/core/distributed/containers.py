"""IMAGE, the container the ranks run in: the image checked before any launcher starts (its scheme, file,
engine and build info, on this host or on every host of HOSTS), launch/_container.sh's knobs (GPUs, mounts,
the variables that cross into the container), and the one line for a start the engine refused.

Standard library only: with IMAGE the host may have a bare python3 (the image holds torch).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from pipelines.core.distributed.hosts import installed, per_node
from pipelines.core.distributed.knobs import REPO, USAGE, KnobError, Knobs, arg_value

KNOB_FILE = REPO / "pipelines" / "core" / "record" / "knobs.txt"


def image(knobs: Knobs, where: str) -> None:
    """IMAGE that cannot start (unknown scheme, missing .sif; where the containers start on this host, also a
    missing engine or local image) is refused before any launcher starts: mpirun and srun would otherwise
    fail once per rank. `where`: here | elsewhere (the ranks start on other nodes)."""
    value = knobs.get("IMAGE")
    if not value:
        return
    if knobs.get("ACCEL_PRINT"):
        where = "elsewhere"  # printing a command line: the image need not be here
    host = socket.gethostname()
    scheme, _, tag = value.partition(":")
    if scheme in ("podman", "docker"):
        if not tag:
            raise KnobError(f"IMAGE={value} names no image; use {scheme}:TAG (e.g. {scheme}:accel-cpu:local from "
                            "make image TARGET=cpu)")
        if where != "here":
            return
        if not installed(scheme):
            raise KnobError(f"IMAGE={value} but {scheme} is not installed on {host}; install it there or use "
                            "another IMAGE scheme")
        found = subprocess.run([scheme, "image", "inspect", tag], capture_output=True, check=False)
        if found.returncode != 0:
            raise KnobError(f"IMAGE={value}: {scheme} has no image {tag} on {host}; build it there (make image "
                            f"TARGET=<target> IMAGE_TAG={tag}) or pull it first")
    elif value.endswith(".sif"):
        if not Path(value).is_file():
            raise KnobError(f"IMAGE={value} does not exist; build it with: make sif TARGET=cpu (or make "
                            "sif-from-image TARGET=cpu)")
        if where == "here" and not installed(knobs.get("APPTAINER", "apptainer")):
            raise KnobError(f"IMAGE={value} needs apptainer, which is not installed on {host}; install "
                            "Apptainer there or use IMAGE=podman:TAG")
    else:
        raise KnobError(f"IMAGE={value}: unknown scheme; use path/to/image.sif, podman:TAG or docker:TAG")


def container(knobs: Knobs, args: Sequence[str]) -> None:
    """launch/_container.sh: the image, GPUs, mounts and the knobs that cross into the container."""
    check_only = bool(args) and args[0] == "--check"
    if check_only:
        args = ["true"]
    if not args:
        raise KnobError(USAGE["container"])
    value = knobs.get("IMAGE")
    if not value:
        raise KnobError("IMAGE is empty; set IMAGE=path.sif, podman:TAG or docker:TAG")
    image(knobs, "here")
    printing = bool(knobs.get("ACCEL_PRINT"))
    gpus = knobs.set("GPUS", knobs.get("GPUS", "auto"))
    if gpus not in ("auto", "yes", "no"):
        raise KnobError(f"GPUS={gpus} is not auto, yes or no")
    present = gpus != "no" and gpus_present()
    if gpus == "yes" and not present:
        raise KnobError("GPUS=yes but no NVIDIA GPU is visible here (nvidia-smi -L lists none); run on a GPU node "
                        "or set GPUS=auto")
    knobs.set("WANT_GPUS", "1" if present else "0")
    device = arg_value(args, "--device")
    if device.startswith("cuda") and not present:
        raise KnobError(f"--device {device} but no GPU is passed into the container (GPUS={gpus}, nvidia-smi -L "
                        "lists none); run on a GPU node or use --device cpu")
    if not printing and not build_info(value, knobs.get("APPTAINER", "apptainer")).startswith("/"):
        raise KnobError(f"IMAGE={value} has no accel build info (label accel.build-info); it was not built from "
                        "containers/: make image TARGET=<target> (or make sif TARGET=<target>)")
    knobs.set("NETWORK", knobs.get("NETWORK", "host"))
    knobs.set("APPTAINER", knobs.get("APPTAINER", "apptainer"))
    knobs.set("DATA", absolute(knobs.get("DATA_DIR") or arg_value(args, "--data-root") or str(REPO / "data")))
    results = knobs.set("RESULTS", absolute(knobs.get("RESULTS_DIR") or arg_value(args, "--results-dir")
                                            or str(REPO / "results")))
    checkpoints = arg_value(args, "checkpoint_dir")  # writable too: a checkpoint must outlive the container
    checkpoints = knobs.set("CHECKPOINTS", absolute(checkpoints) if checkpoints else "")
    knobs.set("PASS_NAMES", " ".join(passed_names(knobs.env)))
    if not (check_only or printing):  # after the checks: nothing written on error
        for label, folder in (("results folder", results), ("checkpoint folder", checkpoints)):
            try:
                if folder:
                    Path(folder).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise KnobError(f"cannot create the {label} {folder} ({exc.strerror})") from None


def gpus_present() -> bool:
    if not installed("nvidia-smi"):
        return False
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return any(line.startswith("GPU ") for line in listed.stdout.splitlines())


def build_info(value: str, apptainer: str) -> str:
    """Where the image keeps this project's build info (its label accel.build-info), or ''."""
    scheme, _, tag = value.partition(":")
    if scheme in ("podman", "docker"):
        command = [scheme, "image", "inspect", "--format", '{{index .Config.Labels "accel.build-info"}}', tag]
    else:
        command = [apptainer, "inspect", "--labels", value]
    shown = subprocess.run(command, capture_output=True, text=True, check=False).stdout
    if scheme not in ("podman", "docker"):
        shown = next((line.split(":", 1)[1] for line in shown.splitlines()
                      if line.startswith("accel.build-info:")), "")
    return shown.strip()


def absolute(path: str) -> str:
    """Relative paths are relative to the checkout (the launchers run there); mounts need absolute ones."""
    return path if path.startswith("/") else str(REPO / path)


def passed_names(env: Mapping[str, str]) -> list[str]:
    """The variables that cross into the container: knobs.txt lines without a second word or with `pass`."""
    if not KNOB_FILE.is_file():
        raise KnobError(f"{KNOB_FILE} is missing; it lists the variables that cross into the container")
    prefixes = []
    for line in KNOB_FILE.read_text().splitlines():
        words = line.split("#")[0].split()
        if len(words) == 1 or (len(words) > 1 and words[1] == "pass"):
            prefixes.append(words[0])
    return sorted(name for name in env if name != "ACCEL_PRINT" and any(name.startswith(p) for p in prefixes))


def image_on_every_host(knobs: Knobs, names: list[str]) -> None:
    """`_container.sh --check` once per host of HOSTS, started by mpirun itself, so a host without the
    container runtime or the image fails here, in one line naming it, before any rank starts."""
    command = ["mpirun", "-np", str(len(names)), "--host", ",".join(f"{n}:1" for n in names), "--map-by", "node",
               "--tag-output", "-wdir", str(REPO), "-x", "PATH"]
    command += [w for name in ("IMAGE", "IMAGE_PREFIX", "GPUS", "APPTAINER", "CONTAINER_ARGS", "CONTAINER_USER")
                if knobs.get(name) for w in ("-x", name)]
    if knobs.get("RSH_AGENT"):
        command += ["--mca", "plm_rsh_agent", knobs.get("RSH_AGENT")]
    if os.getuid() == 0:
        command.append("--allow-run-as-root")
    command += [str(REPO / "launch" / "_container.sh"), "--check"]

    def host_of(output: str) -> str:
        tag = re.search(r"^\[[0-9]+,([0-9]+)\]", output, re.M)
        return f"host {names[int(tag.group(1)) if tag else 0]}: "

    per_node(knobs, command, f"mpirun across HOSTS={knobs.get('HOSTS')}", host_of)


# What an engine prints (a regular expression) when the host refuses a container's start (exit 125-127: the
# command inside never ran), and the fix; launch/_container.sh asks start_failure for the line. First match wins.
START_FAILURES = (
    (r"error setting rlimit|setrlimit",
     "the host does not let the container runtime raise its rlimits (no CAP_SYS_RESOURCE); set "
     "CONTAINER_ARGS='--runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096' (docs/containers.md)"),
    (r"newuidmap|subuid|user namespace|cannot clone|unshare",
     "this host gives {engine} no user namespaces for a rootless container; add subordinate ids for your user "
     "in /etc/subuid and /etc/subgid (then '{engine} system migrate'), run {engine} as root, or use an "
     "Apptainer image (IMAGE=path/to/x.sif)"),
    (r"OCI runtime \S* ?not found|unknown runtime|runtime .*executable file not found",
     "{engine}'s configured OCI runtime is not installed here; install it, or name one that is with "
     "CONTAINER_ARGS='--runtime runc'"),
    (r"image not known|No such image|manifest unknown|Unable to find image",
     "the image is not in {engine}'s local store; build it with 'make image TARGET=cpu' (or cpu-intel, cuda, "
     "mpi) or load it, and name it in IMAGE"),
)


def start_failure(engine: str, status: int, stderr: str) -> str:
    """The one line for a container start the engine refused, or '' for a failure this table does not know
    (the engine's own message then stands alone)."""
    found = next((fix for pattern, fix in START_FAILURES if re.search(pattern, stderr)), "")
    return f"launch: error: {engine} could not start the container (exit {status}): {found.format(engine=engine)}" \
        if found else ""
