"""train: one process's training. Models (the registry, the architectures, pretrained weights), the shared
loop and its steps, clocks, host noise, the record's metrics and losses, evaluation, FLOP counting, progress,
interrupt handling, checkpoints, memory measurements and the step micro-benchmark.

Layer 4: may import `errors`, `spec`, `record` and `stats`.
"""
