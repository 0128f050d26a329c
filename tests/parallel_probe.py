"""One rank of the model-parallel equality tests (started once per rank with RANK/WORLD_SIZE/MASTER_*).

It joins a Gloo group through pipelines.core.distributed.ranks, then, on the same seeded transformer_tiny and the same
batch the test rebuilds in one process:
- tensor parallel: the blocks split by pipelines/tensor_parallel.py; saves the forward output, every
  gradient gathered to a full tensor (DTensor.full_tensor) and the parameter bytes this rank holds;
- pipeline parallel, for GPipe and 1F1B: this rank's stage from pipelines/pipeline_parallel.py through
  one schedule step; saves the last stage's micro-batch losses and this stage's gradients by name.
Everything goes to OUT/rank<R>.pt for the test to compare; the test imports `batch` and `seeded_model`
to build the same reference in one process.
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor

from pipelines import pipeline_parallel as pp
from pipelines import tensor_parallel as tp
from pipelines.core.distributed import placement, ranks
from pipelines.core.train import models
from pipelines.core.train.architectures import PatchTransformer

MODEL, BATCH, MICROBATCHES = "transformer_tiny", 8, 4


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.rand(BATCH, 3, 32, 32, generator=generator), torch.randint(0, 10, (BATCH,), generator=generator)


def seeded_model() -> PatchTransformer:
    torch.manual_seed(0)
    return models.build(MODEL)


def tensor_parallel(place) -> dict:
    model = tp.parallelize(seeded_model(), place.world_size, torch.device("cpu"))
    x, y = batch()
    out = model(x)
    F.cross_entropy(out, y).backward()
    grads = {name: (p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad)
             for name, p in model.named_parameters()}
    split = [p for name, p in model.named_parameters() if isinstance(p, DTensor) and name.endswith("weight")]
    return {"out": out.detach(), "grads": grads, "block_bytes": tp.local_bytes(model.blocks.parameters()),
            "split_weight_bytes": tp.local_bytes(split), "split_weight_names": sorted(
                name for name, p in model.named_parameters() if isinstance(p, DTensor) and name.endswith("weight"))}


def pipeline_parallel(place, schedule: str) -> dict:
    stage = pp.split(seeded_model(), place.world_size, place.rank)
    timed = pp.TimedStage(stage, place.rank, place.world_size, torch.device("cpu"))
    runner = pp.SCHEDULES[schedule](timed, MICROBATCHES, loss_fn=F.cross_entropy)
    x, y = batch()
    losses: list[torch.Tensor] = []
    if place.rank == 0:
        runner.step(x)
    else:
        runner.step(target=y, losses=losses)
    return {"losses": [loss.detach() for loss in losses], "busy_s": timed.busy_s,
            "grads": {name: p.grad for name, p in stage.named_parameters()}}


def main(out: Path) -> None:
    place = placement.placement()
    ranks.init(place, "gloo", "cpu", timeout_s=60)
    result = {"tp": tensor_parallel(place), "gpipe": pipeline_parallel(place, "gpipe"),
              "1f1b": pipeline_parallel(place, "1f1b")}
    torch.save(result, out / f"rank{place.rank}.pt")
    ranks.shutdown(timeout_s=60)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
