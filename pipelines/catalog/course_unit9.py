"""Deep Learning Fundamentals, unit 9 (dlf-u9-*): the course's DistilBERT on IMDB.

The workload is the course's own: DistilBERT (transformers' DistilBertForSequenceClassification,
distilbert-base-uncased's config, random init unless --weights names a local save_pretrained folder) on
IMDB in its on-disk format (`accel data fetch imdb`, or `accel data generate imdb` offline). The
tokenizer is a local folder (--tokenizer) or one trained here on the training reviews; records say which.
"""

from pipelines.core.config.experiments import Experiment, Published as P, Variant

A100 = "1x NVIDIA A100-SXM4-40GB"
COURSE = {"model": "distilbert", "dataset": "imdb", "batch_size": 12, "epochs": 3, "lr": 5e-5,
          "weight_decay": 0.0, "num_workers": 4, "shuffle": True, "head_classes": 2,
          "split": "dlf-imdb"}  # the course's 35,000 / 5,000 / 10,000 of the pooled 50,000 (core/data/splits.py)
COURSE_DECISION = ("The course's workload: DistilBERT (distilbert-base-uncased's architecture, 2 labels) on IMDB, "
                   "bs 12, Adam lr 5e-5, 3 epochs, texts padded/truncated to 512 tokens. Random init unless "
                   "--weights names a local save_pretrained folder (the course fine-tuned the pretrained "
                   "model, so accuracies compare only with weights); the tokenizer is --tokenizer DIR (the "
                   "course's distilbert-base-uncased folder) or a WordPiece one trained here "
                   "(tokenizer_source in the record).")
SPLIT_DECISION = ("The course's split (unit 9's local_dataset_utilities.py), setting split=dlf-imdb: the 50,000 "
                  "reviews of both aclImdb folders pooled in the order it read them (test/pos, test/neg, "
                  "train/pos, train/neg, each folder's files by name), shuffled as df.sample(frac=1, "
                  "random_state=1) draws it (numpy RandomState(1)'s permutation) and cut 35,000 train / 5,000 "
                  "validation / 10,000 test; its np.random.seed(0) reindex before that changes nothing (after "
                  "its pd.concat every row's index is 0, and reindexing to the same labels returns the frame as "
                  "it was), so it is not repeated. Batch 12 without drop_last: 2,917 steps an epoch "
                  "(ceil(35,000 / 12)). The pipelines that validate (fabric_ladder, fabric_strategies) run a "
                  "validation pass over the 5,000 after every epoch inside the timed region, as the course's "
                  "Trainer.fit did (its 2-batch sanity check is not repeated); elsewhere the record notes that "
                  "they were held out unused. A tokenizer trained here learns from the 35,000 training reviews. "
                  "A generated IMDB is cut at the same fractions of its pool (224 / 32 / 64 of 320).")
FABRIC = {"fabric": True}
# unit 9.3 notes.txt: fit time of 3 epochs (min) per Lightning strategy, 1 GPU or 4 GPUs
MULTIGPU_MIN = {"single-gpu": 5.55, "ddp": 2.33, "fsdp": 1.9, "deepspeed-2": 1.74,
                "deepspeed-2-offload": 5.34, "deepspeed-3": 1.72}
# unit 9.3 notes.txt: GPU memory (MiB) and test accuracy (torchmetrics' fraction, as %) per strategy
MULTIGPU_MIB = {"single-gpu": 19656, "ddp": 19186, "fsdp": 13818, "deepspeed-2": 15218,
                "deepspeed-2-offload": 15018, "deepspeed-3": 15002}
MULTIGPU_ACCURACY = {"fsdp": 92.68, "deepspeed-2": 93.22, "deepspeed-2-offload": 93.20}
TEST_ACCURACY = "test accuracy of the best checkpoint (torchmetrics' fraction as a percentage)"
# The finder doubles the batch until memory runs out: where it stops is a property of the GPU's memory, the
# precision and the model, so on any other machine (or in fp32) the course's sizes are context, not a setting
# this run is configured with, and "differs" would say nothing about the technique.
FINDER_CONTEXT = ("DistilBERT 16-mixed on an A100-40GB; the size where memory runs out on that GPU, context on any "
                  "other machine, never judged")
# What each entry reproduces (the map's column), applied by core/config/experiments.py to the entries below
# that do not set `reproduces` themselves.
REPRODUCES = {
    "dlf-u9-amp": "course unit 9.1: mixed precision (DistilBERT notebooks)",
    "dlf-u9-multigpu": "course unit 9.3: multi-GPU strategies (notes.txt)",
    "dlf-u9-compile": "course unit 9.4: compile.py",
    "dlf-u9-bsfinder": "course unit 9.5: batch-size finder",
    "dlf-u9-ex1": "course unit 9: exercise 1",
}


# dlf-u9-multigpu: the course's strategies (published names), then the labelled extra arm that runs on CPU
MULTIGPU_ARMS = (Variant("single-gpu", options={"strategy": "single", "ranks": 1}),
                 Variant("ddp", options={"strategy": "ddp"}),
                 Variant("fsdp", options={"strategy": "fsdp"}),
                 Variant("deepspeed-2", options={"strategy": "deepspeed", "zero_stage": 2}),
                 Variant("deepspeed-2-offload", options={"strategy": "deepspeed", "zero_stage": 2, "offload": True}),
                 Variant("deepspeed-3", options={"strategy": "deepspeed", "zero_stage": 3}),
                 Variant("fsdp2", options={"strategy": "fsdp2"}))


def multigpu_devices(arm: str) -> int:
    """The GPUs notes.txt ran a strategy on: single-gpu on 1 A100, every other strategy on 4."""
    return 1 if arm == "single-gpu" else 4


def precision(name: str) -> Variant:
    return Variant(name, options={**FABRIC, "precision": name})


EXPERIMENTS = (
    Experiment(id="dlf-u9-amp", compares="32-true -> 16-mixed / bf16-mixed (DistilBERT on IMDB)",
               pipeline="fabric_ladder", target="cuda", requires=("gpu",), settings={**COURSE, "device": "cuda"},
               variants=(precision("32-true"), precision("16-mixed"), precision("bf16-mixed")),
               published=(P("fit_time_min", 21.64, "repo-output", "DistilBERT 32-true", variant="32-true"),
                          P("fit_time_min", 7.24, "repo-output", "DistilBERT 16-mixed", variant="16-mixed"),
                          P("fit_time_min", 7.62, "repo-output", "DistilBERT bf16-mixed", variant="bf16-mixed"),
                          P("ratio", 21.64 / 7.24, "repo-output", "derived 21.64/7.24 (DistilBERT)",
                            variant="16-mixed"),
                          P("ratio", 21.64 / 7.62, "repo-output", "derived 21.64/7.62 (DistilBERT)",
                            variant="bf16-mixed"),
                          P("steps_per_epoch", 2917, "repo-output", "batches an epoch: 35,000 training reviews at "
                            "batch 12, no drop_last (ceil(35,000 / 12)); a setting, not a speed"),
                          *(P("test_accuracy_pct", acc, "repo-output", TEST_ACCURACY, variant=name)
                            for name, acc in (("32-true", 92.23), ("16-mixed", 92.67), ("bf16-mixed", 91.98))),
                          P("parameters", 67_000_000, "repo-output", "Lightning's model summary: '67.0 M' trainable "
                            "parameters, rounded to 0.1 M, so the count is within +-50,000 of it "
                            "(DistilBertForSequenceClassification with 2 labels has 66,955,010)",
                            low=66_950_000, high=67_050_000)),
               hardware=A100, expect="Another GPU changes the size; expect 16-mixed and bf16-mixed well ahead of "
                                     "32-true on Tensor Core GPUs, little gain on CPU.",
               decisions=(COURSE_DECISION, SPLIT_DECISION,
                          "Precision through Lightning Fabric's plugin (the course used the Trainer's, the same "
                          "plugin). 16-mixed is skipped on CPU with a reason: Lightning would silently run "
                          "bf16-mixed there.")),
    Experiment(id="dlf-u9-multigpu", compares="1 device -> DDP / FSDP / DeepSpeed through Lightning Fabric, 2+ "
               "processes (Gloo on CPU, NCCL on GPUs)", pipeline="fabric_strategies", target="cuda",
               launcher="torchrun", knobs={"NPROC": "2"}, settings=COURSE, variants=MULTIGPU_ARMS,
               published=(*(P("fit_time_min", t, "repo-output", f"strategy {name}", variant=name,
                              devices=multigpu_devices(name)) for name, t in MULTIGPU_MIN.items()),
                          *(P("ratio", MULTIGPU_MIN["single-gpu"] / t, "repo-output",
                              f"derived {MULTIGPU_MIN['single-gpu']}/{t}: 4 GPUs vs 1", variant=name, devices=4)
                            for name, t in MULTIGPU_MIN.items() if name != "single-gpu"),
                          *(P("gpu_memory_mib", mib, "repo-output", f"strategy {name}, one device's", variant=name,
                              devices=multigpu_devices(name)) for name, mib in MULTIGPU_MIB.items()),
                          P("gpu_memory_mib", 14752, "repo-output", "strategy deepspeed_stage_3_offload: no arm here "
                            "(the course gives no time for it)", devices=4),
                          *(P("test_accuracy_pct", acc, "repo-output", "test accuracy as notes.txt records it "
                              "(torchmetrics' fraction as a percentage)", variant=name, devices=multigpu_devices(name))
                            for name, acc in MULTIGPU_ACCURACY.items())),
               hardware="A100 (count 4)",
               expect="On CPU processes (make dlf-u9-multigpu NPROC=2) ddp and fsdp2 run, the GPU-only strategies "
                      "are skipped with the reason, and single-gpu runs alone (accel run dlf-u9-multigpu --variant "
                      "single-gpu): expect no speed-up from ranks sharing a few cores, fsdp2 holding half of ddp's "
                      "parameter, gradient and optimizer bytes per rank (metrics.bytes_per_rank), and equal losses. "
                      "On 4 GPUs (NPROC=4 ARGS='--device cuda -o backend=nccl') expect the direction of the "
                      "published ratios, not their size (random init unless --weights).",
               decisions=(COURSE_DECISION,
                          "The course ran Lightning's Trainer at precision=16; precision=auto is 16-mixed on GPUs "
                          "and 32-true on CPU (Lightning would silently turn 16-mixed into bf16 there).",
                          "Lightning 2.6 runs strategy='fsdp' (FSDP1) and its DeepSpeedStrategy on GPUs only, so "
                          "those arms are skipped on CPU with the reason; the extra arm fsdp2 (Fabric's "
                          "ModelParallelStrategy + fully_shard per block, not in the course) shows the sharding on "
                          "CPU processes. The course's deterministic=True is not set: ratios are compared by "
                          "direction only.", SPLIT_DECISION)),
    Experiment(id="dlf-u9-compile", compares="eager -> torch.compile, DistilBERT training (no published number)",
               pipeline="fabric_ladder", settings=COURSE,
               variants=(Variant("eager"), Variant("compiled", options={"compile": True})),
               expect="No published number: the course gives none. Compilation time lands in warm-up.",
               decisions=(COURSE_DECISION, SPLIT_DECISION,
                          "fp32 plain loop so it runs on CPU too; the course ran 16-mixed on one GPU: add "
                          "--device cuda -o fabric=true -o precision=16-mixed for that setting.")),
    Experiment(id="dlf-u9-compile-inference", compares="eager -> compiled predict, DistilBERT on the IMDB test set",
               reproduces="course unit 9.4: compiled inference",
               pipeline="compiled_inference", settings={**COURSE, "num_workers": 0},
               variants=(Variant("eager"), Variant("compiled", options={"compile": True})),
               expect="No published number. Compilation lands in warm-up; the record checks that compiled "
                      "logits equal eager ones (max_abs_diff) and times predict batches only.",
               decisions=(COURSE_DECISION,
                          "The course compiled the trained model and timed prediction; here the model is not trained "
                          "first (inference speed does not depend on the weights' values): pass --weights with a "
                          "fine-tuned folder to time that model.")),
    Experiment(id="dlf-u9-bsfinder", compares="batch-size finder: doubling until memory runs out, throughput per size",
               pipeline="batch_size_finder", settings={**COURSE, "num_workers": 0},
               published=(P("chosen_batch_size", 128, "repo-output", FINDER_CONTEXT, basis="context"),
                          P("first_failed_batch_size", 256, "repo-output", FINDER_CONTEXT, basis="context"),
                          P("fit_time_min", 4.92, "repo-output", "3 epochs at bs 128"),
                          P("ratio", 7.24 / 4.92, "repo-output", "derived 7.24/4.92, cross-notebook: the finder's "
                            "3 epochs at its chosen batch 128 against unit 9.1's 16-mixed run at batch 12 (7.24 "
                            "min), the comparison the course's notebooks allow; context only: the chosen size "
                            "follows the memory of the GPU (here of this machine's cap), so no arm here trains "
                            "at the size the ratio's 128 stands for", basis="context"),
                          P("test_accuracy_pct", 93.22, "repo-output", TEST_ACCURACY)),
               hardware=A100, expect="The chosen size depends on the model, precision and memory: not comparable.",
               decisions=(COURSE_DECISION,
                          "Each size trains a few steps (forward, loss, backward, Adam step) on real batches of the "
                          "data; fp32, where the course's finder ran 16-mixed. On CPU the search stops at a memory "
                          "cap (default half of this machine's memory; -o memory_cap_mib=N) since running out kills "
                          "the process.",
                          "Then, as the course did, the model trains at the chosen size through the shared loop "
                          "(the run's steps or epochs) and is evaluated; the record carries the curve of "
                          "samples/s per size.")),
    Experiment(id="dlf-u9-ex1", compares="exercise: 5 precision settings, DistilBERT on IMDB (no reference numbers)",
               pipeline="fabric_ladder", settings=COURSE,
               variants=tuple(precision(name) for name in ("32-true", "16-true", "64-true", "16-mixed", "bf16-mixed")),
               expect="No reference numbers. 16-true trains with fp16 weights and Adam state: expect instability.",
               decisions=(COURSE_DECISION, "16-mixed is skipped on CPU (recorded with the reason); the other "
                          "four run on CPU, all five with --device cuda.")),
    Experiment(id="dlf-u9-bow", compares="the course's baseline: logistic regression on bag-of-words counts (IMDB)",
               reproduces="course unit 9: bag-of-words baseline (IMDB)",
               pipeline="plain_training",
               settings={**COURSE, "model": "bag_of_words", "batch_size": 64, "epochs": 3, "lr": 1e-3,
                         "num_workers": 0},
               expect="No published number here. The reference accuracy a DistilBERT run must beat; seconds, "
                      "not minutes, per epoch on CPU.",
               decisions=("The course fit scikit-learn's CountVectorizer + LogisticRegression; here a linear layer "
                          "on token counts (the same tokenizer as DistilBERT, first 512 tokens of each review), "
                          "softmax cross-entropy, Adam lr 1e-3, trained by the shared loop.", SPLIT_DECISION)),
)
