"""The launchers' knobs, checked once and in one place: defaults, refusals and derived values for launch/*.sh.

Each launch script (local, torchrun, mpirun, srun, and the container wrapper) asks this module for its
knobs before it builds its command line:

    eval "$(python -m pipelines.core.distributed.launchers torchrun ACCEL-ARGS...)"

and gets shell assignments back (`export OMP_NUM_THREADS=2`, `NPROC=2`, ...), or one `launch: error:` line
and exit 2. So the scripts only assemble a command: every check of a knob (a positive count, a free port,
an OpenMP runtime or allocator that is installed, an image that exists, a GPU that is there) lives here,
where it can be tested in-process. The accel arguments themselves are checked afterwards by
`accel preflight` (pipelines/core/harness/refusals.py), as every rank will check them.

Standard library only: with IMAGE the host may have a bare python3 (the image holds torch).

Over 300 lines on purpose: it is every check the five launch scripts had, in one place by design (the
issue it answers is that they were spread over five scripts); split by launcher, the shared checks
(counts, ports, IMAGE, threads) would need a module of their own anyway.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from pipelines.core.distributed import affinity
from pipelines.core.config import request as requests
from pipelines.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
KNOB_FILE = REPO / "pipelines" / "core" / "record" / "knobs.txt"
USAGE = {
    "local": "usage: launch/local.sh ACCEL-ARGS... (e.g. run ID --scale bench)",
    "torchrun": "usage: launch/torchrun.sh ACCEL-ARGS... (e.g. run ID --scale smoke)",
    "mpirun": "usage: launch/mpirun.sh ACCEL-ARGS... (e.g. run ID --scale smoke)",
    "srun": "usage: launch/srun.sh ACCEL-ARGS... (e.g. run ID --scale smoke)",
    "container": "usage: IMAGE=x.sif|podman:TAG|docker:TAG launch/_container.sh COMMAND [ARGS...] | --check",
}
HOSTS_PATTERN = re.compile(r"^[A-Za-z0-9._-]+(:[1-9][0-9]*)?(,[A-Za-z0-9._-]+(:[1-9][0-9]*)?)*$")
ALLOCATORS = {"tcmalloc": ("libtcmalloc-minimal4", "libtcmalloc_minimal.so.4"),
              "jemalloc": ("libjemalloc2", "libjemalloc.so.2")}
# ALLOCATOR=pinned: glibc's malloc with its three thresholds fixed. By default glibc raises its mmap threshold
# to the largest block freed (and the trim threshold to twice that), so one arm's large frees change the next
# arm's page faults, and memory freed at the top of the heap goes back to the OS and faults in again next step.
# Setting any of them turns that dynamic adjustment off; all three are set, since a fixed mmap threshold with
# the default 128 KiB trim threshold can be worse than none. 32 MiB is the largest mmap threshold glibc
# accepts on 64-bit (HEAP_MAX_SIZE / 2): a larger value is ignored without a word, and the threshold stays
# dynamic. The harness uses this at bench scale (core/harness/sharing.py allocator_setting; docs/timing.md).
PINNED_GLIBC = (("glibc.malloc.mmap_threshold", 32 << 20), ("glibc.malloc.trim_threshold", 256 << 20),
                ("glibc.malloc.top_pad", 64 << 20))
ALLOCATOR_CHOICES = ("default", "pinned", *ALLOCATORS)


class KnobError(Exception):
    """A knob a launcher cannot use: printed as one `launch: error:` line, exit 2."""


@dataclass
class Knobs:
    """What a launcher reads back: plain shell variables and exported ones (the processes it starts see
    those), in the order they were set."""
    env: Mapping[str, str]
    values: dict[str, str] = field(default_factory=dict)
    exported: dict[str, str] = field(default_factory=dict)

    def get(self, name: str, default: str = "") -> str:
        """The knob as the user set it (an empty value counts as unset, as `${NAME:-default}` does)."""
        return self.env.get(name) or default

    def set(self, name: str, value: str) -> str:
        self.values[name] = value
        return value

    def export(self, name: str, value: str) -> str:
        self.exported[name] = value
        return value

    def shell(self) -> str:
        lines = [f"{name}={shlex.quote(value)}" for name, value in self.values.items()]
        lines += [f"export {name}={shlex.quote(value)}" for name, value in self.exported.items()]
        return "\n".join(lines)


# ---------------------------------------------------------------- single checks

def positive_int(name: str, value: str) -> int:
    if not re.fullmatch(r"[1-9][0-9]*", value):
        raise KnobError(f"{name}={value} is not a positive integer")
    return int(value)


def port(name: str, value: str) -> int:
    if not re.fullmatch(r"[0-9]+", value) or not 1 <= int(value) <= 65535:
        raise KnobError(f"{name}={value} is not a TCP port (1-65535)")
    return int(value)


def ranks_fit_here(name: str, count: int) -> None:
    """More than 4 processes per usable core (NPROC=400) would swamp this host."""
    cores = len(affinity.usable_cpus())
    if count > 4 * cores:
        raise KnobError(f"{name}={count} is more than 4 processes per usable core ({cores} here); use at most "
                        f"{4 * cores}")


def port_free(addr: str, number: int) -> None:
    """Refuse a rendezvous port something on this host already listens on. An address that is not this
    host's (EADDRNOTAVAIL) is not ours to check."""
    bind_to = "" if addr in ("localhost", "127.0.0.1", "0.0.0.0") else addr
    with socket.socket() as sock:
        try:
            sock.bind((bind_to, number))
        except socket.gaierror:
            return
        except OSError as exc:
            if exc.errno == 99:  # EADDRNOTAVAIL: another host's address
                return
            raise KnobError(f"MASTER_PORT={number} is already in use on {addr}; pick another (e.g. "
                            f"MASTER_PORT={number + 1})") from None


def threads(knobs: Knobs, ranks_on_this_node: int) -> int:
    """THREADS (OMP_NUM_THREADS per rank): the user's, else the smallest core slice of the per-rank policy."""
    value = knobs.get("THREADS", str(affinity.threads_per_rank(ranks_on_this_node)))
    knobs.set("THREADS", value)
    knobs.export("OMP_NUM_THREADS", str(positive_int("THREADS", value)))
    return int(value)


def installed(program: str) -> bool:
    path = shutil.which(program)
    return path is not None and os.access(path, os.X_OK)


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


def arg_value(args: Sequence[str], name: str) -> str:
    """The value of --NAME in the accel arguments (`--NAME V` or `--NAME=V`), or ''; for a worker's
    `--worker FILE`, the value its request holds (config/request.py launcher_view)."""
    if requests.FLAG in args:
        try:
            found = requests.from_args(args)
        except ConfigError as error:
            raise KnobError(str(error)) from None
        return requests.launcher_view(found).get(name, "") if found is not None else ""
    for i, word in enumerate(args):
        if word == name:
            return args[i + 1] if i + 1 < len(args) else ""
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return ""


# ---------------------------------------------------------------- per launcher

def local(knobs: Knobs, args: Sequence[str]) -> None:
    """One process: OpenMP runtime, pinning and allocator (the runtime knobs a launcher owns)."""
    count = threads(knobs, 1)
    runtime = knobs.export("OMP_RUNTIME", knobs.get("OMP_RUNTIME", "gnu"))
    bind = knobs.export("OMP_BIND", knobs.get("OMP_BIND", "none"))
    allocator = knobs.export("ALLOCATOR", knobs.get("ALLOCATOR", "default"))
    # numpy (imported for the statistics before torch) loads OpenBLAS, whose pool would start threads before
    # the OpenMP runtime binds this process; training never uses numpy's BLAS, so it stays at one thread.
    knobs.export("OPENBLAS_NUM_THREADS", knobs.get("OPENBLAS_NUM_THREADS", "1"))
    preload = [p for p in knobs.get("LD_PRELOAD").split(":") if p]
    if runtime == "intel":
        if knobs.get("IMAGE"):  # inside an image the environment lives at IMAGE_PREFIX; the run there checks
            iomp = Path(knobs.get("IMAGE_PREFIX", "/opt/venv")) / "lib" / "libiomp5.so"
        else:
            iomp = Path(sys.prefix) / "lib" / "libiomp5.so"
            if not iomp.is_file():
                raise KnobError(f"OMP_RUNTIME=intel but {iomp} does not exist; install intel-openmp into that "
                                "environment (make venv does)")
        preload.insert(0, str(iomp))
        knobs.export("KMP_AFFINITY", knobs.get("KMP_AFFINITY", "granularity=fine,compact,1,0"))
        knobs.export("KMP_BLOCKTIME", knobs.get("KMP_BLOCKTIME", "0"))
    elif runtime != "gnu":
        raise KnobError(f"OMP_RUNTIME={runtime} is not gnu or intel")
    if bind == "pinned":
        if runtime != "gnu":
            raise KnobError("OMP_BIND=pinned is for OMP_RUNTIME=gnu; Intel OpenMP binds with KMP_AFFINITY")
        knobs.export("OMP_PROC_BIND", "TRUE")
        knobs.export("OMP_SCHEDULE", "STATIC")
        knobs.export("GOMP_CPU_AFFINITY", affinity.gomp_list(count))
    elif bind != "none":
        raise KnobError(f"OMP_BIND={bind} is not none or pinned")
    preload = allocator_preload(knobs, allocator) + preload
    if preload:
        knobs.export("LD_PRELOAD", ":".join(preload))
    image(knobs, "here")


def allocator_preload(knobs: Knobs, allocator: str) -> list[str]:
    """ALLOCATOR: the library to preload (tcmalloc, jemalloc), or glibc's thresholds pinned through
    GLIBC_TUNABLES (pinned; the user's other tunables kept), or nothing (default)."""
    if allocator in ALLOCATORS:
        package, name = ALLOCATORS[allocator]
        folders = knobs.get("ALLOCATOR_PATH", f"/usr/lib/{os.uname().machine}-linux-gnu:/usr/lib64:/usr/lib:"
                                              "/usr/local/lib").split(":")
        found = next((Path(d) / name for d in folders if (Path(d) / name).is_file()), None)
        if found is None:
            raise KnobError(f"ALLOCATOR={allocator} but its library is not installed; apt-get install {package}")
        return [str(found)]
    if allocator == "pinned":
        theirs = [item for item in knobs.get("GLIBC_TUNABLES").split(":") if item]
        if clash := [item for item in theirs if item.startswith("glibc.malloc.")]:
            raise KnobError(f"ALLOCATOR=pinned sets glibc's malloc thresholds, but GLIBC_TUNABLES already has "
                            f"{':'.join(clash)}; unset those, or use ALLOCATOR=default to keep your own")
        knobs.export("GLIBC_TUNABLES", ":".join([*theirs, *(f"{name}={value}" for name, value in PINNED_GLIBC)]))
        return []
    if allocator != "default":
        raise KnobError(f"ALLOCATOR={allocator} is not {', '.join(ALLOCATOR_CHOICES[:-1])} or {ALLOCATOR_CHOICES[-1]}")
    return []


def ranks_allocator(knobs: Knobs) -> None:
    """The allocator for a launcher's ranks (they inherit the environment; mpirun passes it with -x)."""
    allocator = knobs.export("ALLOCATOR", knobs.get("ALLOCATOR", "default"))
    preload = [*allocator_preload(knobs, allocator), *(p for p in knobs.get("LD_PRELOAD").split(":") if p)]
    if preload:
        knobs.export("LD_PRELOAD", ":".join(preload))


def torchrun(knobs: Knobs, args: Sequence[str]) -> None:
    """NPROC ranks per node under torchrun, static or c10d rendezvous."""
    nproc = positive_int("NPROC", knobs.set("NPROC", knobs.get("NPROC", "2")))
    ranks_fit_here("NPROC", nproc)
    nnodes = positive_int("NNODES", knobs.set("NNODES", knobs.get("NNODES", "1")))
    node_rank = knobs.set("NODE_RANK", knobs.get("NODE_RANK", "0"))
    if not re.fullmatch(r"[0-9]+", node_rank) or int(node_rank) >= nnodes:
        raise KnobError(f"NODE_RANK={node_rank} must be an integer from 0 to NNODES-1 ({nnodes - 1})")
    restarts = knobs.set("MAX_RESTARTS", knobs.get("MAX_RESTARTS", "0"))
    if not re.fullmatch(r"[0-9]+", restarts):
        raise KnobError(f"MAX_RESTARTS={restarts} is not a non-negative integer")
    addr = knobs.set("MASTER_ADDR", knobs.get("MASTER_ADDR", "127.0.0.1"))
    number = port("MASTER_PORT", knobs.set("MASTER_PORT", knobs.get("MASTER_PORT", "29500")))
    threads(knobs, nproc)
    rdzv = knobs.set("RDZV", knobs.get("RDZV", "static"))
    if rdzv not in ("static", "c10d"):
        raise KnobError(f"RDZV={rdzv} is not static or c10d")
    knobs.set("RDZV_ID", knobs.get("RDZV_ID", "accel"))
    if int(node_rank) == 0:
        port_free(addr, number)
    local_addr = knobs.get("LOCAL_ADDR")
    if rdzv == "c10d" and not local_addr and nnodes > 1 and int(node_rank) == 0:
        local_addr = addr  # node 0 hosts the store: torchrun's hostname guess misses multi-homed hosts
    knobs.set("LOCAL_ADDR", local_addr)
    ranks_allocator(knobs)
    image(knobs, "here")  # torchrun runs inside one container and starts the ranks there


def mpirun(knobs: Knobs, args: Sequence[str]) -> None:
    """NP ranks from Open MPI's mpirun, on this host or across HOSTS."""
    if not installed("mpirun"):
        raise KnobError("mpirun not found; install Open MPI (Debian: openmpi-bin) or use the mpi image")
    np_ = positive_int("NP", knobs.set("NP", knobs.get("NP", "2")))
    number = port("MASTER_PORT", knobs.export("MASTER_PORT", knobs.get("MASTER_PORT", "29500")))
    map_by = knobs.set("MAP_BY", knobs.get("MAP_BY", "slot"))
    if map_by not in ("slot", "node", "core", "socket"):
        raise KnobError(f"MAP_BY={map_by} is not slot, node, core or socket")
    bind_to = knobs.set("BIND_TO", knobs.get("BIND_TO", "none"))
    if bind_to not in ("none", "core", "socket"):
        raise KnobError(f"BIND_TO={bind_to} is not none, core or socket")
    hosts, addr, local_ranks = knobs.set("HOSTS", knobs.get("HOSTS")), knobs.get("MASTER_ADDR"), np_
    names: list[str] = []
    if hosts:
        if not HOSTS_PATTERN.fullmatch(hosts):
            raise KnobError(f"HOSTS={hosts} is not host[:slots][,host[:slots]...] (e.g. node1:8,node2:8)")
        entries = hosts.split(",")
        names = [entry.split(":")[0] for entry in entries]
        addresses = {name: resolve(name, hosts) for name in names}
        addr = addr or addresses[names[0]]
        if ":" in entries[0]:
            local_ranks = int(entries[0].split(":")[1])
    else:
        ranks_fit_here("NP", np_)
    addr = knobs.export("MASTER_ADDR", addr or "127.0.0.1")
    if is_this_host(addr):
        port_free(addr, number)
    threads(knobs, local_ranks)
    ranks_allocator(knobs)
    knobs.set("RANKS_AT", "elsewhere" if hosts else "here")
    image(knobs, knobs.values["RANKS_AT"])  # the host's mpirun starts one container per rank
    if knobs.get("IMAGE") and not knobs.get("ACCEL_PRINT"):
        if hosts:
            image_on_every_host(knobs, names)
        else:
            container(Knobs(knobs.env), ["--check"])


def srun(knobs: Knobs, args: Sequence[str]) -> None:
    """NTASKS SLURM tasks with srun, inside an allocation or asking for one."""
    if not installed("srun"):
        raise KnobError("srun not found; run on a SLURM cluster (Debian: slurm-wlm) or use torchrun.sh")
    ntasks = positive_int("NTASKS", knobs.set("NTASKS", knobs.get("NTASKS", knobs.get("SLURM_NTASKS", "2"))))
    nodes = positive_int("NODES", knobs.set("NODES", knobs.get("NODES", knobs.get("SLURM_JOB_NUM_NODES", "1"))))
    port("MASTER_PORT", knobs.export("MASTER_PORT", knobs.get("MASTER_PORT", "29500")))
    addr = knobs.get("MASTER_ADDR")
    if not addr and knobs.get("SLURM_JOB_NODELIST"):
        shown = subprocess.run(["scontrol", "show", "hostnames", knobs.get("SLURM_JOB_NODELIST")],
                               capture_output=True, text=True, check=False)
        addr = next(iter(shown.stdout.split()), "")
        if not addr:
            raise KnobError("could not find the first node of the allocation; set MASTER_ADDR")
    knobs.export("MASTER_ADDR", addr or socket.gethostname())
    threads(knobs, -(-ntasks // nodes))
    ranks_allocator(knobs)
    image(knobs, "elsewhere")  # the host's srun starts one container per task, on the allocation's nodes
    if knobs.get("IMAGE") and not knobs.get("ACCEL_PRINT"):
        if knobs.get("SLURM_JOB_ID"):  # once per node of the allocation, before any task starts
            extra = shlex.split(knobs.get("SRUN_ARGS"))
            per_node(knobs, ["srun", "--nodes", str(nodes), "--ntasks", str(nodes), "--ntasks-per-node", "1",
                             "--export=ALL", *extra, str(REPO / "launch" / "_container.sh"), "--check"],
                     "srun", lambda output: "")
        else:
            container(Knobs(knobs.env), ["--check"])  # no allocation yet: this host


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
    knobs.set("PASS_NAMES", " ".join(passed_names(knobs.env)))
    if not (check_only or printing):  # after the checks: nothing written on error
        try:
            Path(results).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise KnobError(f"cannot create the results folder {results} ({exc.strerror})") from None


LAUNCHERS: dict[str, Callable[[Knobs, Sequence[str]], None]] = {
    "local": local, "torchrun": torchrun, "mpirun": mpirun, "srun": srun, "container": container}


# ---------------------------------------------------------------- helpers of the checks above

def resolve(name: str, hosts: str) -> str:
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    try:
        return socket.getaddrinfo(name, None, socket.AF_INET)[0][4][0]
    except OSError:
        raise KnobError(f"HOSTS={hosts}: host {name} does not resolve") from None


def is_this_host(addr: str) -> bool:
    """An address this host holds (a port there is ours to check)."""
    if addr == "localhost" or addr.startswith("127."):
        return True
    with socket.socket() as sock:
        try:
            sock.bind((addr, 0))
        except OSError:
            return False
    return True


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


def per_node(knobs: Knobs, command: list[str], what: str, where: Callable[[str], str]) -> None:
    """Run a `_container.sh --check` on every node; the first node's refusal becomes this one's."""
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO)
    if done.returncode == 0:
        return
    output = done.stdout + done.stderr
    found = re.search(r"^.*?launch: error: (.*)$", output, re.M)
    if found:
        raise KnobError(where(found.group(0)) + found.group(1))
    last = output.strip().splitlines()[-1] if output.strip() else f"exit {done.returncode}"
    raise KnobError(f"IMAGE={knobs.get('IMAGE')}: the pre-flight {what} failed ({last}); check that every node "
                    "is reachable (RSH_AGENT, ssh)")


def resolve_knobs(launcher: str, args: Sequence[str], env: Mapping[str, str] | None = None) -> Knobs:
    """The knobs of `launcher` for these accel arguments, checked; KnobError for the first bad one."""
    knobs = Knobs(dict(os.environ) if env is None else env)
    if not args and launcher != "container":
        raise KnobError(USAGE[launcher])
    LAUNCHERS[launcher](knobs, list(args))
    return knobs


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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["start-failure"] and len(args) == 4:  # launch/_container.sh, after the engine refused
        line = start_failure(args[1], int(args[2]), Path(args[3]).read_text(errors="replace"))
        if line:
            print(line, file=sys.stderr)
        return 0
    if not args or args[0] not in LAUNCHERS:
        print(f"launch: error: usage: python -m pipelines.core.distributed.launchers {{{','.join(LAUNCHERS)}}} "
              "ACCEL-ARGS...", file=sys.stderr)
        return 2
    try:
        print(resolve_knobs(args[0], args[1:]).shell())
    except KnobError as exc:
        print(f"launch: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
