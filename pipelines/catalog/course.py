"""Deep Learning Fundamentals unit 9 and the lecture note "Training Strategies at Scale" (s004-*).

Unit 9's workload is the course's own: DistilBERT (transformers' DistilBertForSequenceClassification,
distilbert-base-uncased's config, random init unless --weights names a local save_pretrained folder) on
IMDB in its on-disk format (`accel data fetch imdb`, or `accel data generate imdb` offline). The
tokenizer is a local folder (--tokenizer) or one trained here on the training reviews; records say which.
"""

import dataclasses

from pipelines.core.config.experiments import Experiment, Published as P, Variant

A100 = "1x NVIDIA A100-SXM4-40GB"
NOTE = "lecture-note (seed 004)"
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
                  "(ceil(35,000 / 12)). The pipelines that validate (vit_ladder, fabric_strategies) run a "
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
NOTE_TITLE = "scale note (seed 004)"
# What each entry reproduces (the map's column): one table here, applied by core/config/experiments.py to the
# entries below that do not set `reproduces` themselves.
REPRODUCES = {
    "dlf-u9-amp": "course unit 9.1: mixed precision (DistilBERT notebooks)",
    "dlf-u9-multigpu": "course unit 9.3: multi-GPU strategies (notes.txt)",
    "dlf-u9-compile": "course unit 9.4: compile.py",
    "dlf-u9-bsfinder": "course unit 9.5: batch-size finder",
    "dlf-u9-ex1": "course unit 9: exercise 1",
    "s004-amp": f"{NOTE_TITLE}: automatic mixed precision",
    "s004-gradaccum": f"{NOTE_TITLE}: gradient accumulation",
    "s004-ckpt": f"{NOTE_TITLE}: activation checkpointing",
    "s004-dp-vs-ddp": f"{NOTE_TITLE}: DataParallel vs DDP",
    "s004-pp": f"{NOTE_TITLE}: pipeline parallelism",
    "s004-tp": f"{NOTE_TITLE}: tensor parallelism",
    "s004-fsdp": f"{NOTE_TITLE}: FSDP",
    "s004-deepspeed": f"{NOTE_TITLE}: DeepSpeed ZeRO",
    "s004-dataloader": f"{NOTE_TITLE}: DataLoader settings",
    "scale-channels-last": "no source figure (beside the course's compile entry)",
}


# s004-deepspeed: the reference (DDP), DeepSpeed's stages, the note's own config, then torch's own equivalents.
# deepspeed-note is the note's snippet: ZeRO-3, parameters and optimizer offloaded to the CPU, global batch 256
# = micro-batch 32 per rank x 4 accumulation steps x 2 ranks (NPROC=2), fp16 on CUDA (precision=auto).
ZERO_ARMS = (Variant("ddp", options={"impl": "torch", "stage": 0}),
             *(Variant(f"deepspeed-{stage}", options={"stage": stage}) for stage in range(4)),
             Variant("deepspeed-3-offload", options={"stage": 3, "offload": True}),
             Variant("deepspeed-note", settings={"batch_size": 32},  # 256 / (4 x 2 ranks)
                     options={"stage": 3, "offload": True, "train_batch": 256, "accum_steps": 4, "precision": "auto"}),
             Variant("torch-zero-1", options={"impl": "torch", "stage": 1}),
             Variant("fsdp2-zero-2", options={"impl": "torch", "stage": 2}),
             Variant("fsdp2-zero-3", options={"impl": "torch", "stage": 3}),
             Variant("fsdp2-zero-3-offload", options={"impl": "torch", "stage": 3, "offload": True}))


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


# The note's factors are rules of thumb for no stated machine: judged on a CPU run and on a GPU run alike,
# and labelled as such (never "published on CPU" or "on GPU").
NOTE_HARDWARE = "generic: no hardware stated (the note's precision advice names A100 / H100)"
NOTE_SETUP = {"dataset": "cifar10", "batch_size": 64, "epochs": 1, "lr": 1e-4, "weight_decay": 0.01}
NOTE_DECISION = ("The note names no model or data: a registered torchvision model on CIFAR-10, AdamW "
                 "lr 1e-4 as the note's AMP snippet.")

EXPERIMENTS = (
    Experiment(id="dlf-u9-amp", compares="32-true -> 16-mixed / bf16-mixed (DistilBERT on IMDB)",
               pipeline="vit_ladder", target="cuda", requires=("gpu",), settings={**COURSE, "device": "cuda"},
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
                            "(DistilBertForSequenceClassification with 2 labels has 66,955,010)")),
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
               pipeline="vit_ladder", settings=COURSE,
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
               published=(P("chosen_batch_size", 128, "repo-output", "DistilBERT 16-mixed on an A100-40GB"),
                          P("first_failed_batch_size", 256, "repo-output", "DistilBERT 16-mixed on an A100-40GB"),
                          P("fit_time_min", 4.92, "repo-output", "3 epochs at bs 128"),
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
               pipeline="vit_ladder", settings=COURSE,
               variants=tuple(precision(name) for name in ("32-true", "16-true", "64-true", "16-mixed", "bf16-mixed")),
               expect="No reference numbers. 16-true trains with fp16 weights and Adam state: expect instability.",
               decisions=(COURSE_DECISION, "16-mixed is skipped on CPU (recorded with the reason); the other "
                          "four run on CPU, all five with --device cuda.")),
    Experiment(id="dlf-u9-bow", compares="the course's baseline: logistic regression on bag-of-words counts (IMDB)",
               reproduces="course unit 9: bag-of-words baseline (IMDB)",
               pipeline="ch02_layers",
               settings={**COURSE, "model": "bag_of_words", "batch_size": 64, "epochs": 3, "lr": 1e-3,
                         "num_workers": 0},
               expect="No published number here. The reference accuracy a DistilBERT run must beat; seconds, "
                      "not minutes, per epoch on CPU.",
               decisions=("The course fit scikit-learn's CountVectorizer + LogisticRegression; here a linear layer "
                          "on token counts (the same tokenizer as DistilBERT, first 512 tokens of each review), "
                          "softmax cross-entropy, Adam lr 1e-3, trained by the shared loop.", SPLIT_DECISION)),
    Experiment(id="s004-amp", compares="fp32 -> autocast bf16 / fp16 + GradScaler (claim: 2x speed, 2x memory)",
               pipeline="ch07_amp", settings={**NOTE_SETUP, "model": "efficientnet_b0"},
               options={"optimizer": "adamw", "cudnn_benchmark": False},
               variants=(Variant("fp32"), Variant("bf16", options={"precision": "bf16"}),
                         Variant("fp16", options={"precision": "fp16"})),
               published=(*(fig for arm in ("bf16", "fp16") for fig in (
                   P("stated_speed_factor_x", 2, NOTE, "rule of thumb, not measured", variant=arm),
                   P("stated_memory_factor_x", 2, NOTE, "recipe table; rule of thumb, not measured", variant=arm))),
                   *(P("max_finite_value", value, NOTE, f"precision table: {name} range +-{value:g}, the format's "
                       "largest finite value (torch.finfo(dtype).max, to the note's digits; "
                       "tests/unit/test_catalog.py checks it)", variant=arm)
                     for arm, name, value in (("fp32", "FP32", 3.4e38), ("fp16", "FP16", 65504),
                                              ("bf16", "BF16", 3.4e38)))),
               expect="The note's 2x is a GPU rule of thumb; on CPU bf16 gains only with native bf16 units (AMX).",
               decisions=(NOTE_DECISION.replace("a registered torchvision model", "EfficientNet-B0 (a CNN, the "
                                                "note's exercise 1)"),
                          "The scaler calls sit outside the autocast block (the note's lost indentation "
                          "leaves it open). fp16 is skipped on CPU with a reason.")),
    Experiment(id="s004-gradaccum", compares="true batch 256 -> micro-batch 64 x 4 accumulation (effective 256)",
               pipeline="grad_accum", settings={**NOTE_SETUP, "model": "cnn_cifar10"},
               variants=(Variant("batch256", settings={"batch_size": 256}, options={"accum_steps": 1}),
                         Variant("accum-64x4", settings={"batch_size": 64}, options={"accum_steps": 4})),
               published=(P("effective_batch_size", 256, NOTE, "exercise target, not a result"),),
               expect="Same effective batch: similar samples/s on CPU; "
                      "the accumulated arm needs less activation memory.",
               decisions=(NOTE_DECISION.replace("a registered torchvision model", "the book's CIFAR-10 CNN (no "
                                                "BatchNorm, so micro-batches and the full batch agree exactly)"),
                          "fp32 by default (-o precision=bf16|fp16 adds the note's autocast and GradScaler); a "
                          "test proves the accumulated gradients equal the full batch's.")),
    Experiment(id="s004-ckpt", compares="plain fp32 -> activation checkpointing per block (claim: ~2-3x memory, "
               "~30 % slower); + bf16 autocast (the recipe table's 4x memory, 0.7x speed)",
               pipeline="activation_ckpt",
               settings={**NOTE_SETUP, "model": "vit_b_16", "image_size": 224, "batch_size": 32},
               variants=(Variant("plain", options={"checkpoint": False}), Variant("checkpointed"),
                         Variant("amp-checkpointed", options={"precision": "bf16"})),
               published=(P("stated_speed_factor_x", 0.7, NOTE, "the prose's '~30 % slower' (checkpointing alone); "
                            "rule of thumb, not measured", variant="checkpointed"),
                          P("stated_memory_factor_x", 2.5, NOTE, "the prose's '~2-3x' (checkpointing alone), judged "
                            "on its own range; rule of thumb, not measured", variant="checkpointed", low=2, high=3),
                          P("stated_speed_factor_x", 0.7, NOTE, "recipe table: 1 GPU mixed precision + gradient "
                            "checkpoint, against fp32; rule of thumb, not measured", variant="amp-checkpointed"),
                          P("stated_memory_factor_x", 4, NOTE, "recipe table: 1 GPU mixed precision + gradient "
                            "checkpoint, against fp32; rule of thumb, not measured", variant="amp-checkpointed")),
               expect="Expect a lower speed and a much lower saved_for_backward_mib for both checkpointed arms; bf16 "
                      "halves the activations checkpointing keeps, and gains speed only with native bf16 units.",
               decisions=(NOTE_DECISION.replace("a registered torchvision model", "ViT-B/16 (its 12 encoder "
                                                "blocks are the block list)"),
                          "Memory is saved_for_backward_mib on every device plus peak_gpu_mib on CUDA; CPU peak "
                          "RSS is process-wide across variants, so it is not the comparison.",
                          "Each claim on the arm it describes: the prose's checkpointing-only '~2-3x' memory (a "
                          "range, the band itself) and '~30 % slower' on checkpointed; the recipe table's row "
                          "'mixed precision + gradient checkpoint: 4x memory, 0.7x speed' (both against fp32, "
                          "the row under s004-amp's 2x/2x) on amp-checkpointed, bf16 autocast (the note's "
                          "precision advice for A100/H100; fp16 + GradScaler is the CUDA-only s004-amp arm).")),
    Experiment(id="s004-dp-vs-ddp", compares="one device -> nn.DataParallel (1 process, 2 GPUs) / "
               "DistributedDataParallel (2 processes), global batch 64", pipeline="ddp", launcher="torchrun",
               knobs={"NPROC": "2"}, settings={**NOTE_SETUP, "model": "cnn_cifar10"},
               variants=(Variant("one-device", settings={"batch_size": 32}, options={"strategy": "ddp", "ranks": 1}),
                         Variant("dataparallel", settings={"batch_size": 64}, options={"strategy": "dp", "ranks": 2}),
                         Variant("ddp", settings={"batch_size": 32}, options={"strategy": "ddp", "ranks": 2})),
               published=(P("stated_memory_factor_x", 1, NOTE, "recipe table: multi-GPU DDP against one GPU (the "
                            "whole model on every GPU); rule of thumb, not measured", variant="ddp"),
                          P("stated_speed_factor_x", 2, NOTE, "recipe table: DDP speed 'N' x, N = 2 GPUs at this "
                            "entry's NPROC=2; DDP on N GPUs against one GPU (not against DataParallel); rule of "
                            "thumb, not measured", variant="ddp", devices=2)),
               expect="DataParallel is one process and one Python thread per GPU: it scatters the batch, copies the "
                      "model to every GPU each step and gathers the outputs on GPU 0, so DDP (one process per GPU, "
                      "gradients all-reduced during backward) is expected to be faster. On CPU only the DDP arm "
                      "runs (Gloo); the DataParallel arm is recorded as skipped with the reason.",
               decisions=("The recipe table's DDP row (memory 1x, speed N) is DDP against one GPU, so it is judged "
                          "on the ddp arm against one-device (1 process, the same 32 per device); DataParallel "
                          "against DDP is the note's exercise 3, with no figure: both arms' ratios to one-device "
                          "are measured side by side.",
                          "Same model and global batch: DataParallel takes the whole batch of 64 in one process and "
                          "splits it over 2 GPUs; DDP takes 32 per rank on 2 ranks. Both through pipelines/ddp.py "
                          "(-o strategy=dp|ddp); Adam (ddp.py's optimizer) at the note's lr 1e-4, wd 0.01.",
                          "DataParallel needs 2 CUDA devices in one process: in a multi-process launch it is skipped "
                          "with the command that runs it (`make s004-dp-vs-ddp` runs it after the DDP launch "
                          "when 2+ GPUs are visible); on GPUs pass --device cuda -o backend=nccl to the DDP arm.",
                          "The book's CIFAR-10 CNN (no BatchNorm, so the replicas' buffers cannot differ between "
                          "the two wrappers).")),
    Experiment(id="s004-pp", compares="micro-batches 1 -> 2 / 4 / 8 through a 2-stage pipeline (GPipe; the bubble)",
               pipeline="pipeline_parallel", launcher="torchrun", knobs={"NPROC": "2"},
               settings={**NOTE_SETUP, "model": "transformer_small", "batch_size": 32, "drop_last": True},
               variants=tuple(Variant(f"microbatches={m}", options={"microbatches": m}) for m in (1, 2, 4, 8)),
               expect="The bubble (p-1)/(m+p-1) = 0.5, 0.33, 0.2, 0.11 for 2 stages: the measured idle share of "
                      "each stage falls with more micro-batches; the step time falls with it only while a "
                      "micro-batch stays big enough to compute efficiently (on CPU the per-chunk overhead and "
                      "the Gloo transfers grow with m).",
               decisions=("The note's naive 3-device split becomes torch.distributed.pipelining: one stage per rank "
                          "(NPROC stages; blocks dealt out evenly, embedding on the first stage, head on the "
                          "last), ScheduleGPipe by default, -o schedule=1f1b for Schedule1F1B (its arms with "
                          "fewer micro-batches than stages are skipped with the reason).",
                          "Global batch 64 = 32 per rank x 2 ranks, gathered on every rank: stage 0 feeds it, the "
                          "last stage scores it; the loss is broadcast from the last stage so rank 0 records it.",
                          "The bubble is measured, not inferred from the step time: each stage's timed "
                          "forward/backward chunks (busy) against the step's span, which lasts until the slowest "
                          "stage's schedule.step returns.")),
    Experiment(id="s004-tp", compares="replicated model (DDP) -> tensor-parallel blocks (column/row split), "
               "same global batch", pipeline="tensor_parallel", launcher="torchrun", knobs={"NPROC": "2"},
               settings={**NOTE_SETUP, "model": "transformer_small", "batch_size": 32},
               variants=(Variant("replicate", options={"parallel": "replicate"}), Variant("tensor")),
               expect="Each rank holds about 1/NPROC of the blocks' parameters (recorded per rank). On CPU "
                      "processes over Gloo the per-layer all-reduces cost more than the smaller matmuls save: "
                      "expect the tensor arm slower per step; its use is a model too big for one device.",
               decisions=("The note's column-parallel linear, grown into a transformer block with "
                          "torch.distributed.tensor.parallel: q/k/v and the MLP's first layer ColwiseParallel, "
                          "the attention output and the MLP's second layer RowwiseParallel; degree = NPROC, which "
                          "must divide the heads and the MLP width.",
                          "Same global batch in both arms (32 per rank x NPROC): DDP trains each rank on its own "
                          "shard, the tensor arm all-gathers the shards so every rank computes all samples.",
                          "A splittable transformer on CIFAR-10 4x4 patches (4 blocks, width 128, 4 heads), since "
                          "torchvision's ViT fuses q/k/v into one nn.MultiheadAttention weight.")),
    Experiment(id="s004-fsdp", compares="FSDP with transformer auto-wrap and bf16 MixedPrecision",
               pipeline="ddp", launcher="torchrun", knobs={"NPROC": "2"},
               settings={"model": "vit_tiny", "dataset": "cifar10", "image_size": 224, "batch_size": 8, "epochs": 1,
                     "lr": 5e-5, "weight_decay": 0.0},
               options={"strategy": "fsdp", "precision": "bf16", "backend": "gloo"},
               published=(P("stated_memory_factor_x", 2, NOTE, "recipe table: FSDP/ZeRO memory 'N' x, N = 2 GPUs "
                            "at this entry's NPROC=2 (each rank holds 1/N of the sharded state); rule of thumb, "
                            "not measured", devices=2),
                          P("stated_speed_factor_x", 2, NOTE, "recipe table: FSDP/ZeRO speed '~N' x (approximate), "
                            "N = 2 GPUs at this entry's NPROC=2, against one GPU; rule of thumb, not measured",
                            devices=2)),
               expect="runs on CPU with Gloo (2 ranks, tiny ViT): proves the sharding path; the note's memory and "
                    "speed factors are rules of thumb for N GPUs, not measured figures",
               decisions=("Auto-wrap = fully_shard per transformer encoder block (FSDP2), bf16 via FSDP's "
                          "MixedPrecisionPolicy with fp32 gradient reduction",)),
    Experiment(id="s004-deepspeed", compares="DDP -> ZeRO stages 1/2/3 (+ CPU offload), DeepSpeed and torch's "
               "own: bytes per rank", pipeline="zero", launcher="torchrun", knobs={"NPROC": "2"},
               settings={**NOTE_SETUP, "model": "vit_b_16", "image_size": 224, "batch_size": 8},
               options={"backend": "gloo"}, variants=ZERO_ARMS,
               expect="metrics.bytes_per_rank has one value per rank and category. Against ddp, with N ranks: "
                      "optimizer_state is 1/N from stage 1, grads 1/N from stage 2, params_at_rest 1/N at stage 3; "
                      "DeepSpeed also keeps an fp32 copy of each rank's partition (master_params), even in fp32 "
                      "training. DeepSpeed's stage 1 hands the optimizer only its gradient partition too, so at "
                      "the step stages 1 and 2 look alike (by DeepSpeed's design stage 2 reduce-scatters in buckets "
                      "during backward; the transient this saves is not measured here). FSDP2 "
                      "reshards after backward in both of its arms: fsdp2-zero-2 differs from fsdp2-zero-3 in "
                      "params_in_forward. Time: sharding adds communication, so on CPU over Gloo expect the ZeRO "
                      "arms slower than ddp and offload slowest; losses equal ddp's within float tolerance. "
                      "deepspeed-note is the note's config, not a bytes comparison: a 4x larger batch per "
                      "rank and an optimizer step every 4th loop step (metrics.optimizer_steps = loop steps / 4), "
                      "so its losses and times do not compare with the other arms'; fp16 only with --device cuda.",
               decisions=(NOTE_DECISION.replace("a registered torchvision model", "ViT-B/16 at 224 (its encoder "
                                                "blocks are FSDP2's units), bs 8 per rank").replace(
                                                    "AdamW lr 1e-4 as", "AdamW lr 1e-4 in every arm, as"),
                          "DeepSpeed runs on CPU processes here (tried for real: 0.19.8 from its sdist, about 10 s "
                          "to build and install with its small dependencies): DS_ACCELERATOR=cpu selects its CPU "
                          "accelerator, which talks over Gloo when oneCCL's bindings are absent; it JIT-builds one "
                          "C++ op (deepspeed_shm_comm) on first use, about a minute on 2 cores, cached after. It is "
                          "the optional extra `zero`; without it the deepspeed-* arms are skipped with the reason "
                          "and the torch arms still run.",
                          "The note's snippet is DeepSpeed's config; the upstream equivalents run beside it: "
                          "ZeroRedundancyOptimizer (stage 1), FSDP2 fully_shard with reshard_after_forward=False "
                          "(stage 2) and True (stage 3), CPUOffloadPolicy (offload).",
                          "DeepSpeed gets torch's AdamW (torch_adam), gradient_clipping 0 (0.19 clips to norm 1.0 "
                          "by default, which DDP does not: found by a loss mismatch), bounded buckets "
                          "(bucket_elements, 4M) and "
                          "stage3_param_persistence_threshold=0, so every parameter is partitioned and the arms "
                          "differ only in sharding; DeepSpeed's defaults would keep small parameters whole and "
                          "allocate 5e8-element buffers.",
                          "deepspeed-note follows the note's config: ZeRO stage 3, offload_param and "
                          "offload_optimizer to the CPU, train_batch_size 256, gradient_accumulation_steps 4, fp16, "
                          "and the engine's own loop (engine(x), engine.backward(loss), engine.step() per "
                          "micro-batch; DeepSpeed divides the loss by 4 and steps the optimizer on every 4th). The "
                          "note leaves the micro-batch unsaid: DeepSpeed needs train_batch_size = micro-batch x "
                          "accumulation x ranks, so it is 256 / (4 x 2) = 32 per rank at NPROC=2 (--batch-size "
                          "32; another NPROC is refused with the --batch-size it needs, e.g. 16 at NPROC=4, and a "
                          "rank count that does not divide 64 is refused). Its other keys are the stage arms' "
                          "(torch AdamW, no clipping, bounded buckets).",
                          "fp16 is not run on CPU: DeepSpeed 0.19.8's CPU accelerator reports fp16 only where "
                          "oneDNN has fp16 kernels (is_fp16_supported() is "
                          "torch.ops.mkldnn._is_mkldnn_fp16_supported(): False on the AMD EPYC this was checked "
                          "on) and the engine refuses fp16 otherwise ('Type fp16 is not supported on your "
                          "device.'). The arm sets precision=auto: fp16 on CUDA as the note, fp32 "
                          "on CPU, and the record says so in its notes. fp32, not bf16, on CPU: bf16 is neither the "
                          "note's format nor that of the fp32 arms beside it, and without AMX it is no faster on "
                          "a CPU; -o precision=fp16 on a CPU is skipped with this reason.",
                          "Smoke scale runs every arm at the pipeline's tiny batch (4 per rank): deepspeed-note then "
                          "keeps accumulation 4 and DeepSpeed's train_batch_size follows the batch (4 x 4 x 2 = 32, "
                          "said in the record); bench and book scale run the note's 256.")),
    Experiment(id="s004-dataloader", compares="DataLoader defaults -> the note's settings (8 workers, pin, prefetch)",
               pipeline="ch02_layers",
               settings={**NOTE_SETUP, "model": "cnn_cifar10", "lr": 1e-5, "weight_decay": 0.005},
               variants=(Variant("defaults"),
                         Variant("note", settings={"shuffle": True, "num_workers": 8, "pin_memory": True,
                                               "prefetch_factor": 2, "persistent_workers": True})),
               expect="Workers help when decoding costs more than the step; on 2 cores 8 workers may not help.",
               decisions=("The note's settings on the book's CIFAR-10 CNN (Adam lr 1e-5); pin_memory is recorded "
                          "as having no effect without a GPU.",)),
    Experiment(id="scale-channels-last", compares="NCHW -> channels_last memory format (ResNet-18, CIFAR-10)",
               pipeline="channels_last", settings={**NOTE_SETUP, "model": "resnet18", "batch_size": 128},
               variants=(Variant("nchw"), Variant("channels_last", options={"channels_last": True})),
               expect="channels_last helps Tensor Core convolutions on GPUs; on CPU the effect depends on oneDNN.",
               decisions=("Not from a seed source: the issue asks for it beside the course's compile entry. "
                          "ResNet-18 (BatchNorm + convolutions) at 32x32, AdamW lr 1e-4 is replaced by the book's "
                          "Adam (wd 0.005) at lr 1e-4.",)),
)

# every entry of the lecture note: its factors are rules of thumb for no stated machine (NOTE_HARDWARE)
EXPERIMENTS = tuple(dataclasses.replace(entry, hardware=NOTE_HARDWARE) if entry.id.startswith("s004-") else entry
                    for entry in EXPERIMENTS)
