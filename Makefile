# Thin entry points. `make` lists them; every catalog id is also a target (`make ch2-nobias`).
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
ACCEL := $(PY) -m pipelines
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
DATA ?= data
ARGS ?=
PYTEST_ARGS ?=
ACCEL_TEST_IPEX ?= $(if $(filter true 1,$(CI)),1,0)

# A command-line variable one letter from a known one (NPROCS=4 for NPROC) is refused, not ignored. Python starts
# only for a name that neither this Makefile nor launch/ reads (a command's process count stays its own).
ifneq ($(strip $(MAKEOVERRIDES)),)
OPEN := (
READ_VAR := \$$[$(OPEN){][A-Z_][A-Z0-9_]*|^[A-Z_][A-Z0-9_]* *[:?+]?=
OVERRIDE_NAMES := $(foreach d,$(MAKEOVERRIDES),$(if $(findstring =,$(d)),$(firstword $(subst =, ,$(d)))))
OTHER_VARS := $(shell printf '%s\n' $(foreach n,$(OVERRIDE_NAMES),'$(n)') | grep -xE '[A-Z_][A-Z0-9_]*' | grep -vxF \
  -e "$$(grep -ohE '$(READ_VAR)' Makefile catalog-ids.mk launch/* | grep -oE '[A-Z_][A-Z0-9_]*')")
VAR_TYPO := $(if $(OTHER_VARS),$(shell python3 ci/check-make-vars.py $(OTHER_VARS)))
$(if $(VAR_TYPO),$(error $(VAR_TYPO)))
endif

# Experiment ids: catalog-ids.mk, generated from the catalog (ci/update-readme-map.py; a test keeps it current).
# CATALOG_IDS, not IDS: the reference scripts read IDS from the environment, which a make variable of that name
# would replace (IDS=ch6-prune make reference-timings ran every experiment).
include catalog-ids.mk
DIST_IDS := ch9-cpu-threads ch9-cpu-gloo ch10-gpu-nccl s004-dp-vs-ddp # own targets in the distributed section below

.PHONY: help venv demo lint test test-fast test-all test-images list report data-generate data-verify ipex-venv reference-timings gpu-reference harness-overhead calibrate-intervals $(CATALOG_IDS)

help: ## This list: every target with its `##` comment (a test keeps it equal to the .PHONY targets)
	@echo "usage: make TARGET [VAR=value ...]; every catalog id is a target too: make <id> [ARGS='--scale book']"
	@echo "(make list shows the ids, accel run --help the ARGS, accel launch --help the launchers' knobs)"
	@awk -F ':.*## ' '/^[a-zA-Z0-9_.-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(firstword $(MAKEFILE_LIST))

# Byte-compile a venv's installed packages once, on every core (about 50 s for .venv on 2 cores). Runs often
# start with PYTHONDONTWRITEBYTECODE=1 (CI's environment sets it, and the images do); then Python caches nothing
# it compiles, and every process compiled torch from source again: import torch took 8.5 s instead of 4 s here,
# for each of the suite's thousand-odd interpreters. -x: the one file of torch's tests written in Python 3.12.
COMPILE_VENV = $(1)/bin/python -m compileall -q -j 0 -x 'py312_intrinsics' \
  "$$($(1)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"

venv: $(STAMP) ## Create .venv with the pinned host stack and the ccl backend (backends/ccl) built against it
CCL_SOURCES := $(wildcard backends/ccl/setup.py backends/ccl/csrc/*.cpp backends/ccl/accel_ccl/*.py)
$(STAMP): pyproject.toml containers/locks/ccl.lock $(CCL_SOURCES)
	[[ -x $(VENV)/bin/python ]] || ci/need-free-disk.sh 7 $(VENV) 'make venv ($(VENV), the pinned host stack)'
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	# pip's byte-compiling runs file by file (110 s here): --no-compile, then COMPILE_VENV below, on every core.
	# oneCCL's wheels by the cpu-intel image's hashes first (containers/locks/ccl.lock); the project's ccl group
	# then finds them installed
	$(VENV)/bin/pip install --quiet --no-compile --require-hashes --no-deps -r containers/locks/ccl.lock
	$(VENV)/bin/pip install --quiet --no-compile -e '.[test,zero,history,ccl]'
	# the ccl backend, compiled against this torch and the oneCCL wheels just installed (about 30 s)
	$(VENV)/bin/pip install --quiet --no-build-isolation --no-deps ./backends/ccl
	$(call COMPILE_VENV,$(VENV))
	rm -f $(VENV)/.installed-* && touch $@

demo: venv ## CPU ladder at bench scale on offline (generated) data
	PYTHON=$(PY) DATA=$(DATA) ci/demo.sh

# Real errors (pyflakes F, syntax E9) and pyproject.toml's line length (E501); ruff's other rules are not enforced.
lint: venv ## ruff: syntax errors, pyflakes and the line length (pyproject.toml) in pipelines, tests, ci and backends
	$(VENV)/bin/ruff check pipelines tests ci backends --select E501,F,E9

# The three test tiers and their budgets on 2 cores (tests/budgets.toml; tests/README.md says what each holds).
# Each writes pytest's JUnit XML to results/junit/TIER.xml, and ci/test-budget.py checks its recorded time.
JUNIT = results/junit/$@.xml
# pytest-xdist workers: one a core, up to 4; TEST_WORKERS=N to choose (0: one process). tests/conftest.py keeps a
# module that shares an expensive fixture or a machine-wide resource on one worker (ONE_WORKER), hands out the
# longest tests first (LongestFirst) and runs the `whole_machine` ones with no other test beside them.
TEST_WORKERS ?= $(shell n=$$(nproc); echo $$(( n < 4 ? n : 4 )))
ifneq ($(filter test test-fast test-all,$(MAKECMDGOALS)),)
ifeq ($(shell [[ "$(TEST_WORKERS)" =~ ^[0-9]+$$ ]] && echo count),)
$(error TEST_WORKERS=$(TEST_WORKERS) is not a number of pytest workers: pass a whole number, 0 for one process)
endif
endif
XDIST = $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder)
TIER_CHECK = $(PY) ci/test-budget.py check $@ $(JUNIT)

test: venv lint ## Lint, install test prerequisites, run every real-process test (what CI runs; its budget: tests/budgets.toml)
	ci/install-test-deps.sh
	if [[ "$(ACCEL_TEST_IPEX)" == 1 ]]; then $(MAKE) ipex-venv; fi
	$(PY) -m pytest $(XDIST) --junitxml=$(JUNIT) $(PYTEST_ARGS)
	$(TIER_CHECK)

test-fast: venv ## Unit and refusal tests plus 4 real canary runs (budget 3 min: tests/budgets.toml)
	$(PY) -m pytest $(XDIST) -m '(canary or not slow) and not long and not images_all' --junitxml=$(JUNIT) $(PYTEST_ARGS)
	$(TIER_CHECK)

test-all: venv lint ## make test plus the long soak and scale cases and every image (nightly or by hand)
	ci/install-test-deps.sh
	if [[ "$(ACCEL_TEST_IPEX)" == 1 ]]; then $(MAKE) ipex-venv; fi
	$(PY) -m pytest $(XDIST) -m '' --junitxml=$(JUNIT) $(PYTEST_ARGS)
	$(TIER_CHECK)

test-images: venv ## The heavy image builds alone: cuda, cpu-intel and every .def (spython), built and run
	ci/install-test-deps.sh
	$(PY) -m pytest -m images_all tests/containers/test_container_build.py $(PYTEST_ARGS)

list: venv ## Every experiment id
	@$(ACCEL) list

report: venv ## results/*.jsonl -> results/report.md (+ PNG plots), report.csv, report.html (AGAINST=results/reference/<run>)
	$(ACCEL) report --results-dir results --out results $(if $(AGAINST),--against $(AGAINST))

# Reference timings: fixed output folder so a rerun on a quiet machine replaces the committed one.
# REF_OUT: the script's default is this machine class's committed folder (ci/reference-timings.sh).
REF_OUT ?=
reference-timings: venv ## CPU experiments at bench scale with repeats + harness overhead + report -> this machine class's results/reference/cpu-<N>core*-bench/
	PYTHON=$(PY) DATA=$(DATA) $(if $(REF_OUT),REF_OUT=$(REF_OUT)) ci/reference-timings.sh

gpu-reference: venv ## GPU experiments at bench scale (needs a GPU; ci/gpu-reference.sh --dry-run without)
	PYTHON=$(PY) DATA=$(DATA) ci/gpu-reference.sh $(ARGS)

harness-overhead: venv ## Shared loop vs a hand-written loop, same CNN workload (prints the ratio)
	$(PY) ci/harness-overhead.py --results-dir results $(ARGS)

calibrate-intervals: venv ## A/A pairs and injected 3/5/10 % slow-downs through the whole method (hours; ARGS='--runs 20', '--entry harness-calibration-compile')
	$(PY) ci/calibrate-intervals.py --data-root $(DATA) $(ARGS)

data-generate: venv ## Generated Fashion-MNIST, CIFAR-10 and IMDB in data/ (clearly marked generated)
	$(ACCEL) data generate fashion_mnist --root $(DATA) --train 6000 --test 1000
	$(ACCEL) data generate cifar10 --root $(DATA) --train 5000 --test 1000
	$(ACCEL) data generate imdb --root $(DATA) --train 2000 --test 500

data-verify: venv ## Check the datasets under data/ (checksums and format)
	$(ACCEL) data verify --root $(DATA)

$(filter-out $(DIST_IDS),$(CATALOG_IDS)): venv
	$(ACCEL) launch $@ $(ARGS)

# The frozen Intel line: IPEX's last CPU release pairs with torch 2.8 only, so it gets its own venv
# (about 7 GB with PyPI's CUDA libraries), installed from the cpu-intel image's hashed lock
# (containers/locks/ipex.lock: torch 2.8, IPEX, oneCCL from PyPI), then the ccl backend compiled against it.
# `make test` builds it only when ACCEL_TEST_IPEX=1, which is the default under CI (CI=true), so CI runs the
# IPEX and torch-2.8 ccl tests for real and laptops skip them with a reason. It is byte-compiled like .venv
# (COMPILE_VENV); .ci/run builds it beside .venv (make -j2 venv ipex-venv): both are mostly downloads.
IPEX_VENV ?= .venv-ipex
IPEX_LOCK := containers/locks/ipex.lock
IPEX_STAMP := $(IPEX_VENV)/.installed-$(shell cat $(IPEX_LOCK) | cksum | cut -d' ' -f1)

ipex-venv: $(IPEX_STAMP) ## .venv-ipex from the cpu-intel lock (torch 2.8.0, IPEX 2.8.0, oneCCL) + the ccl backend
$(IPEX_STAMP): $(IPEX_LOCK) $(CCL_SOURCES)
	[[ -x $(IPEX_VENV)/bin/python ]] || ci/need-free-disk.sh 8 $(IPEX_VENV) 'make ipex-venv ($(IPEX_VENV), torch 2.8 + IPEX)'
	python3 -m venv $(IPEX_VENV)
	$(IPEX_VENV)/bin/pip install --quiet --upgrade pip
	$(IPEX_VENV)/bin/pip install --quiet --no-compile --require-hashes -r $(IPEX_LOCK)
	$(IPEX_VENV)/bin/pip install --quiet --no-compile --no-deps -e .
	$(IPEX_VENV)/bin/pip install --quiet --no-build-isolation --no-deps ./backends/ccl
	$(call COMPILE_VENV,$(IPEX_VENV))
	rm -f $(IPEX_VENV)/.installed-* && touch $@
# ---------------------------------------------------------------------------------------------------
# Distributed training (chapters 8-11). The launcher comes from the catalog (launch/torchrun.sh,
# mpirun.sh, srun.sh); knobs pass through the environment: NPROC, THREADS, NNODES, MASTER_ADDR/PORT, ...
# ch9-cpu-threads, ch9-cpu-gloo and ch10-gpu-nccl have sweep targets of their own (DIST_IDS, above).
CORES := $(shell nproc 2>/dev/null || echo 1)
NPROC ?= 2
ROUNDS ?= 3
# ARGS that choose the repeats themselves (smoke and book scale run in one process; --rounds, --repeats) drop ROUNDS
ROUNDS_IN_ARGS = $(filter smoke book --scale=smoke --scale=book --rounds --rounds=% --repeats --repeats=%,$(ARGS))
NGPU ?= $(or $(filter-out 0,$(shell nvidia-smi -L 2>/dev/null | grep -c '^GPU')),1)
THREAD_SWEEP := $(foreach t,1 2 4 8 12 16,$(if $(shell [ $(t) -le $(CORES) ] && echo y),$(t)))
RANK_SWEEP := $(foreach n,2 4 8,$(if $(shell [ $(n) -le $(CORES) ] && echo y),$(n)))

.PHONY: cpu-ddp ch11-multinode doctor

cpu-ddp: venv ## Chapter 9: NPROC Gloo ranks under torchrun, THREADS per rank (default: cores / NPROC), ROUNDS=3 rounds
	@case "$(NPROC)" in ''|*[!0-9]*|0*) echo "make cpu-ddp: NPROC=$(NPROC) is not a number of ranks; use a whole number of at least 1 (e.g. make cpu-ddp NPROC=4)" >&2; exit 2;; esac
	NPROC=$(NPROC) $(if $(THREADS),THREADS=$(THREADS)) $(ACCEL) launch ch9-cpu-gloo --variant ranks=$(NPROC) $(if $(ROUNDS_IN_ARGS),,$(if $(ROUNDS),--rounds $(ROUNDS))) $(ARGS)

ch9-cpu-threads: venv ## Table 9.1: 1, 2, 4, ... threads, up to the cores this machine has
	$(ACCEL) launch ch9-cpu-threads $(foreach t,$(THREAD_SWEEP),--variant threads=$(t)) $(ARGS)

ch9-cpu-gloo: venv ## Table 9.2: ranks x threads at this machine's core count (2 ranks at least)
	set -e; for n in $(or $(RANK_SWEEP),2); do \
	  NPROC=$$n $(ACCEL) launch ch9-cpu-gloo --variant ranks=$$n $(ARGS); done

ch10-gpu-nccl: venv ## Table 10.2: one process per GPU over NCCL (NGPU, default: all visible)
	NPROC=$(NGPU) $(ACCEL) launch ch10-gpu-nccl $(ARGS)

# nn.DataParallel is one process over the GPUs, DDP one process per GPU: the DDP launch records the DataParallel arm
# as skipped, and with 2+ GPUs the DataParallel arm then runs in one process (both on CUDA, DDP over NCCL).
MULTI_GPU := $(filter-out 0 1,$(NGPU))
s004-dp-vs-ddp: venv ## one device vs DDP (NPROC ranks) vs nn.DataParallel (2+ GPUs), in rounds
	NPROC=$(NPROC) $(ACCEL) run s004-dp-vs-ddp --variant one-device --variant ddp $(if $(MULTI_GPU),--device cuda -o backend=nccl) $(ARGS)
	$(if $(MULTI_GPU),$(ACCEL) run s004-dp-vs-ddp --variant dataparallel --device cuda $(ARGS))

ch11-multinode: venv ## Chapter 11: mpirun + NCCL across HOSTS=a:8,b:8 (NP = total ranks)
	@[ -n "$(HOSTS)" ] || { echo "make: HOSTS=host:slots,host:slots is required (e.g. HOSTS=node1:8,node2:8)" >&2; exit 2; }
	HOSTS=$(HOSTS) $(if $(NP),NP=$(NP)) $(ACCEL) launch ch11-multinode-mpi-nccl $(ARGS)

doctor: venv ## Check this machine for distributed runs (shm, rendezvous port, backends, OpenMP, SLURM, GPUs)
	$(ACCEL) doctor

# ---- Containers: containers/Dockerfile (a stage per target), containers/<target>/<target>.def, ----
# ---- containers/locks/<lock>.lock (containers/build.sh) ----
TARGET ?=
.PHONY: image sif sif-from-image wheelhouse lock image-digests recipes
image: ## OCI image with Podman or Docker: make image TARGET=cpu [OFFLINE=1] [BASE_IMAGE=...]
	containers/build.sh image "$(TARGET)"
sif: ## Apptainer image from the .def: make sif TARGET=cpu -> containers/cpu.sif
	containers/build.sh sif "$(TARGET)"
sif-from-image: ## Apptainer image from the local OCI image (make image first)
	containers/build.sh sif-from-image "$(TARGET)"
wheelhouse: ## Wheels for an air-gapped build: containers/wheelhouse/TARGET/ from the lock
	containers/build.sh wheelhouse "$(TARGET)"
lock: ## Regenerate the lock TARGET installs (containers/locks/torch.lock or ipex.lock) with uv (hashes)
	containers/build.sh lock "$(TARGET)"
image-digests: ## Resolve the pinned base tags to digests where a registry answers
	containers/build.sh digests
recipes: venv ## Regenerate every Dockerfile and .def from containers/recipe.py (HPC Container Maker)
	PYTHON=$(PY) containers/build.sh recipes
