"""`accel launch`'s own refusals, from the parsed `accel run` options (never from the raw words), before it
hands the run to launch/<launcher>.sh.

The launch path is one direction: `make ID` -> `accel launch` (parses and checks the accel arguments here,
once) -> launch/<launcher>.sh (builds the command line; its knobs are checked by distributed/launchers.py, the
accel arguments by `accel preflight` as every rank will) -> torchrun / mpirun / srun / python -> each rank's
`accel run`. What is refused here is what only the entry and this host can say before a launcher starts:
a GPU entry on a machine without one, a backend library this environment lacks, a missing launcher, and
a PYTHON that cannot run.
"""

from __future__ import annotations

import importlib.util
import os
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
    if "gpu" in entry.requires and not any(Path("/dev").glob("nvidia[0-9]*")) and not options.get("device"):
        raise NotRunnable(f"{entry.id} needs NVIDIA GPUs and this machine has none (/dev/nvidia*); run it on a "
                          f"GPU machine, or smoke-test its code path on CPU: accel {command} {entry.id} "
                          f"{' '.join(experiments.cpu_smoke_args(entry))}")
    backend_chosen = bool(chosen_backend(tuple(options.get("option_items") or ())))
    in_image = bool(env.get("IMAGE"))  # the image's libraries are for its ranks to judge
    if "ccl" in entry.requires and not in_image and not backend_chosen \
            and importlib.util.find_spec("oneccl_bindings_for_pytorch") is None:
        raise NotRunnable(f"{entry.id} needs oneCCL (oneccl_bindings_for_pytorch), which only the cpu-intel image "
                          "provides when built where Intel's wheel index is reachable (containers/cpu-intel/"
                          "README.md); run it with IMAGE=<such an image> or compare with -o backend=gloo")
    if "mpi-backend" in entry.requires and not in_image and not backend_chosen:
        from pipelines.core.distributed.ranks import mpi_backend_missing  # torch: only for the entries that need it

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
