"""`accel launch`'s own refusals, from the parsed `accel run` options (never from the raw words), before it
hands the run to launch/<launcher>.sh.

The launch path is one direction: `make ID` -> `accel launch` (one Python process: parses the accel arguments,
resolves the launcher's knobs with distributed/launchers.py and preflights the run as every rank will, in
`prepare`; then shows the plan) -> launch/<launcher>.sh (only assembles the command line from the checked
knobs; started by hand, it asks launchers.py and `accel preflight` itself) -> torchrun / mpirun / srun /
python -> each rank's `accel run`. What `refuse` refuses is what only the entry and this host can say before a
launcher starts: a GPU entry on a machine without one, a backend library this environment lacks, a missing
launcher, and a PYTHON that cannot run.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from pipelines.core.errors import ConfigError, NotRunnable
from pipelines.core.config import experiments

REPO = Path(__file__).resolve().parents[3]


def chosen_backend(option_items: tuple[str, ...]) -> str:
    """The backend an `-o backend=NAME` item chose, or ''."""
    return next((item.split("=", 1)[1] for item in option_items if item.split("=", 1)[0].strip() == "backend"), "")


def refuse(entry: experiments.Experiment, options: Mapping[str, Any], env: Mapping[str, str],
           command: str = "launch") -> Path:
    """The launcher script for `entry`, or NotRunnable / ConfigError with the one line that says why not.
    `options`: `accel run`'s parsed parameters (device, option_items); `command`: the user's (run, launch),
    which the suggested commands repeat."""
    device = options.get("device")
    wants_gpu = device == "cuda" or ("gpu" in entry.requires and not device)
    if wants_gpu and not any(Path("/dev").glob("nvidia[0-9]*")):  # before the plan and any round
        asked = ("asks for --device cuda but this machine has no NVIDIA GPU" if device == "cuda" else
                 "needs NVIDIA GPUs and this machine has none")
        raise NotRunnable(f"{entry.id} {asked} (/dev/nvidia*); run it on a "
                          f"GPU machine, or smoke-test its code path on CPU: accel {command} {entry.id} "
                          f"{' '.join(experiments.cpu_smoke_args(entry))}")
    backend_chosen = bool(chosen_backend(tuple(options.get("option_items") or ())))
    in_image = bool(env.get("IMAGE"))  # the image's libraries are for its ranks to judge
    if "ccl" in entry.requires and not in_image and not backend_chosen \
            and not any(importlib.util.find_spec(name) for name in ("oneccl_bindings_for_pytorch", "accel_ccl")):
        raise NotRunnable(f"{entry.id} needs oneCCL under torch.distributed, and this environment has neither "
                          "accel's binding (backends/ccl, built by `make venv`) nor Intel's; rebuild it with "
                          "`make venv`, or compare with -o backend=gloo")
    if "mpi-backend" in entry.requires and not in_image and not backend_chosen:
        from pipelines.core.distributed.backends import mpi_backend_missing  # torch: only for the entries that need it

        if missing := mpi_backend_missing():
            raise NotRunnable(f"{entry.id} {missing}")
    script = REPO / "launch" / f"{entry.launcher}.sh"
    if not script.is_file():
        raise NotRunnable(f"launcher {script} for {entry.id} does not exist")
    python = env.get("PYTHON")
    if python and not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise ConfigError(f"PYTHON={python} is not an executable file; unset PYTHON (the launchers then use "
                          ".venv/bin/python) or point it at a Python with this package installed")
    return script


@dataclass(frozen=True)
class Ready:
    """A launcher script about to start, everything checked: `env` is the script's environment (the catalog's
    knobs, the user's, and CHECKED_ENV with the knob assignments the script would have asked Python for)."""
    script: Path
    env: dict[str, str]
    timeout_s: float


CHECKED_ENV = "ACCEL_CHECKED_KNOBS"  # launch/_common.sh: evaluated instead of resolve_knobs and preflight


def world_of(launcher: str, knobs) -> tuple[int, int, bool]:
    """(processes in the whole run, this node's first rank, whether they start on this host) from a
    launcher's resolved knobs: what launch/<launcher>.sh passes its `preflight`."""
    values = knobs.values
    if launcher == "torchrun":
        nproc = int(values["NPROC"])
        return nproc * int(values["NNODES"].split(":")[-1]), int(values["NODE_RANK"]) * nproc, True  # MIN:MAX
    if launcher == "mpirun":
        return int(values["NP"]), 0, values["RANKS_AT"] == "here"
    if launcher == "srun":
        return int(values["NTASKS"]), 0, False
    return 1, 0, True


def checks_here(env: Mapping[str, str]) -> bool:
    """Whether the script would run its checks with this very Python (PYTHON unset or this environment's): a
    knob such as OMP_RUNTIME=intel looks for libiomp5 in the checking interpreter's prefix, so a launcher
    that runs another Python (PYTHON=.venv-ipex/bin/python) checks there itself."""
    python = env.get("PYTHON") or (str(REPO / ".venv" / "bin" / "python")
                                   if (REPO / ".venv" / "bin" / "python").exists() and not env.get("IMAGE") else "")
    if not python:
        return False
    return Path(os.path.abspath(python)).parent.parent == Path(sys.prefix)


def prepare(entry: experiments.Experiment, the_plan, options: Mapping[str, Any], accel_args: list[str],
            env: Mapping[str, str], printing: bool = False) -> Ready:
    """`accel launch`'s one Python start before its launcher: the script's knobs resolved and the run's
    arguments preflighted here, in this process, so launch/<launcher>.sh only assembles its command line.
    KnobError is the launcher's own refusal (`launch: error:`); ConfigError / NotRunnable as everywhere.

    `options`: the parsed `accel run` parameters of `accel_args` (`run ID ...`); `printing`: `--print`
    (missing data is a line of the plan, not a refusal)."""
    from pipelines.core.distributed import launchers
    from pipelines.core.harness import refusals

    script = refuse(entry, options, env)
    script_env = {**env, **({"ACCEL_PRINT": "1"} if printing else {})}
    if not checks_here(script_env):  # the script asks its own interpreter, as when started by hand
        return Ready(script, script_env, float("nan"))
    knobs = launchers.resolve_knobs(entry.launcher, accel_args, script_env)
    world, first_rank, ranks_here = world_of(entry.launcher, knobs)
    # the ranks' own runtime (OMP_RUNTIME, ALLOCATOR) is loaded by the launcher: each rank checks it itself
    timeout_s = refusals.preflight(the_plan, world, first_rank, capabilities=ranks_here and not env.get("IMAGE"),
                                   runtime=False, data=not printing)
    checked = "\n".join([knobs.shell(), f"TIMEOUT_S={timeout_s:g}",
                         f"RUN_RESULTS={shlex.quote(str(the_plan.configs[0].results_dir))}"])
    return Ready(script, {**script_env, CHECKED_ENV: checked}, timeout_s)
