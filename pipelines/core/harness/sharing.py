"""Which arms may share one process, and why the others may not.

Why share: on a shared VM most of the noise sits between processes (where the threads landed, the memory
layout, the allocator's state, the host's load that minute), and a ratio of arms measured in different
processes carries all of it (20-45 % between two processes of the same arm on the 2-core machines these
pipelines are checked on). Arms measured in one process, in short interleaved blocks, see the same
process; only what differs between them remains in their ratio (docs/timing.md).

Two arms share a process when nothing that is fixed at a process's start, or that a pipeline sets for the
whole process, differs between them:
- the launcher and its rank count (torchrun ranks are processes of their own), the image, the device
  and the capabilities the entry needs;
- the runtime knobs the launcher sets before Python starts (OpenMP runtime and binding, the allocator,
  Intel OpenMP's KMP settings);
- the pipeline's process-wide options (`Pipeline.process_options`: intra-op threads, matmul precision,
  cuDNN flags): a value set for one arm would hold for every arm of the process;
- DataLoader workers: they are processes beside the main one, competing for its cores between blocks;
- a memory figure measured as the process's peak: one process's peak is no single arm's
  (`Pipeline.separable_memory` says when the pipeline measures its arm apart, e.g. autograd's saved
  tensors);
- a Measurement (a profile, a search) is not a training loop and is not interleaved.

Arms that share a process also need an allocator no arm can retune for another (glibc moves its mmap and
trim thresholds to the largest buffer freed); that is the harness's allocator setting, decided for the
whole comparison (`allocator_setting`), not here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pipelines.core.harness.pipeline import Measurement
from pipelines.core.harness.plan import Plan
from pipelines.core.config import experiments
from pipelines.core.config.runconfig import RunConfig

# The launcher knobs fixed at process start, with the launchers' own defaults (distributed/launchers.py local()).
RUNTIME_DEFAULTS = {"OMP_RUNTIME": "gnu", "OMP_BIND": "none", "ALLOCATOR": "default"}
INTEL_DEFAULTS = {"KMP_AFFINITY": "granularity=fine,compact,1,0", "KMP_BLOCKTIME": "0"}  # the launcher's
MEMORY_METRICS = ("memory_ratio", "stated_memory_factor_x")


Member = tuple[Plan, RunConfig]  # one arm of a comparison: its entry's plan and the arm's resolved config


@dataclass
class Group:
    """Arms measured in one process per round (one arm: a process of its own); `why` says what keeps this
    group apart from the others, in words, once per differing property."""

    key: tuple
    members: list[Member] = field(default_factory=list)
    serves: list[str] = field(default_factory=list)  # a solo baseline's group: the lone arms it is paired with

    @property
    def shared(self) -> bool:
        return len(self.members) > 1 and self.key[0] == "shared"

    @property
    def ids(self) -> list[str]:
        return list(dict.fromkeys(cfg.experiment for _, cfg in self.members))

    @property
    def labels(self) -> list[str]:
        return [str(cfg.arm) for _, cfg in self.members]


def runtime_knobs(entry: experiments.Experiment, env: Mapping[str, str] = {}) -> dict[str, str]:
    """The process-start knobs this entry runs under: the user's environment, else the catalog's, else the
    launcher's default (KMP_* only count under Intel OpenMP)."""
    knobs = {name: env.get(name) or entry.knobs.get(name) or default for name, default in RUNTIME_DEFAULTS.items()}
    if knobs["OMP_RUNTIME"] == "intel":
        knobs.update({name: env.get(name) or entry.knobs.get(name) or default
                      for name, default in INTEL_DEFAULTS.items()})
    return knobs


def _memory_per_process(the_plan: Plan) -> bool:
    """True when the entry publishes a memory figure that this pipeline measures as a process peak."""
    return not getattr(the_plan.pipeline, "separable_memory", False) and any(
        fig.metric in MEMORY_METRICS for fig in the_plan.experiment.published)


def process_key(member: Member, env: Mapping[str, str] = {}, share: bool = True) -> tuple:
    """Equal keys: the arms may share a process. The first element says the kind: "shared" (a training
    arm of the local launcher), "alone" (its own process each round), "launch" (its launcher's ranks).
    `share=False` (--share none) gives every training arm a process of its own."""
    the_plan, cfg = member
    entry, pipeline = the_plan.experiment, the_plan.pipeline
    opts = cfg.options
    process_wide = pipeline.process_values(cfg)
    ranks = getattr(opts, "ranks", None)
    common = (entry.target, cfg.device, tuple(sorted(entry.requires)), tuple(sorted(runtime_knobs(entry, env).items())))
    if entry.launcher != "local":
        return ("launch", entry.launcher, entry.id, ranks, *common)
    if isinstance(pipeline, Measurement):
        return ("measurement", entry.id, *common)
    if cfg.num_workers > 0 or _memory_per_process(the_plan) or not share:
        return ("alone", str(cfg.arm), *common)
    return ("shared", *common, process_wide)


def why_apart(member: Member, env: Mapping[str, str] = {}) -> str:
    """Why this arm does not share a process with arms of the common environment, in a few words."""
    the_plan, cfg = member
    entry = the_plan.experiment
    if entry.launcher != "local":
        return f"its ranks are processes of launch/{entry.launcher}.sh"
    if isinstance(the_plan.pipeline, Measurement):
        return "a measurement, not a training loop"
    if cfg.num_workers > 0:
        return f"{cfg.num_workers} DataLoader worker processes would compete for the cores between blocks"
    if _memory_per_process(the_plan):
        return "its memory figure is a process peak, which a shared process cannot give one arm"
    return ""


def members(plans: Sequence[Plan]) -> list[Member]:
    """Every arm of the plans, in order."""
    return [(the_plan, cfg) for the_plan in plans for cfg in the_plan.configs]


def groups(plans: Sequence[Plan], env: Mapping[str, str] = {}, share: bool = True) -> list[Group]:
    """The plans' arms by process, in the order given (a group's place is its first arm's), then a solo
    group for each baseline that shares a process while an arm compared with it cannot (`solo_baselines`)."""
    out: dict[tuple, Group] = {}
    for member in members(plans):
        key = process_key(member, env, share)
        out.setdefault(key, Group(key)).members.append(member)
    return solo_baselines(list(out.values()))


def solo_baselines(found: list[Group]) -> list[Group]:
    """`found` plus, for each arm that runs alone (its own process, or its launcher's ranks) whose baseline
    shares a process with other arms, a group holding that baseline alone: the baseline's process of each
    round then measures it as the lone arm is measured (blocks back to back, nothing dropped, no other
    arm's working set between them), and the round pairs the two (stats/record_pairing.py). Without it, a
    ratio would divide a lone arm by a baseline measured among switches to other arms."""
    from pipelines.core.stats.pairing import declared_baseline

    home = {(cfg.experiment, cfg.variant): group for group in found for _, cfg in group.members}
    lone = [(declared_baseline(p.experiment, c.variant), str(c.arm)) for g in found
            if not g.shared and g.key[0] != "measurement" for p, c in g.members]
    solos: dict[tuple[str, str], Group] = {}
    for base, _ in lone:
        shared = home.get(base) if base else None
        if shared is not None and shared.shared and base not in solos:
            member = next(m for m in shared.members if (m[1].experiment, m[1].variant) == base)
            solos[base] = Group(("solo", str(member[1].arm), *shared.key[1:]), [member],
                                serves=[arm for b, arm in lone if b == base])
    return found + list(solos.values())


def differences(group: Group, others: Sequence[Group], env: Mapping[str, str] = {}) -> str:
    """What sets this group apart: its own reason, else the runtime knobs or process-wide options in which it
    differs from the largest other group."""
    own = why_apart(group.members[0], env)
    if own:
        return own
    rivals = [g for g in others if g is not group and g.key[0] in ("shared", "alone")]  # local training arms
    if not rivals:
        return ""
    rival = max(rivals, key=lambda g: len(g.members))
    mine, theirs = _environment(group.members[0], env), _environment(rival.members[0], env)
    changed = [f"{name} {mine[name]} (vs {theirs[name]})" for name in mine
               if name in theirs and mine[name] != theirs[name]]
    return ", ".join(changed) or "another process environment"


def _environment(member: Member, env: Mapping[str, str]) -> dict[str, Any]:
    """What a member's process is set up with: its launcher's knobs, the technique's process settings, the
    device and the image."""
    the_plan, cfg = member
    settings: dict[str, Any] = {k: v for k, v in runtime_knobs(the_plan.experiment, env).items()}
    settings.update(the_plan.pipeline.process_values(cfg))
    settings.update(device=cfg.device, image=the_plan.experiment.target)
    return settings


ALLOCATOR_CHOICES = ("auto", "pinned", "default")
PINNED_TEXT = "pinned (glibc: mmap_threshold 32 MiB, trim_threshold 256 MiB, top_pad 64 MiB)"


@dataclass(frozen=True)
class AllocatorSetting:
    """The allocator a comparison runs under: `knob` is the ALLOCATOR each slot gets (None: leave it to the
    entry and the user's environment), `text` the plan's and the verdict's line."""

    knob: str | None
    text: str


def allocator_setting(plans: Sequence[Plan], choice: str, scale: str, env: Mapping[str, str] = {}) -> AllocatorSetting:
    """`auto` (the default): pinned at bench scale, unless the user's environment sets ALLOCATOR or an arm
    compares allocators (chapter 4's tcmalloc / jemalloc), whose comparison keeps glibc's default as the
    source ran it; `pinned` / `default`: for every arm that does not set its own allocator."""
    studies = sorted({p.experiment.id for p in plans if p.experiment.knobs.get("ALLOCATOR")})
    if choice == "pinned":
        return AllocatorSetting("pinned", PINNED_TEXT + " (--allocator pinned)")
    if choice == "default":
        return AllocatorSetting("default", "default glibc, dynamic thresholds, as the sources ran "
                                           "(--allocator default)")
    if env.get("ALLOCATOR"):
        return AllocatorSetting(None, f"ALLOCATOR={env['ALLOCATOR']} from your environment")
    if studies:
        return AllocatorSetting("default", f"default glibc for every arm: {', '.join(studies)} compare(s) "
                                           "allocators, so the comparison keeps the source's default")
    if scale != "bench":
        return AllocatorSetting(None, "the launcher's default (glibc), as the source ran")
    return AllocatorSetting("pinned", PINNED_TEXT + ": no arm moves another's thresholds; --allocator default "
                                                    "measures the sources' own environment")
