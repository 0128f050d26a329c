"""Catalog entries, one module per source. Each module exposes EXPERIMENTS: a tuple of Experiment.

Decisions that hold for every entry of a kind:

- A GPU entry (requires "gpu") run with `--device cpu` runs its own workload, and its verdict says "not
  comparable" (the figure is a GPU's: cuDNN, tensor cores, CUDA graphs, NCCL). Only where that workload
  cannot finish on a CPU does the entry declare a `cpu_form`, a named stand-in: ch7-amp's EfficientNet-B7 at
  batch 2048 plans hours a round, so its CPU form is B0 at batch 64. The others (DenseNet121, ViT-B/16 at
  the talk's batch 16, chapter 10's CNN) take seconds to minutes a round at bench scale, and a stand-in
  would only measure another model without making the verdict comparable.
"""
