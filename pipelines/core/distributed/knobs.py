"""A launcher's knobs: what a launch script reads back (`Knobs`), the one error a bad knob is (`KnobError`),
and the checks and defaults every launcher shares: positive counts, ports (a free one on this host), ranks
that fit the usable cores, threads per rank, the allocator (a preloaded library or glibc's thresholds pinned),
the value of an accel argument a knob depends on, and each launch script's usage line.

Each check is one line naming the knob and its fix. Standard library only: with IMAGE the host may have a bare
python3 (the image holds torch).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from pipelines.core.distributed import affinity
from pipelines.core.config import request as requests
from pipelines.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
USAGE = {
    "local": "usage: launch/local.sh ACCEL-ARGS... (e.g. run ID --scale bench)",
    "torchrun": "usage: launch/torchrun.sh ACCEL-ARGS... (e.g. run ID --scale smoke)",
    "mpirun": "usage: launch/mpirun.sh ACCEL-ARGS... (e.g. run ID --scale smoke)",
    "srun": "usage: launch/srun.sh ACCEL-ARGS... (e.g. run ID --scale smoke)",
    "container": "usage: IMAGE=x.sif|podman:TAG|docker:TAG launch/_container.sh COMMAND [ARGS...] | --check",
}
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


class KnobError(ConfigError):
    """A knob a launcher cannot use: printed as one `launch: error:` line by the scripts and `accel launch`,
    as any ConfigError (one line, exit 2) where an `accel run` resolves a launcher's knobs itself."""


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


DEFAULT_PORT = 29500  # torchrun's own default: what every node of a several-host run agrees on unasked


def _bind_address(addr: str) -> str:
    """Where to bind to ask about a port of `addr`: every interface for the loopback names, else `addr`."""
    return "" if addr in ("localhost", "127.0.0.1", "0.0.0.0") else addr


def rendezvous_port(knobs: Knobs, addr: str, one_host: bool) -> int:
    """MASTER_PORT as set; unset, a free port on this host when every rank runs here (as torchrun --standalone
    picks one: two runs on one machine at once do not meet on 29500), else DEFAULT_PORT."""
    number = port("MASTER_PORT", knobs.get("MASTER_PORT", str(DEFAULT_PORT)))
    if knobs.get("MASTER_PORT") or not one_host:
        return number
    with socket.socket() as sock:
        try:
            sock.bind((_bind_address(addr), 0))
        except OSError:  # an address that is not this host's: it is not ours to choose a port on
            return number
        return sock.getsockname()[1]


def port_free(addr: str, number: int) -> None:
    """Refuse a rendezvous port something on this host already listens on. An address that is not this
    host's (EADDRNOTAVAIL) is not ours to check."""
    with socket.socket() as sock:
        try:
            sock.bind((_bind_address(addr), number))
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


def arg_value(args: Sequence[str], name: str) -> str:
    """The value of --NAME in the accel arguments (`--NAME V` or `--NAME=V`; a NAME without dashes: the
    pipeline option `-o NAME=V`), or ''; for a worker's `--worker FILE`, the value its request holds
    (config/request.py launcher_view)."""
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
        if not name.startswith("-") and word in ("-o", "--option") and i + 1 < len(args) and \
                args[i + 1].startswith(name + "="):  # a pipeline option, -o NAME=V
            return args[i + 1].split("=", 1)[1]
    return ""


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
