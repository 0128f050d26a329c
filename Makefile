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

# Experiment ids come from the catalog (stdlib only, so no venv is needed to list them).
IDS := $(shell python3 -m pipelines.core.experiments ids 2>/dev/null)
DIST_IDS := ch9-cpu-threads ch9-cpu-gloo ch10-gpu-nccl# sweep targets in the distributed section below

.PHONY: help venv demo test list report data-generate data-verify ipex-venv reference-timings gpu-reference harness-overhead $(IDS)

help: ## Show the targets
	@echo "make demo        fresh machine: venv + a CPU bench ladder on offline data + summary table"
	@echo "make test        fresh machine: test prerequisites + the whole suite (what CI runs)"
	@echo "make list        every experiment id, its target, launcher and published ratio"
	@echo "make <id>        run one experiment through its launcher, e.g. make ch2-nobias ARGS='--scale bench'"
	@echo "make report      results/*.jsonl -> results/report.md (+ PNG plots), report.csv, report.html"
	@echo "make reference-timings   CPU reference run at bench scale -> \$$(REF_OUT) (records + report)"
	@echo "make data-generate / data-verify   offline datasets in torchvision's on-disk formats"
	@echo "make ipex-venv   .venv-ipex: the frozen Intel line (torch 2.8 + IPEX 2.8) for ch4-ipex-densenet"
	@echo "make cpu-ddp NPROC=4 [THREADS=]    chapter 9 Gloo DDP; ch9-cpu-threads / ch9-cpu-gloo sweeps;"
	@echo "make ch10-gpu-nccl NGPU=  ch11-multinode HOSTS=a:8,b:8   make doctor: distributed pre-flight"
	@echo "make s004-deepspeed NPROC=2  ZeRO 0-3 + offload vs DDP, bytes per rank;  make dlf-u9-multigpu NPROC=2  Fabric strategies"
	@echo "make image|sif|sif-from-image|wheelhouse|lock TARGET=cpu|cpu-intel|cuda|mpi   containers (README)"
	@echo "make recipes     regenerate containers/*/Dockerfile and *.def from containers/recipe.py"

venv: $(STAMP) ## Create .venv with the pinned host stack
$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test,zero]'
	rm -f $(VENV)/.installed-* && touch $@

demo: venv ## CPU ladder at bench scale on offline (generated) data
	PYTHON=$(PY) DATA=$(DATA) ci/demo.sh

test: venv ## Install test prerequisites, run the whole suite
	ci/install-test-deps.sh
	if [[ "$(ACCEL_TEST_IPEX)" == 1 ]]; then $(MAKE) ipex-venv; fi
	$(PY) -m pytest $(PYTEST_ARGS)

list: venv ## Every experiment id
	@$(ACCEL) list

report: venv ## Published vs reproduced, from results/ (AGAINST=results/reference/<run> to compare)
	$(ACCEL) report --results-dir results --out results $(if $(AGAINST),--against $(AGAINST))

# Reference timings (issue 5): fixed output folder so a rerun on a quiet machine replaces the committed one.
REF_OUT ?= results/reference/cpu-$(shell nproc)core-bench
reference-timings: venv ## CPU experiments at bench scale with repeats + harness overhead + report
	PYTHON=$(PY) DATA=$(DATA) REF_OUT=$(REF_OUT) ci/reference-timings.sh

gpu-reference: venv ## GPU experiments at bench scale (needs a GPU; ci/gpu-reference.sh --dry-run without)
	PYTHON=$(PY) DATA=$(DATA) ci/gpu-reference.sh $(ARGS)

harness-overhead: venv ## Shared loop vs a hand-written loop, same CNN workload (prints the ratio)
	$(PY) ci/harness-overhead.py --results-dir results $(ARGS)

data-generate: venv ## Generated Fashion-MNIST and CIFAR-10 in data/ (clearly marked generated)
	$(ACCEL) data generate fashion_mnist --root $(DATA) --train 6000 --test 1000
	$(ACCEL) data generate cifar10 --root $(DATA) --train 5000 --test 1000

data-verify: venv
	$(ACCEL) data verify --root $(DATA)

$(filter-out $(DIST_IDS),$(IDS)): venv
	$(ACCEL) launch $@ $(ARGS)

# The frozen Intel line: IPEX's last CPU release pairs with torch 2.8 only, so it gets its own venv
# (about 7 GB with PyPI's CUDA libraries). `make test` builds it only when ACCEL_TEST_IPEX=1, which is the
# default under CI (CI=true), so CI runs the IPEX test for real and laptops skip it with a reason.
IPEX_VENV ?= .venv-ipex
IPEX_PINS := torch==2.8.0 torchvision==0.23.0 intel-extension-for-pytorch==2.8.0 intel-openmp==2024.2.1 \
	click==8.5.1 numpy==2.2.6 pytest==9.2.0
IPEX_STAMP := $(IPEX_VENV)/.installed-$(shell echo '$(IPEX_PINS)' | cksum | cut -d' ' -f1)

ipex-venv: $(IPEX_STAMP) ## .venv-ipex with torch 2.8.0 + intel-extension-for-pytorch 2.8.0
$(IPEX_STAMP):
	python3 -m venv $(IPEX_VENV)
	$(IPEX_VENV)/bin/pip install --quiet --upgrade pip
	$(IPEX_VENV)/bin/pip install --quiet $(IPEX_PINS)
	$(IPEX_VENV)/bin/pip install --quiet --no-deps -e .
	rm -f $(IPEX_VENV)/.installed-* && touch $@
# ---------------------------------------------------------------------------------------------------
# Distributed training (chapters 8-11). The launcher comes from the catalog (launch/torchrun.sh,
# mpirun.sh, srun.sh); knobs pass through the environment: NPROC, THREADS, NNODES, MASTER_ADDR/PORT, ...
# ch9-cpu-threads, ch9-cpu-gloo and ch10-gpu-nccl have sweep targets of their own (DIST_IDS, above).
CORES := $(shell nproc 2>/dev/null || echo 1)
NPROC ?= 2
NGPU ?= $(or $(filter-out 0,$(shell nvidia-smi -L 2>/dev/null | grep -c '^GPU')),1)
THREAD_SWEEP := $(foreach t,1 2 4 8 12 16,$(if $(shell [ $(t) -le $(CORES) ] && echo y),$(t)))
RANK_SWEEP := $(foreach n,2 4 8,$(if $(shell [ $(n) -le $(CORES) ] && echo y),$(n)))

.PHONY: cpu-ddp ch11-multinode doctor

cpu-ddp: venv ## Chapter 9: NPROC Gloo ranks under torchrun, THREADS per rank (default: cores / NPROC)
	NPROC=$(NPROC) $(if $(THREADS),THREADS=$(THREADS)) $(ACCEL) launch ch9-cpu-gloo --variant ranks=$(NPROC) $(ARGS)

ch9-cpu-threads: venv ## Table 9.1: 1, 2, 4, ... threads, up to the cores this machine has
	$(ACCEL) launch ch9-cpu-threads $(foreach t,$(THREAD_SWEEP),--variant threads=$(t)) $(ARGS)

ch9-cpu-gloo: venv ## Table 9.2: ranks x threads at this machine's core count (2 ranks at least)
	set -e; for n in $(or $(RANK_SWEEP),2); do \
	  NPROC=$$n $(ACCEL) launch ch9-cpu-gloo --variant ranks=$$n $(ARGS); done

ch10-gpu-nccl: venv ## Table 10.2: one process per GPU over NCCL (NGPU, default: all visible)
	NPROC=$(NGPU) $(ACCEL) launch ch10-gpu-nccl $(ARGS)

ch11-multinode: venv ## Chapter 11: mpirun + NCCL across HOSTS=a:8,b:8 (NP = total ranks)
	@[ -n "$(HOSTS)" ] || { echo "make: HOSTS=host:slots,host:slots is required (e.g. HOSTS=node1:8,node2:8)" >&2; exit 2; }
	HOSTS=$(HOSTS) $(if $(NP),NP=$(NP)) $(ACCEL) launch ch11-multinode-mpi-nccl $(ARGS)

doctor: venv ## Check this machine for distributed runs (shm, rendezvous port, backends, OpenMP, SLURM, GPUs)
	$(ACCEL) doctor

# ---- Containers: containers/<target>/{Dockerfile,<target>.def,requirements.lock} (containers/build.sh) ----
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
lock: ## Regenerate containers/TARGET/requirements.lock with uv (hashes)
	containers/build.sh lock "$(TARGET)"
image-digests: ## Resolve the pinned base tags to digests where a registry answers
	containers/build.sh digests
recipes: venv ## Regenerate every Dockerfile and .def from containers/recipe.py (HPC Container Maker)
	PYTHON=$(PY) containers/build.sh recipes
