"""train: one process's training. Models, the shared loop and its steps, clocks, progress, interrupt
handling, checkpoints, memory measurements and the step micro-benchmark.

Layer 4: may import `errors`, `spec`, `record` and `stats`.
"""
