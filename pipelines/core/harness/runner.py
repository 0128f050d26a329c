"""Runs one catalog experiment in this process: the entry point, and the distributed hand-off.

`plan` (harness/plan.py) resolves one RunConfig per variant. `run` refuses what cannot run (harness/refusals.py),
then decides from the launcher's variables whether this process is one rank of a distributed run: if so,
`ranks.Session` joins the group first (a failed join is an error record, rank 0's), and the variants and
repeats run (harness/execute.py) inside that session; alone, they run directly. Progress bars are
core/train/progress.py's.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any, Callable

import torch

from pipelines.core.distributed import ranks
from pipelines.core.errors import DistError
from pipelines.core.record import results
from pipelines.core.harness import interleaved
from pipelines.core.harness.execute import Outcome, record_of, run_variants
from pipelines.core.harness.plan import Plan, dist_options
from pipelines.core.harness.refusals import refuse_before_work, skip_reasons
from pipelines.core.train import loop, progress


def execute_plan(the_plan: Plan, shown: progress.Settings = progress.OFF,
                 announce: Callable[[], None] | None = None) -> Outcome:
    """Run the plan in this process: alone, or as the rank the launcher started (then rank 0 writes).
    `shown`: progress bars and per-epoch lines (rank 0 only; the CLI's --quiet / --verbose). `announce`:
    called on rank 0 once every refusal has passed and before any work (the CLI prints its plan there, so
    a refused run stays one line)."""
    first = the_plan.configs[0]
    place = ranks.placement()
    device = torch.device(first.device)
    for cfg in the_plan.configs:
        refuse_before_work(the_plan, cfg, loop.RunContext(device, place.rank, place.world_size))
    skips = skip_reasons(the_plan, loop.RunContext(device, place.rank, place.world_size))  # none runnable: refused
    if announce is not None and place.rank == 0:
        announce()
    if not place.launched:
        return run_variants(the_plan, loop.RunContext(device), ranks.SINGLE_PROCESS, skips, shown=shown)
    settings = dist_options(the_plan)
    session = ranks.Session(place, settings.backend, first.device, settings.timeout_s)
    try:
        session.join()
    except DistError as exc:  # rank 0 records the failed join, torch's full text included; one line on screen
        if place.rank == 0:
            path = _write_error(the_plan, exc, ranks.describe(place, settings.backend, [session.placement_info]))
            raise DistError(f"{exc}; error record {path}") from exc
        raise
    with session:
        return run_variants(the_plan, session.ctx, session.describe(), skips, session, shown)


def run_interleaved(plans: list[Plan], announce: Callable[[], None] | None = None) -> list[Outcome]:
    """One process of a bench-scale round: every arm of `plans` in interleaved blocks (harness/execute.py),
    after the same refusals as `run`."""
    device = torch.device(plans[0].configs[0].device)
    ctx = loop.RunContext(device)
    for the_plan in plans:
        for cfg in the_plan.configs:
            refuse_before_work(the_plan, cfg, ctx)
        skip_reasons(the_plan, ctx)
    if announce is not None:
        announce()
    return interleaved.run_interleaved(plans, ctx, ranks.SINGLE_PROCESS)


def _write_error(the_plan: Plan, exc: BaseException, dist_info: dict[str, Any]) -> Path:
    """A run that failed before any repeat: one error record, its traceback with every chained cause."""
    run_id, cfg = results.new_run_id(), the_plan.configs[0]
    record = record_of("error", cfg, run_id, 0, dist_info, error={
        "type": exc.__class__.__name__, "message": str(exc)[:2000],
        "traceback": "".join(traceback.format_exception(exc))[-8000:]})
    return results.write(results.result_path(cfg.results_dir, the_plan.experiment.id, run_id), [record])
