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

.PHONY: help venv demo test list report data-generate data-verify ipex-venv $(IDS)

help: ## Show the targets
	@echo "make demo        fresh machine: venv + a CPU bench ladder on offline data + summary table"
	@echo "make test        fresh machine: test prerequisites + the whole suite (what CI runs)"
	@echo "make list        every experiment id, its target, launcher and published ratio"
	@echo "make <id>        run one experiment through its launcher, e.g. make ch2-nobias ARGS='--scale bench'"
	@echo "make report      results/*.jsonl -> published vs reproduced table"
	@echo "make data-generate / data-verify   offline datasets in torchvision's on-disk formats"
	@echo "make ipex-venv   .venv-ipex: the frozen Intel line (torch 2.8 + IPEX 2.8) for ch4-ipex-densenet"

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
	if [[ "$${ACCEL_TEST_IPEX:-0}" == 1 ]]; then $(MAKE) ipex-venv; fi
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

# The frozen Intel line: IPEX's last CPU release pairs with torch 2.8 only, so it gets its own venv
# (about 4 GB, ~75 s here). `make test` builds it only when ACCEL_TEST_IPEX=1 (CI sets it).
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
