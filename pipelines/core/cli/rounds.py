"""A comparison at bench scale, measured in rounds of processes: what `accel compare`, and `accel run` /
`accel launch` of an entry at bench scale, do.

1. The arms: every requested entry's variants (an entry's baseline entry comes along as a request).
2. Which arms share a process (core/harness/sharing.py): those with one process environment run in one
   process per round, interleaved in blocks; each other arm gets a process of its own. One process per
   group is a *slot* of every round (core/stats/alternate.py), started through its entry's launcher.
3. The allocator: pinned glibc thresholds at bench scale, unless the comparison studies the allocator or
   the user chose (sharing.allocator_setting).
4. The plan, with the estimate of the fewest rounds a verdict needs; a budget that cannot hold them is
   refused before any work, in one line.
5. Rounds until every ratio's interval is narrow enough or the budget is spent, then the verdict.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Callable, Sequence

import click

from pipelines.core.cli.args import PLAN_SHOWN_ENV, fail
from pipelines.core.errors import ConfigError
from pipelines.core.config.repeat_rule import DEFAULT_HALFWIDTH
from pipelines.core.train.interrupt import Interrupted

Request = tuple[str, tuple[str, ...]]  # (experiment id, its variants; empty: all of them)
NO_BUDGET_S = 86400.0  # fixed rounds: the count is the rule, the budget out of the way
SHARE_CHOICES = ("auto", "none")


def variant_args(variants: Sequence[str]) -> list[str]:
    return [word for variant in variants for word in ("--variant", variant)]


def _ranks_fit(slots) -> None:
    """A launcher's rank limit on this host (NPROC=99 on 2 cores), refused before round 1, not inside it."""
    from pipelines.core.distributed import launchers

    for slot in slots:
        if slot.env.get("NPROC", "").isdigit():
            try:
                launchers.ranks_fit_here("NPROC", int(slot.env["NPROC"]))
            except launchers.KnobError as error:
                raise ConfigError(str(error)) from None


def _slot(group, passthrough: Sequence[str], allocator, env) -> "object":
    """The process of one group of arms in every round: `accel launch FIRST --variant ... --with ID@ARM ...`."""
    from pipelines.core.stats import alternate

    first = group.arms[0].entry.id
    args = [first, *variant_args([a.cfg.variant for a in group.arms if a.entry.id == first])]
    args += [word for a in group.arms if a.entry.id != first for word in ("--with", f"{a.entry.id}@{a.cfg.variant}")]
    slot_env = {PLAN_SHOWN_ENV: "1"}  # the comparison shows the plan; its processes do not again
    if allocator.knob and not any(a.entry.knobs.get("ALLOCATOR") for a in group.arms):
        slot_env["ALLOCATOR"] = allocator.knob
    ranks = getattr(group.arms[0].cfg.options, "ranks", None)
    if group.key[0] == "launch" and isinstance(ranks, int) and ranks > 0 and group.arms[0].entry.launcher == "torchrun":
        slot_env["NPROC"] = str(ranks)  # an arm sized to its ranks (ch9's ranks=N, a 1-device arm) gets them
    labels = [a.label for a in group.arms]
    label = " + ".join(labels) if len(labels) <= 3 else f"{' + '.join(group.ids)} ({len(labels)} arms)"
    return alternate.Slot(label, tuple(group.ids), (*args, *passthrough), slot_env)


def sharing_lines(groups, share: bool, env, why_not: str = "") -> list[str]:
    """The plan's `sharing:` lines: which arms share a process each round, which do not, and why
    (`why_not`: the reason no arm shares one, when the comparison allows none)."""
    from pipelines.core.harness import sharing

    lines = []
    for group in groups:
        labels = ", ".join(a.label for a in group.arms)
        if group.shared:
            lines.append(f"{labels}: one process a round, in interleaved blocks (ABBA, the first step after a "
                         "switch dropped), paired by block")
            continue
        kind = group.key[0]
        why = ((why_not or "--share none")
               if kind == "alone" and not share and not sharing.why_apart(group.arms[0], env)
               else sharing.differences(group, groups, env))
        alone = "its launcher's ranks" if kind == "launch" else "a process of its own" if len(groups) > 1 else \
            "one process a round"
        lines.append(f"{labels}: {alone}{f' ({why})' if why else ''}"
                     + (", paired by round" if len(groups) > 1 else ""))
    return lines


def memory_lines(arms) -> list[str]:
    """How the arms with a memory figure are measured (a shared process has one peak for all its arms)."""
    from pipelines.core.harness import sharing

    out = []
    for arm in arms:
        if not any(fig.metric in sharing.MEMORY_METRICS for fig in arm.entry.published):
            continue
        out.append(f"{arm.label}: " + ("autograd's saved tensors, per arm" if arm.pipeline.separable_memory
                                       else "the peak of a process of its own"))
    return out


def measure(requests: Sequence[Request], make_plan: Callable[[str, list[str]], object], passthrough: Sequence[str],
            results_dir: Path, rounds: int | None, budget_s: float, halfwidth: float | None, *,
            allocator_choice: str = "auto", share: str = "auto", dry_run: bool, as_json: bool, title: str,
            notes: Sequence[str] = (), serving: dict[tuple[str, str], str] | None = None) -> None:
    """Plan, refuse what cannot fit, run the rounds, end with the verdict (see the module docstring).
    `serving`: (id, arm) -> role, for arms measured only as another entry's baseline (the plan says so, and
    the verdict shows them as that baseline instead of judging them against their own entry's)."""
    serving = serving or {}
    from pipelines.core.record import results
    from pipelines.core.harness import preview, refusals, sharing
    from pipelines.core.harness.estimate import duration, rounds_estimate
    from pipelines.core.stats import alternate, stopping, verdict

    env = dict(os.environ)
    plans = [make_plan(experiment_id, [*passthrough, *variant_args(variants), "--results-dir", str(results_dir)])
             for experiment_id, variants in requests]
    arms = [sharing.Arm(p.experiment, cfg, p.pipeline) for p in plans for cfg in p.configs]
    first = arms[0].cfg
    allocator = sharing.allocator_setting(arms, allocator_choice, first.scale, env)
    # arms share a process only under an allocator no arm can retune for another: glibc's pinned thresholds
    shared = share == "auto" and (allocator.knob or env.get("ALLOCATOR")) == "pinned"
    groups = sharing.groups(arms, env, shared)
    slots = [_slot(g, passthrough, allocator, env) for g in groups]
    rule = alternate.StopRule(rounds, budget_s, halfwidth or DEFAULT_HALFWIDTH)
    layouts = [preview.layout(a.entry, a.cfg, a.entry.launcher, env) for a in arms]
    runnable = [a for a in arms if not _skipped(a)]  # arms this device cannot run cost no time
    estimate, least_s = rounds_estimate(
        [([a.cfg for a in g.arms if a in runnable], g.key[0] in ("shared", "alone")) for g in groups
         if any(a in runnable for a in g.arms)], results_dir, rounds, budget_s if rounds is None else None)
    shown_rule = dataclasses.replace(first, repeats_auto=True, budget_s=budget_s) if rounds is None else first
    why_not = "" if shared or share != "auto" else \
        "the allocator is not pinned: glibc's thresholds follow the largest block any arm frees"
    extra = [("sharing", sharing_lines(groups, shared, env, why_not)), ("allocator", [allocator.text])]
    if memory := memory_lines(arms):
        extra.append(("memory", memory))
    too_long = rounds is None and least_s is not None and least_s > budget_s
    refusal = (f"the {stopping.MIN_ROUNDS} rounds a verdict needs take about {duration(least_s)} here "
               f"({estimate.split(': ', 1)[-1]}), more than --budget-s {budget_s:g}; accept it with "
               f"--budget-s {math.ceil(least_s * 1.2)}, or make a round shorter (--steps N, --blocks N, --batch-size "
               "or --model; --scale smoke checks the code path in seconds)") if too_long else ""
    against = [(a.cfg, serving.get((a.entry.id, a.cfg.variant)) or preview.against_text(a.entry, a.cfg.variant))
               for a in arms]
    text = preview.block(f"{title}, in rounds of processes", against, layouts,
                         preview.repeat_rule(shown_rule, rounds, alternation=True, halfwidth=rule.halfwidth),
                         estimate, results_dir,
                         [*notes, f"each process's output: {results_dir}/alternation--<time>.log",
                          *([f"REFUSED without --dry-run: {refusal}"] if refusal else [])],
                         extra)
    if dry_run:
        click.echo(text)
        return
    here = not env.get("IMAGE")  # the processes run on this host's software: what it cannot do is refused too
    if here:  # a knob's limit first: it holds whatever the data or the options say
        _ranks_fit(slots)
    for p in plans:  # user mistakes (missing data, bad options) and missing capabilities before round 1
        refusals.preflight(p, 1, 0, capabilities=here and p.experiment.launcher == "local",  # ranks: their launcher
                         runtime=False)  # the launcher sets the rounds' OpenMP runtime and allocator
    if refusal:
        raise ConfigError(refusal)
    results.check_writable(results_dir)
    click.echo(text, err=True)
    try:
        summary = alternate.measure_rounds(slots, results_dir, rule, echo=lambda m: click.echo(m, err=True))
    except alternate.RoundFailed as failed:  # a refusal keeps its code (2: a mistake, 3: cannot run here)
        fail(str(failed), alternate.EXIT_INTERRUPTED if failed.summary.stopped_by == "interrupted" else
             failed.code if failed.code in (2, 3) else 1)
    except Interrupted as stop:  # the round's process got the signal too, and wrote its interrupted records
        kept = alternate.group_records(results_dir, stop.summary.group)[0] if hasattr(stop, "summary") else []
        finished = sum(r["status"] == "ok" for r in kept)
        raise Interrupted(stop.signum, results_dir if kept else None, finished,
                          any(r["status"] == "interrupted" for r in kept)) from None
    click.echo(alternate.describe(summary), err=True)
    records, paths = alternate.group_records(results_dir, summary.group)
    ids = [experiment_id for experiment_id, _ in requests]
    click.echo(verdict.as_json(records, ids, paths, results_dir, serving) if as_json else
               verdict.text(records, ids, paths, results_dir, method=f"allocator {allocator.text}", serving=serving))


def _skipped(arm) -> bool:
    """Whether the pipeline skips this arm on its device (fp16 autocast on a CPU): it runs no steps."""
    import torch

    from pipelines.core.train.loop import RunContext

    return bool(arm.pipeline.skip(arm.cfg, RunContext(torch.device(arm.cfg.device))))
