"""The orchestrator of a bench-scale comparison: what `accel compare`, and `accel run` / `accel launch` of an
entry at bench scale, do with the plans their command built once.

1. The arms: every requested entry's variants (an entry's baseline entry comes along as a request).
2. Which arms share a process (harness/sharing.py): those with one process environment run in one process
   per round, interleaved in blocks; each other arm gets a process of its own. One process per group is a
   *slot* of every round (harness/rounds.py).
3. The allocator: pinned glibc thresholds at bench scale, unless the comparison studies the allocator or
   the user chose (sharing.allocator_setting).
4. The plan text, with the estimate of the fewest rounds a verdict needs; a budget that cannot hold them is
   refused before any work, in one line, and so is everything a round's process would refuse.
5. Each slot's launcher prepared once (harness/launch.py `prepare`: its knobs checked, the run preflighted
   for the world it starts); then rounds until every ratio's interval is narrow enough or the budget is
   spent. The caller prints the verdict from the records the rounds return.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from pipelines.core.config.repeat_rule import DEFAULT_HALFWIDTH
from pipelines.core.errors import ConfigError
from pipelines.core.harness import rounds as rounding
from pipelines.core.harness.plan import Plan

Request = tuple[str, tuple[str, ...]]  # (experiment id, its variants; empty: all of them)
NO_BUDGET_S = 86400.0  # fixed rounds: the count is the rule, the budget out of the way


@dataclass
class Comparison:
    """A comparison planned: its plans (each built once), their arms' groups by process, the rule and the
    plan's text."""

    plans: list[Plan]
    groups: list
    rule: rounding.StopRule
    allocator: Any
    results_dir: Path
    text: str
    refusal: str = ""  # why the budget cannot hold a verdict (refused without --dry-run)
    slots: list[rounding.Slot] = field(default_factory=list)


def plan_comparison(requests: Sequence[Request], make_plan: Callable[[str, tuple[str, ...]], Plan],
                    env: Mapping[str, str], results_dir: Path, rounds: int | None, budget_s: float,
                    halfwidth: float | None, *,
                    allocator_choice: str = "auto", share: str = "auto", title: str, notes: Sequence[str] = (),
                    serving: Mapping[tuple[str, str], str] | None = None) -> Comparison:
    """The comparison's plans (`make_plan(id, variants)`: one plan per request, built once), groups and plan
    text. `serving`: (id, arm) -> role, for arms measured only as another entry's baseline (the plan says so)."""
    from pipelines.core.harness import preview, sharing
    from pipelines.core.harness.estimate import duration, rounds_estimate
    from pipelines.core.stats import stopping

    serving = serving or {}
    plans = [make_plan(experiment_id, variants) for experiment_id, variants in requests]
    members = sharing.members(plans)
    first = members[0][1]
    allocator = sharing.allocator_setting(plans, allocator_choice, first.scale, env)
    # arms share a process only under an allocator no arm can retune for another: glibc's pinned thresholds
    shared = share == "auto" and (allocator.knob or env.get("ALLOCATOR")) == "pinned"
    groups = sharing.groups(plans, env, shared)
    rule = rounding.StopRule(rounds, budget_s, halfwidth or DEFAULT_HALFWIDTH)
    layouts = [preview.layout(p.experiment, cfg, p.experiment.launcher, env) for p, cfg in members]
    runnable = {cfg.arm for p, cfg in members if not _skipped(p, cfg)}  # arms this device cannot run cost no time
    estimate, least_s = rounds_estimate(
        [([cfg for _, cfg in g.members if cfg.arm in runnable], g.key[0] in ("shared", "alone", "solo")) for g in groups
         if any(cfg.arm in runnable for _, cfg in g.members)], results_dir, rounds,
        budget_s if rounds is None else None)
    shown_rule = dataclasses.replace(first, auto=True, budget_s=budget_s) if rounds is None else first
    why_not = "" if shared or share != "auto" else \
        "the allocator is not pinned: glibc's thresholds follow the largest block any arm frees"
    extra = [("sharing", sharing_lines(groups, shared, env, why_not)), ("allocator", [allocator.text])]
    if memory := memory_lines(members):
        extra.append(("memory", memory))
    too_long = rounds is None and least_s is not None and least_s > budget_s
    refusal = (f"the {stopping.MIN_ROUNDS} rounds a verdict needs take about {duration(least_s)} here "
               f"({estimate.split(': ', 1)[-1]}), more than --budget-s {budget_s:g}; accept it with "
               f"--budget-s {math.ceil(least_s * 1.2)}, or make a round shorter (--steps N, --blocks N, --batch-size "
               "or --model; --scale smoke checks the code path in seconds)") if too_long else ""
    against = [(cfg, serving.get((cfg.experiment, cfg.variant)) or preview.against_text(p.experiment, cfg.variant))
               for p, cfg in members]
    text = preview.plan_text(f"{title}, in rounds of processes", against, layouts,
                         preview.repeat_rule(shown_rule, rounds, comparison=True, halfwidth=rule.halfwidth),
                         estimate, results_dir,
                         [*notes, f"each process's output: {results_dir}/comparison--<time>.log"],
                         extra)
    return Comparison(plans, groups, rule, allocator, Path(results_dir), text, refusal)


def prepare(comparison: Comparison, options: Mapping[str, Any], env: Mapping[str, str]) -> None:
    """Everything a round would refuse, refused now, and each slot's launcher made ready (`comparison.slots`).
    `options`: the command's parsed run options (what harness/launch.py `refuse` reads: device, -o items)."""
    from pipelines.core.harness import launch as launching, refusals
    from pipelines.core.record import results

    here = not env.get("IMAGE")  # the processes run on this host's software: what it cannot do is refused too
    slot_envs = [_slot_env(group, comparison.allocator, env) for group in comparison.groups]
    if here:  # a knob's limit first: it holds whatever the data or the options say
        _ranks_fit(slot_envs)
    for p in comparison.plans:  # user mistakes (missing data, bad options) and missing capabilities before round 1
        refusals.preflight(p, 1, 0, capabilities=here and p.experiment.launcher == "local",  # ranks: their launcher
                           runtime=False)  # the launcher sets the rounds' OpenMP runtime and allocator
    if comparison.refusal:
        raise ConfigError(comparison.refusal)
    results.check_writable(comparison.results_dir)
    slots = []
    for group, slot_env in zip(comparison.groups, slot_envs):
        plans = _plans_of(group)
        entry, cfg = plans[0].experiment, plans[0].configs[0]
        ready = launching.prepare(entry, plans[0], options, launcher_args(cfg), slot_env)
        slots.append(rounding.Slot(_label(group), tuple(group.ids), tuple(plans), ready.script, ready.env))
    comparison.slots = slots


def measure(comparison: Comparison, echo: Callable[[str], None], live: bool = False) -> rounding.Measured:
    """The rounds (harness/rounds.py), after `prepare`."""
    return rounding.measure_rounds(comparison.slots, comparison.results_dir, comparison.rule, echo=echo, live=live)


def launcher_args(cfg) -> list[str]:
    """What a launcher's knob checks read from the run (distributed/containers.py): device, data, results."""
    return ["--device", cfg.device, "--data-root", str(cfg.data_root), "--results-dir", str(cfg.results_dir)]


def _plans_of(group) -> list[Plan]:
    """The group's arms as one plan per entry, in the group's order."""
    by_entry: dict[str, Plan] = {}
    for the_plan, cfg in group.members:
        by_entry.setdefault(cfg.experiment, Plan(the_plan.experiment, the_plan.pipeline, [])).configs.append(cfg)
    return list(by_entry.values())


def _label(group) -> str:
    labels = group.labels
    if group.key[0] == "solo":
        return f"{labels[0]} alone"
    return " + ".join(labels) if len(labels) <= 3 else f"{' + '.join(group.ids)} ({len(labels)} arms)"


def _slot_env(group, allocator, env: Mapping[str, str]) -> dict[str, str]:
    """The environment of one group's launcher: the user's, the slot's allocator and ranks, the entry's knobs
    where the user set none."""
    the_plan, first = group.members[0]
    entry = the_plan.experiment
    slot_env = dict(env)
    if allocator.knob and not any(p.experiment.knobs.get("ALLOCATOR") for p, _ in group.members):
        slot_env["ALLOCATOR"] = allocator.knob
    ranks = getattr(first.options, "ranks", None)
    if group.key[0] == "launch" and isinstance(ranks, int) and ranks > 0 and entry.launcher == "torchrun":
        slot_env["NPROC"] = str(ranks)  # an arm sized to its ranks (ch9's ranks=N, a 1-device arm) gets them
    return {**slot_env, **{k: v for k, v in entry.knobs.items() if k not in slot_env}}


def _ranks_fit(slot_envs: Sequence[Mapping[str, str]]) -> None:
    """A launcher's rank limit on this host (NPROC=99 on 2 cores), refused before round 1, not inside it."""
    from pipelines.core.distributed import knobs

    for slot_env in slot_envs:
        if slot_env.get("NPROC", "").isdigit():
            try:
                knobs.ranks_fit_here("NPROC", int(slot_env["NPROC"]))
            except knobs.KnobError as error:
                raise ConfigError(str(error)) from None


def sharing_lines(groups, share: bool, env, why_not: str = "") -> list[str]:
    """The plan's `sharing:` lines: which arms share a process each round, which do not, and why
    (`why_not`: the reason no arm shares one, when the comparison allows none)."""
    from pipelines.core.harness import sharing

    lines = []
    for group in groups:
        labels = ", ".join(group.labels)
        if group.shared:
            lines.append(f"{labels}: one process a round, in interleaved blocks (each arm after every other "
                         "equally often, never after itself; the first step after a switch dropped), paired by block")
            continue
        kind = group.key[0]
        if kind == "solo":
            lines.append(f"{labels} again, alone: a process of its own a round as the baseline of "
                         f"{', '.join(group.serves)}, measured as they are, paired by round")
            continue
        why = ((why_not or "--share none")
               if kind == "alone" and not share and not sharing.why_apart(group.members[0], env)
               else sharing.differences(group, groups, env))
        alone = "its launcher's ranks" if kind == "launch" else "a process of its own" if len(groups) > 1 else \
            "one process a round"
        lines.append(f"{labels}: {alone}{f' ({why})' if why else ''}"
                     + (", paired by round" if len(groups) > 1 else ""))
    return lines


def memory_lines(members) -> list[str]:
    """How the arms with a memory figure are measured (a shared process has one peak for all its arms)."""
    from pipelines.core.harness import sharing

    out = []
    for the_plan, cfg in members:
        if not any(fig.metric in sharing.MEMORY_METRICS for fig in the_plan.experiment.published):
            continue
        out.append(f"{cfg.arm}: " + ("autograd's saved tensors, per arm" if the_plan.pipeline.separable_memory
                                     else "the peak of a process of its own"))
    return out


def _skipped(the_plan: Plan, cfg) -> bool:
    """Whether the pipeline skips this arm on its device (fp16 autocast on a CPU): it runs no steps."""
    import torch

    from pipelines.core.harness.refusals import skip_reason
    from pipelines.core.train.loop import RunContext

    return bool(skip_reason(the_plan.pipeline, cfg, RunContext(torch.device(cfg.device))))
