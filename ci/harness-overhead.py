#!/usr/bin/env python3
"""Harness overhead: the shared loop against a loop written without the harness, in one process.

Usage: [THREADS=N] python ci/harness-overhead.py [--steps 60] [--warmup 5] [--repeats 5]
           [--model cnn_cifar10] [--batch-size 64] [--device cpu] [--results-dir DIR]
       python ci/harness-overhead.py --scale book [--epochs 2] [--repeats 4] [--experiment ch2-baseline]
           [--dataset fashion_mnist] [--data-root data] [--results-dir DIR]

bench (default): one CNN on synthetic batches, shared loop against a minimal hand-written one
(pipelines/selfcheck/harness_overhead.py). book: whole epochs on Fashion-MNIST, `accel run ch2-baseline
--scale book` against the book's own chapter-2 loop (pipelines/selfcheck/book_loop.py). Both print the
overhead read against the goal (the shared loop within 2 %) by its 95 % interval over the repeats and write
records (experiment "harness-overhead", variants shared-loop / hand-loop) that `accel report` shows in its own
section. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# This checkout's package, not whichever one the interpreter has installed (an editable install of another
# clone would otherwise be measured, and its commit recorded).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipelines.core.errors import ConfigError  # noqa: E402

if __name__ == "__main__":  # before torch loads: libgomp would print its own warning for a bad value first
    from pipelines.core.config.runconfig import check_environment

    try:
        check_environment()
    except ConfigError as exc:
        print(f"harness-overhead: error: {exc}", file=sys.stderr)
        sys.exit(2)  # a user mistake, as argparse's own refusals

from pipelines.core.config import experiments  # noqa: E402
from pipelines.selfcheck.book_loop import BOOK_EXPERIMENT, book_train_indices, main_book  # noqa: E402,F401
from pipelines.selfcheck.harness_overhead import main_bench, result_line  # noqa: E402,F401


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=("bench", "book"), default="bench",
                        help="bench: fixed steps on synthetic batches; book: whole epochs on a data set "
                             "against the book's own loop")
    parser.add_argument("--steps", type=int, default=None, help="bench: timed steps (default 60)")
    parser.add_argument("--warmup", type=int, default=None, help="bench: warm-up steps (default 5)")
    parser.add_argument("--epochs", type=int, default=None, help="book: epochs a repeat (default 1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default=None, help="default: cnn_cifar10 (bench), the entry's (book)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="default: 64 (bench), the entry's (book)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--experiment", default=BOOK_EXPERIMENT,
                        help="book: the catalog entry the shared arm runs as accel run does")
    parser.add_argument("--dataset", default=None, help="book: default the entry's (fashion_mnist)")
    parser.add_argument("--data-root", type=Path, default=Path("data"), help="book: the data sets' folder")
    parser.add_argument("--results-dir", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    if args.scale == "book":
        if args.steps is not None or args.warmup is not None:
            parser.error("--steps and --warmup are bench settings; book scale runs whole --epochs")
        if args.device != "cpu":
            parser.error("--scale book runs the book's chapter-2 loop, which is CPU code: pass --device cpu")
        args.epochs = 1 if args.epochs is None else args.epochs
        if min(args.epochs, args.repeats) < 1:
            parser.error("--epochs and --repeats must be >= 1")
        try:
            return main_book(args)
        except (ConfigError, experiments.UnknownExperiment) as exc:  # a user mistake: one line, as argparse's
            print(f"harness-overhead: error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
            return 2
    if args.epochs is not None or args.dataset is not None:
        parser.error("--epochs and --dataset are book settings; pass --scale book")
    args.steps = 60 if args.steps is None else args.steps
    args.warmup = 5 if args.warmup is None else args.warmup
    args.model = args.model or "cnn_cifar10"
    args.batch_size = args.batch_size or 64
    if min(args.steps, args.repeats) < 1 or args.warmup < 0:
        parser.error("--steps and --repeats must be >= 1, --warmup >= 0")
    return main_bench(args)


if __name__ == "__main__":
    sys.exit(main())
