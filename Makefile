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

# Experiment ids come from the catalog (stdlib only, so no venv is needed to list them).
IDS := $(shell python3 -m pipelines.core.catalog ids 2>/dev/null)

.PHONY: help venv demo test list report data-generate data-verify $(IDS)

help: ## Show the targets
	@echo "make demo        fresh machine: venv + a CPU bench ladder on offline data + summary table"
	@echo "make test        fresh machine: test prerequisites + the whole suite (what CI runs)"
	@echo "make list        every experiment id, its target, launcher and published ratio"
	@echo "make <id>        run one experiment through its launcher, e.g. make ch2-nobias ARGS='--scale bench'"
	@echo "make report      results/*.jsonl -> published vs reproduced table"
	@echo "make data-generate / data-verify   offline datasets in torchvision's on-disk formats"
	@echo "make image|sif|sif-from-image|wheelhouse|lock TARGET=cpu|cpu-intel|cuda|mpi   containers (README)"

venv: $(STAMP) ## Create .venv with the pinned host stack
$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $@

demo: venv ## CPU ladder at bench scale on offline (generated) data
	PYTHON=$(PY) DATA=$(DATA) ci/demo.sh

test: venv ## Install test prerequisites, run the whole suite
	ci/install-test-deps.sh
	$(PY) -m pytest $(PYTEST_ARGS)

list: venv ## Every experiment id
	@$(ACCEL) list

report: venv ## Published vs reproduced, from results/
	$(ACCEL) report --results-dir results

data-generate: venv ## Generated Fashion-MNIST and CIFAR-10 in data/ (clearly marked generated)
	$(ACCEL) data generate fashion_mnist --root $(DATA) --train 6000 --test 1000
	$(ACCEL) data generate cifar10 --root $(DATA) --train 5000 --test 1000

data-verify: venv
	$(ACCEL) data verify --root $(DATA)

$(IDS): venv
	$(ACCEL) launch $@ $(ARGS)

# ---- Containers: containers/<target>/{Dockerfile,<target>.def,requirements.lock} (containers/build.sh) ----
TARGET ?=
.PHONY: image sif sif-from-image wheelhouse lock image-digests
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
