"""A tiny DDP run through pipelines.core.distributed.ranks, for the clean-exit test (started once per rank).

Synthetic tensors, a linear model, three steps, then ranks.shutdown(): it exits 0 on every rank, or
the test sees the SIGABRT that a Gloo thread racing interpreter teardown produces.
"""

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from pipelines.core.distributed import placement, ranks

place = placement.placement()
ranks.pin(place)
ranks.init(place, "gloo", "cpu", timeout_s=30)
model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    loss = model(torch.randn(16, 32)).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
del model, optimizer, loss
ranks.shutdown(timeout_s=30)
print(f"rank {place.rank} clean", flush=True)
