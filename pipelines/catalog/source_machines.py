"""The sources' machines, as far as their own tables pin them down. This module defines no experiments.

The book names no CPU for chapters 2 and 6 (16 physical cores are named in chapters 4 and 9 only), but
both chapters ran one kind of job on one machine: a small CNN at batch 64 with the same PyTorch. A step of
such a job is a fixed part (per step: the optimizer, Python, dispatch, parallel regions) plus its FLOPs at
some rate. Two of the book's tables give two such fits, each checked on the other table
(pipelines/core/stats/source_machine.py; docs/timing.md "The source's machine").

A table's rows (Row): experiment, arm, steps of the whole timed run, samples a step, FLOPs a step. The FLOPs are
torch.utils.flop_counter's count of one training step of our model at the arm's batch
(`metrics.flops_per_step` in every record): a property of the model, the same on any machine. The times
are the catalog's published `train_time_s` of each arm. `others` are arms the fit predicts but never fits
on: ch2-nobias changes no counted FLOPs, so on the book's machine as modelled it predicts no speed-up.
"""

from pipelines.core.config.experiments import Row, SourceMachine, Table

FMNIST_STEPS = 844 * 10  # 54,000 training images at batch 64, 10 epochs (SPLIT_DECISION)
CIFAR_STEPS = 782 * 10  # 50,000 training images at batch 64, 10 epochs

CH6_FLOPS = {"unpruned": 2845704192, "s10": 2425159680, "s20": 2000879616, "s30": 1599799296, "s40": 1253376000,
             "s50": 970850304, "s60": 720175104, "s70": 479920128, "s80": 277020672}

BOOK_CPU = SourceMachine(
    name="the book's CPU", software="PyTorch 2.0.0+cpu",
    tables=(
        Table("book:ch2", "chapter 2's batch sizes",
              rows=(Row("ch2-baseline", "baseline", FMNIST_STEPS, 64, 2063597568),
                    Row("ch2-bs128", "bs128", 422 * 10, 128, 4127195136),
                    Row("ch2-bs256", "bs256", 211 * 10, 256, 8254390272)),
              others=(Row("ch2-nobias", "nobias", FMNIST_STEPS, 64, 2063597568),)),
        Table("book:ch6:table6.1", "Table 6.1",
              rows=tuple(Row("ch6-prune", arm, CIFAR_STEPS, 64, flops) for arm, flops in CH6_FLOPS.items())),
    ))

SOURCE_MACHINES = (BOOK_CPU,)
