"""What an arm is compared with: the baseline arm, the published figures that belong to the arm, and whether
the devices and hardware class it ran on are the ones the source's figure was measured on.

The catalog is the only source: an entry's `baseline` ("id" or "id@variant"), or, without one, the
entry's own first arm. A baseline id without "@variant" means the arm of that experiment with the same
name when there is one (oneCCL ranks=4 against Gloo ranks=4), else its first arm. With `match_cores`,
the arm of the baseline experiment that ran on the same total cores is used instead of the declared one
(the book's 2x8 against 1x16 becomes 2x1 against 1x2 on a 2-core machine). Whether records may be compared
at all is record/machine_class.py's; how they pair, stats/record_pairing.py's.
"""

from __future__ import annotations

from typing import Any, Mapping

from pipelines.core.config import experiments

TIME_METRICS = {"train_time_s": 1.0, "train_time_min": 60.0, "fit_time_min": 60.0}  # metric -> s per unit

# A source's stated factors (the scale note's recipe table: "2x speed, 2x memory"): judged like measured figures
# when an arm has no published ratio of its own, and labelled as rules of thumb.
STATED_SPEED, STATED_MEMORY = "stated_speed_factor_x", "stated_memory_factor_x"

Records = list[dict[str, Any]]


def applies(entry: experiments.Experiment, fig: experiments.Published, variant: str) -> bool:
    """A figure belongs to an arm when it names it, or names none in a single-arm experiment."""
    return fig.variant == variant or (fig.variant is None and not entry.has_variants)


def published_figure(entry: experiments.Experiment, metric: str, variant: str) -> experiments.Published | None:
    """The arm's figure of that metric; a ratio or speed factor only where it is judged (a "context" ratio,
    the finder's cross-notebook 1.47, is shown by `accel show`, never compared)."""
    return next((fig for fig in entry.published if fig.metric == metric and applies(entry, fig, variant)
                 and not (metric in ("ratio", STATED_SPEED) and fig.basis == "context")), None)


def published(entry: experiments.Experiment, metric: str, variant: str) -> float | None:
    """The figure's value on the basis a throughput measurement has: same work (see Published.same_work_value)."""
    fig = published_figure(entry, metric, variant)
    return None if fig is None else fig.same_work_value


def published_times(entry: experiments.Experiment, variant: str) -> list[tuple[str, float]]:
    """(as printed, seconds) of an arm's published training times."""
    return [(f"{fig.value:g} {fig.metric.rsplit('_', 1)[-1]}", fig.value * TIME_METRICS[fig.metric])
            for fig in entry.published if fig.metric in TIME_METRICS and applies(entry, fig, variant)]


def ratio_figure(entry: experiments.Experiment, variant: str) -> experiments.Published | None:
    """The figure an arm's measured ratio is judged against: its published ratio, else the source's stated
    speed factor."""
    return published_figure(entry, "ratio", variant) or published_figure(entry, STATED_SPEED, variant)


SOURCE_NAMES = (("book", "the book"), ("talk", "the talk"), ("dlf", "the course"), ("scale", "the note"),
                ("note", "the note"), ("repo-output", "the source's logs"), ("repo", "the source's code"))


def told(entry: experiments.Experiment, variant: str, fig: experiments.Published | None = None) -> str:
    """How the source tells a figure of an arm (its ratio figure unless `fig` is given): "the book's 148 s ->
    125 s" where it published both arms' times, else "the book's" (its source's name); "" without a figure."""
    fig = fig or ratio_figure(entry, variant)
    if fig is None:
        return ""
    name = next((said for prefix, said in SOURCE_NAMES if fig.source.startswith(prefix)), "the source")
    if fig.metric in (STATED_SPEED, STATED_MEMORY):
        return f"{name}'s rule of thumb"
    if fig.metric != "ratio":
        return f"{name}'s"
    declared = declared_baseline(entry, variant)
    base_entry = experiments.all_experiments().get(declared[0]) if declared else None
    mine = published_times(entry, variant)
    theirs = published_times(base_entry, declared[1]) if base_entry else []
    if not (mine and theirs and fig.work_ratio == 1.0):
        return f"{name}'s"
    (arm_text, arm_s), (base_text, base_s) = mine[0], theirs[0]
    same_unit = arm_text.split()[-1] == base_text.split()[-1]
    if same_unit and abs(base_s / arm_s / fig.value - 1) < 0.005:  # the figure is the ratio of those two times
        return f"{name}'s {base_text} -> {arm_text}"
    return f"{name}'s"


def basis_text(fig: experiments.Published) -> str:
    """What a ratio figure measured, and how it became a ratio on the same work as the measured one."""
    if fig.metric == STATED_SPEED:
        return "stated rule of thumb"
    if fig.work_ratio == 1.0:
        return fig.basis_name
    return (f"{fig.basis_name} {fig.value:g} over {fig.work_ratio:.3g}x the work: {fig.same_work_value:.2f} "
            "on the same work")


def declared_baseline(entry: experiments.Experiment, variant: str) -> tuple[str, str] | None:
    """(experiment, arm) the catalog compares `variant` with: the arm's own `baseline` (an arm of the same
    entry), else the entry's baseline entry, else the entry's first arm; None for a reference arm."""
    own = entry.arm(variant)
    if own is not None and own.baseline:
        return entry.id, own.baseline
    if entry.baseline:
        base_id, _, base_variant = entry.baseline.partition("@")
        if base_variant:
            return base_id, base_variant
        base = experiments.all_experiments().get(base_id)
        names = [arm.name for arm in base.variants] if base else ["default"]
        return base_id, variant if variant in names or (base and base.arm(variant)) else names[0]
    first = entry.variants[0].name
    return None if variant == first else (entry.id, first)


def total_cores(record: dict[str, Any]) -> int:
    """Parallel workers of a run: GPUs (ranks) on CUDA, ranks x torch threads on the CPU."""
    ranks = int((record.get("dist") or {}).get("world_size") or 1)
    if record["config"].get("device") == "cuda":
        return ranks
    return ranks * int(record["env"].get("torch_threads") or 1)


def baseline_arm(entry: experiments.Experiment, variant: str, records: Records,
                 ran: Mapping[tuple[str, str], Records]) -> tuple[str, str, str] | None:
    """(experiment, arm, why this arm) to compare with; `ran` holds the ok records of this scale by arm."""
    declared = declared_baseline(entry, variant)
    if declared is None or not entry.match_cores or not records:
        return None if declared is None else (*declared, "")
    cores = total_cores(records[0])
    base = experiments.all_experiments().get(declared[0])
    arms = [arm.name for arm in base.variants] if base else []
    arms += sorted(name for exp, name in ran if exp == declared[0] and name not in arms)  # open arms (threads=3)
    for name in arms:
        recs = ran.get((declared[0], name))
        if recs and total_cores(recs[0]) == cores:
            return declared[0], name, f"same total cores: {cores}"
    return (*declared, f"no {declared[0]} arm ran on the same total cores: {cores}")


RANK_KNOB = {"torchrun": "NPROC", "mpirun": "NP", "srun": "NP"}  # the launcher knob that sets a process count


def device_count_difference(entry: experiments.Experiment, variant: str, base: tuple[str, str],
                            records: Records, base_records: Records) -> str:
    """'' when the arm and its baseline ran on the devices (GPUs, or CPU processes) the source ran them on,
    else "published on 4 devices, measured on 2" with the command that matches: the course's strategies on
    4 A100s at NPROC=2, or vit-ddp-4gpu on one GPU against vit-bf16-mixed, measure another speed-up than
    the published one. A count the catalog cannot state (None) is not checked, and neither is an arm that
    carries no figure of its own: its count would come from another arm's figure (dlf-u9-multigpu's extra
    fsdp2 arm) or from its options (s004-dp-vs-ddp's DataParallel arm), and it has nothing to judge."""
    if not has_own_figure(entry, variant):
        return ""
    base_entry = experiments.all_experiments().get(base[0])
    parts = []
    for who, exp, arm, recs in (("", entry, variant, records), ("its baseline ", base_entry, base[1], base_records)):
        wanted = exp.published_devices(arm) if exp else None
        ran = device_counts(recs)
        if wanted is None or ran == [wanted]:
            continue
        knob = RANK_KNOB.get(exp.launcher)
        fix = f"make {exp.id} {knob}={wanted}" if knob else f"accel run {exp.id} --variant {arm} (one process)"
        parts.append(f"{who}published on {wanted} device(s), measured on {'/'.join(map(str, ran))}; "
                     f"the source's count: {fix}")
    return "; ".join(parts)


def has_own_figure(entry: experiments.Experiment, variant: str) -> bool:
    """Whether a published figure belongs to arm `variant`: one names it, or the entry has one arm and its
    figures name none."""
    return any(fig.variant == variant or (fig.variant is None and len(entry.variants) <= 1)
               for fig in entry.published)


def device_counts(records: Records) -> list[int]:
    """The devices each record ran on: its processes, and for nn.DataParallel (one process) its GPUs."""
    return sorted({_devices(r) for r in records})


def _devices(record: Mapping) -> int:
    processes = int((record.get("dist") or {}).get("world_size") or 1)
    options = (record.get("config") or {}).get("options") or {}
    if options.get("strategy") == "dp" and isinstance(options.get("ranks"), int):
        return processes * options["ranks"]  # nn.DataParallel's device_ids (pipelines/data_parallel.py)
    return processes


def hardware_class(entry: experiments.Experiment) -> str:
    """"gpu" or "cpu", where the source ran; "any" for a rule of thumb stated for no hardware (the notes)."""
    if entry.hardware.startswith("generic"):
        return "any"
    return "gpu" if entry.target == "cuda" or "gpu" in entry.requires else "cpu"


def run_class(records: Records) -> str:
    return "gpu" if any(r["config"].get("device") == "cuda" for r in records) else "cpu"


def precision_difference(figure: experiments.Published | None, base_records: Records) -> str:
    """'' when the baseline ran at the float32 matmul precision the figure's baseline did (where the figure
    names one), else the difference: a bf16 arm against a TF32 baseline measures another speed-up than one
    against true fp32. A record without the option ran at torch's default, "highest"."""
    if figure is None or not figure.baseline_matmul:
        return ""
    ran = sorted({str(((r.get("config") or {}).get("options") or {}).get("matmul_precision") or "highest")
                  for r in base_records})
    if ran == [figure.baseline_matmul]:
        return ""
    true_fp32 = " (true fp32)" if figure.baseline_matmul == "highest" else ""
    tf32 = " (TF32 on Ampere and later)" if {"high", "medium"} & set(ran) else ""
    return (f"other baseline precision: the published ratio's baseline ran at float32 matmul precision "
            f"{figure.baseline_matmul!r}{true_fp32}, this run's at {'/'.join(map(repr, ran))}{tf32}")
