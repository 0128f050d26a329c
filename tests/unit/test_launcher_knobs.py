"""The launchers' knobs are checked in Python (pipelines/core/distributed/launchers.py and the knobs.py,
hosts.py and containers.py it uses), and the launch scripts only build a command line. The refusals run here
in-process; tests/refusals/test_bad_inputs.py proves a handful through the real scripts."""

import re
import shlex
import socket

import pytest

from conftest import REPO
from pipelines.core.distributed import affinity, hosts, launchers
from pipelines.core.harness import launch
from pipelines.core.distributed.containers import passed_names
from pipelines.core.distributed.knobs import PINNED_GLIBC, KnobError, Knobs

ARGS = ["run", "ch8-ddp-template", "--scale", "smoke"]


def resolved(launcher: str, **env: str) -> Knobs:
    return launchers.resolve_knobs(launcher, ARGS, {"PATH": "/usr/bin:/bin", **env})


def refused(launcher: str, **env: str) -> str:
    with pytest.raises(KnobError) as caught:
        resolved(launcher, **env)
    return str(caught.value)


@pytest.mark.parametrize("launcher,env,needle", [
    ("local", {"THREADS": "0"}, "THREADS=0 is not a positive integer"),
    ("local", {"OMP_RUNTIME": "llvm"}, "OMP_RUNTIME=llvm is not gnu or intel"),
    ("local", {"OMP_BIND": "tight"}, "OMP_BIND=tight is not none or pinned"),
    ("local", {"OMP_BIND": "pinned", "OMP_RUNTIME": "intel", "IMAGE": "podman:x", "ACCEL_PRINT": "1"},
     "OMP_BIND=pinned is for OMP_RUNTIME=gnu"),
    ("local", {"ALLOCATOR": "mimalloc"}, "ALLOCATOR=mimalloc is not default, pinned, tcmalloc or jemalloc"),
    ("local", {"ALLOCATOR": "jemalloc", "ALLOCATOR_PATH": "/nonexistent"}, "apt-get install libjemalloc2"),
    ("local", {"IMAGE": "oci:x"}, "IMAGE=oci:x: unknown scheme"),
    ("local", {"IMAGE": "podman:"}, "IMAGE=podman: names no image"),
    ("local", {"IMAGE": "/nonexistent.sif"}, "IMAGE=/nonexistent.sif does not exist"),
    ("torchrun", {"NPROC": "0"}, "NPROC=0 is not a positive integer"),
    ("torchrun", {"NPROC": "100000"}, "is more than 4 processes per usable core"),
    ("torchrun", {"NNODES": "2", "NODE_RANK": "2"}, "NODE_RANK=2 must be an integer from 0 to NNODES-1 (1)"),
    ("torchrun", {"MAX_RESTARTS": "-1"}, "MAX_RESTARTS=-1 is not a non-negative integer"),
    ("torchrun", {"NNODES": "2:1", "RDZV": "c10d"}, "NNODES=2:1 must be MIN:MAX with 1 <= MIN <= MAX (e.g. 1:2)"),
    ("torchrun", {"NNODES": "1:x", "RDZV": "c10d"}, "NNODES=1:x must be MIN:MAX with 1 <= MIN <= MAX"),
    ("torchrun", {"NNODES": "1:2"}, "NNODES=1:2 (elastic) needs RDZV=c10d"),
    ("torchrun", {"NNODES": "1:2", "NODE_RANK": "2", "RDZV": "c10d"}, "NODE_RANK=2 must be an integer from 0 to"),
    ("torchrun", {"MASTER_PORT": "70000"}, "MASTER_PORT=70000 is not a TCP port"),
    ("torchrun", {"RDZV": "etcd"}, "RDZV=etcd is not static or c10d"),
    ("container", {"IMAGE": "podman:x", "ACCEL_PRINT": "1", "GPUS": "maybe"}, "GPUS=maybe is not auto, yes or no"),
])
def test_a_bad_knob_is_one_line_naming_it(launcher, env, needle):
    assert needle in refused(launcher, **env)


def test_no_accel_arguments_is_the_usage_line():
    with pytest.raises(KnobError, match="usage: launch/torchrun.sh"):
        launchers.resolve_knobs("torchrun", [], {})


def test_a_port_in_use_is_refused_on_node_0_only():
    with socket.socket() as held:
        held.bind(("", 0))
        held.listen()
        port = str(held.getsockname()[1])
        assert f"MASTER_PORT={port} is already in use" in refused("torchrun", MASTER_PORT=port)
        resolved("torchrun", MASTER_PORT=port, NNODES="2", NODE_RANK="1")  # node 1 only connects to it


def test_an_unset_port_is_a_free_one_when_every_rank_is_here_and_29500_across_hosts():
    launchers_here = ("torchrun", "mpirun") if hosts.installed("mpirun") else ("torchrun",)
    for launcher in launchers_here:
        knobs = resolved(launcher)
        chosen = int(knobs.values.get("MASTER_PORT") or knobs.exported["MASTER_PORT"])
        with socket.socket() as probe:
            probe.bind(("", chosen))  # free when chosen: the run's store binds it next
    assert resolved("torchrun", NNODES="2", NODE_RANK="1").values["MASTER_PORT"] == "29500"
    assert resolved("torchrun", MASTER_PORT="29577").values["MASTER_PORT"] == "29577"


def test_defaults_follow_the_per_rank_core_policy_and_export_what_the_ranks_read():
    knobs = resolved("torchrun", NPROC="2")
    assert knobs.values["NPROC"] == "2" and knobs.values["RDZV"] == "static"
    assert knobs.exported["OMP_NUM_THREADS"] == str(affinity.threads_per_rank(2))
    assert resolved("torchrun", NPROC="2", THREADS="3").exported["OMP_NUM_THREADS"] == "3"
    local = resolved("local", OMP_BIND="pinned", THREADS="1")
    assert local.exported["GOMP_CPU_AFFINITY"] == affinity.gomp_list(1)
    assert local.exported["OPENBLAS_NUM_THREADS"] == "1" and local.exported["OMP_PROC_BIND"] == "TRUE"


def test_an_elastic_node_count_plans_for_its_maximum():
    knobs = resolved("torchrun", RDZV="c10d", NNODES="1:3", NODE_RANK="2", NPROC="1")
    assert knobs.values["NNODES"] == "1:3"  # torchrun's --nnodes MIN:MAX
    assert launch.world_of("torchrun", knobs) == (3, 2, True)


def test_c10d_node_0_of_several_names_its_own_address():
    knobs = resolved("torchrun", RDZV="c10d", NNODES="2", MASTER_ADDR="127.0.0.1")
    assert knobs.values["LOCAL_ADDR"] == "127.0.0.1"


def test_the_shell_assignments_survive_any_value():
    knobs = Knobs({})
    knobs.set("A", "x y'z")
    knobs.export("B", "$(touch /tmp/never)")
    lines = knobs.shell().splitlines()
    assert shlex.split(lines[0]) == ["A=x y'z"] and shlex.split(lines[1]) == ["export", "B=$(touch /tmp/never)"]


def test_the_container_passes_exactly_the_knob_prefixes():
    names = passed_names({"OMP_NUM_THREADS": "1", "HOME": "/root", "ACCEL_PRINT": "1", "NCCL_DEBUG": "x"})
    assert names == ["NCCL_DEBUG", "OMP_NUM_THREADS"]


SCRIPTS = sorted((REPO / "launch").glob("*.sh"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_launch_scripts_only_build_a_command_line(script):
    """No refusal of their own (every check is in distributed/launchers.py and the modules it uses), and short
    enough to read and copy: at most 50 lines besides comments."""
    code = [line for line in script.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(code) <= 50, f"{script.name}: {len(code)} lines of code"
    refusals = [line for line in code if re.search(r"\bdie\b|launch: error|exit [1-9]", line)]
    assert not refusals, refusals


@pytest.mark.parametrize("launcher", ["local", "torchrun"])
def test_allocator_pinned_fixes_glibc_s_three_thresholds_for_every_process(launcher):
    """ALLOCATOR=pinned (what bench-scale comparisons use): GLIBC_TUNABLES with the mmap threshold at 32 MiB
    (glibc ignores a larger one without a word), the trim threshold and the top pad; the user's other
    tunables are kept, and a malloc tunable of their own is refused instead of silently overridden."""
    knobs = resolved(launcher, ALLOCATOR="pinned", GLIBC_TUNABLES="glibc.rtld.optional_static_tls=1024")
    tunables = knobs.exported["GLIBC_TUNABLES"].split(":")
    assert tunables == ["glibc.rtld.optional_static_tls=1024", "glibc.malloc.mmap_threshold=33554432",
                        "glibc.malloc.trim_threshold=268435456", "glibc.malloc.top_pad=67108864"]
    assert "LD_PRELOAD" not in knobs.exported
    assert "GLIBC_TUNABLES already has glibc.malloc.trim_threshold=1" in refused(
        launcher, ALLOCATOR="pinned", GLIBC_TUNABLES="glibc.malloc.trim_threshold=1")


def test_the_record_names_the_allocator_s_settings():
    from pipelines.core.record import envinfo

    pinned = envinfo.allocator_settings("libc", {"ALLOCATOR": "pinned", "GLIBC_TUNABLES": ":".join(
        f"{name}={value}" for name, value in PINNED_GLIBC)})
    assert pinned["glibc_malloc_tunables"] == {"mmap_threshold": "33554432", "trim_threshold": "268435456",
                                               "top_pad": "67108864"}
    assert pinned["text"] == "pinned (glibc: mmap_threshold 32 MiB, trim_threshold 256 MiB, top_pad 64 MiB)"
    assert envinfo.allocator_settings("libc", {})["text"] == "default glibc (dynamic mmap/trim thresholds)"
    assert envinfo.allocator_settings("jemalloc", {"ALLOCATOR": "jemalloc"})["text"] == "jemalloc (preloaded)"


def test_the_checkpoint_folder_is_mounted_writable_into_the_container():
    """-o checkpoint_dir must outlive the container (a requeued job resumes from it): the wrapper gets its
    absolute path to mount (launch/_container.sh), relative paths taken from the checkout."""
    env = {"PATH": "/usr/bin:/bin", "IMAGE": "podman:x", "ACCEL_PRINT": "1"}
    knobs = launchers.resolve_knobs("container", [*ARGS, "-o", "checkpoint_dir=ckpt/a"], env)
    assert knobs.values["CHECKPOINTS"] == str(REPO / "ckpt" / "a")
    assert launchers.resolve_knobs("container", ARGS, env).values["CHECKPOINTS"] == ""
