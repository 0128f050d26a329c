"""The worker: what a process started by an orchestrator does with its request (config/request.py).

`python -m pipelines --worker FILE` (pipelines/__main__.py) ends every command line a launcher script
assembles for `accel run`, `accel compare` and `accel launch`: one process, or each rank of torchrun,
mpirun or srun. It rebuilds the plans the orchestrator built (the configs as resolved there, validated
again here), then measures them with the one engine (runner.execute_plans -> harness/execute.py): at bench
scale every arm of the process in time-matched blocks (a rank of a launch too, in the launcher's process
group), at smoke and book scale one window each.

Rank 0 writes the records to the files the request's run id names (`record_paths`), which is how the
orchestrator finds them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from pipelines.core.config import experiments
from pipelines.core.config import request as requests
from pipelines.core.config.runconfig import RunConfig
from pipelines.core.harness.execute import Outcome
from pipelines.core.harness.plan import Plan, load_pipeline
from pipelines.core.record import atomic, results


def request_of(plans: Sequence[Plan], run_id: str, *, pairing: requests.Pairing | None = None,
               one_repeat: bool = False, finish: str = "none", quiet: bool = True,
               verbose: bool = False) -> requests.Request:
    """The request for these plans. `one_repeat`: a comparison's round, whose repeat rule is the
    orchestrator's (one repeat a process, no auto rule of its own)."""
    def config(cfg: RunConfig) -> dict:
        if one_repeat:
            cfg = dataclasses.replace(cfg, rounds=None, repeats=1, auto=False, budget_s=None)
        return cfg.to_record()

    return requests.Request(run_id, tuple((p.experiment.id, tuple(config(c) for c in p.configs)) for p in plans),
                            pairing=pairing, finish=finish, quiet=quiet, verbose=verbose)


def write_request(request: requests.Request, results_dir: Path) -> Path:
    """The request's file (atomically: a worker never reads half of one), absolute so any launcher's cwd works."""
    path = requests.request_path(results_dir, request.run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, request.to_json())
    return path.resolve()


def plans_of(request: requests.Request) -> list[Plan]:
    """The orchestrator's plans, rebuilt from the request: the catalog entry, its technique file, its configs."""
    out = []
    for experiment_id, configs in request.plans:
        entry = experiments.get(experiment_id)
        pipeline = load_pipeline(entry.pipeline)
        out.append(Plan(entry, pipeline, [RunConfig.from_record(c, pipeline.Options) for c in configs]))
    return out


def record_paths(request: requests.Request) -> list[Path]:
    """The files rank 0 of the worker writes its records to, one per experiment."""
    return [results.result_path(Path(configs[0]["results_dir"]), experiment_id, request.run_id)
            for experiment_id, configs in request.plans]


def serve(request: requests.Request) -> tuple[list[Plan], list[Outcome]]:
    """Measure what the request asks, as described in the module docstring."""
    from pipelines.core.distributed import placement
    from pipelines.core.harness import runner
    from pipelines.core.train import progress

    plans = plans_of(request)
    launched = placement.placement().launched
    mine = plans[:1] if launched else plans  # a launch's ranks run one plan (a comparison's slot of ranks: one arm)
    return mine, runner.execute_plans(mine, progress.settings(request.quiet, request.verbose), run_id=request.run_id,
                                      pairing=request.pairing)
