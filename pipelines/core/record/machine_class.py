"""Which runs' times may be compared, read from the environment fingerprint a record carries
(record/envinfo.py).

One key, two scopes. The machine class (`software=False`): CPU model, family/model and vector units (a VM's
generic model name can hide another generation), logical CPUs, GPUs; a committed reference must share it
with a run for their ratios to drift against each other (report/drift.py). With the software on it
(`software=True`): torch, the image's target and lock as well, in the order `FIELDS` names them; every
record behind one ratio shares it (`difference`), and the report lists one line per such key.
"""

from __future__ import annotations

from typing import Any, Mapping

FIELDS = ("CPU model", "CPU family/model", "CPU vector units", "logical CPUs", "torch", "image target",
          "image lock", "GPUs")
SOFTWARE = ("torch", "image target", "image lock")  # the FIELDS that are not the machine class
CLASS_WORDS = "CPU model, family/model, vector units, logical CPUs and GPUs"  # the class, in a sentence


def key(env: Mapping[str, Any], software: bool) -> tuple:
    """The values of FIELDS in an environment fingerprint; without `software`, the machine class only."""
    image = env.get("image") or {}
    values = (env.get("cpu_model"), env.get("cpu_id"), env.get("cpu_isa"), env.get("logical_cpus"),
              env.get("torch"), image.get("target"), image.get("lock_sha256"),
              tuple(g.get("name") for g in env.get("gpus") or ()))
    return tuple(value for name, value in zip(FIELDS, values) if software or name not in SOFTWARE)


def difference(records: list[dict[str, Any]]) -> str:
    """'' when every record ran on one machine/torch/image, else what differs."""
    keys = {key(r["env"], software=True) for r in records}
    if len(keys) < 2:
        return ""
    parts = []
    for index, name in enumerate(FIELDS):
        values = sorted({str(k[index]) for k in keys})
        if len(values) > 1:
            parts.append(f"{name} {' vs '.join(values)}")
    return "runs differ in " + "; ".join(parts)


def text(machine_class: tuple) -> str:
    """A machine class (`key(env, software=False)`) as one phrase."""
    model, cpu_id, isa, cpus, gpus = machine_class
    return f"{model} ({cpu_id or 'family/model not recorded'}, {isa or 'vector units not recorded'}; " \
           f"{cpus} logical CPUs, {', '.join(gpus) or 'no GPU'})"


def this_machine() -> tuple:
    """This machine's class, as a record of a run here would carry it."""
    import os

    from pipelines.core.record import envinfo  # here, not at the top: envinfo imports torch

    env = {"cpu_model": envinfo.cpu_model(), **envinfo.cpu_class(), "logical_cpus": os.cpu_count(),
           "gpus": envinfo.gpus()}
    return key(env, software=False)
