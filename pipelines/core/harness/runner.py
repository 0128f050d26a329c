"""Runs plans in this process: the entry point of every measurement, and the distributed hand-off.

`plan` (harness/plan.py) resolves one RunConfig per variant. `execute_plans` refuses what cannot run
(harness/refusals.py), then decides from the launcher's variables whether this process is one rank of a
distributed run: if so, `ranks.Session` joins the group first (a failed join is an error record, rank 0's),
and the engine (harness/execute.py) measures inside that session; alone, it measures directly. Progress
bars are core/train/progress.py's.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any, Callable

import torch

from pipelines.core.config.arm import Arm
from pipelines.core.config.request import Pairing
from pipelines.core.distributed import placement, ranks
from pipelines.core.errors import DistError
from pipelines.core.harness.execute import Outcome, run_plans
from pipelines.core.harness.plan import Plan, dist_options
from pipelines.core.harness.recording import record_of
from pipelines.core.harness.refusals import refuse_before_work, skip_reasons
from pipelines.core.record import results
from pipelines.core.train import loop, progress


def execute_plans(plans: list[Plan], shown: progress.Settings = progress.OFF,
                  announce: Callable[[], None] | None = None, run_id: str | None = None,
                  pairing: Pairing | None = None) -> list[Outcome]:
    """Measure the plans in this process: alone, or as the rank the launcher started (then rank 0 writes).
    `shown`: progress bars and per-epoch lines (rank 0 only; the CLI's --quiet / --verbose). `announce`:
    called on rank 0 once every refusal has passed and before any work (the CLI prints its plan there, so
    a refused run stays one line). `run_id`, `pairing`: a worker's request's (config/request.py)."""
    first = plans[0].configs[0]
    place = placement.placement()
    device = torch.device(first.device)
    here = loop.RunContext(device, place.rank, place.world_size)
    for the_plan in plans:
        for cfg in the_plan.configs:
            refuse_before_work(the_plan, cfg, here)
    skips = {Arm(p.experiment.id, variant): why for p in plans  # none runnable in a plan: refused
             for variant, why in skip_reasons(p, here).items()}
    if announce is not None and place.rank == 0:
        announce()
    if not place.launched:
        return run_plans(plans, loop.RunContext(device), ranks.SINGLE_PROCESS, skips, run_id=run_id, pairing=pairing,
                         shown=shown)
    settings = dist_options(plans[0])
    session = ranks.Session(place, settings.backend, first.device, settings.timeout_s)
    try:
        session.join()
    except DistError as exc:  # rank 0 records the failed join, torch's full text included; one line on screen
        if place.rank == 0:
            path = _write_error(plans[0], exc, ranks.dist_section(place, settings.backend, [session.placement_info]))
            raise DistError(f"{exc}; error record {path}") from exc
        raise
    with session:
        return run_plans(plans, session.ctx, session.dist_section(), skips, run_id=run_id, pairing=pairing,
                         session=session, shown=shown)


def execute_plan(the_plan: Plan, shown: progress.Settings = progress.OFF,
                 announce: Callable[[], None] | None = None) -> Outcome:
    """One plan, as `execute_plans` measures it (`accel run` at smoke and book scale, a rank started by hand)."""
    return execute_plans([the_plan], shown, announce)[0]


def _write_error(the_plan: Plan, exc: BaseException, dist_info: dict[str, Any]) -> Path:
    """A run that failed before any repeat: one error record, its traceback with every chained cause."""
    run_id, cfg = results.new_run_id(), the_plan.configs[0]
    record = record_of("error", cfg, run_id, 0, dist_info, error={
        "type": exc.__class__.__name__, "message": str(exc)[:2000],
        "traceback": "".join(traceback.format_exception(exc))[-8000:]})
    return results.write(results.result_path(cfg.results_dir, the_plan.experiment.id, run_id), [record])
