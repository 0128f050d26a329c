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

.PHONY: help venv demo test list report data-generate data-verify reference-timings gpu-reference harness-overhead $(IDS)

help: ## Show the targets
	@echo "make demo        fresh machine: venv + a CPU bench ladder on offline data + summary table"
	@echo "make test        fresh machine: test prerequisites + the whole suite (what CI runs)"
	@echo "make list        every experiment id, its target, launcher and published ratio"
	@echo "make <id>        run one experiment through its launcher, e.g. make ch2-nobias ARGS='--scale bench'"
	@echo "make report      results/*.jsonl -> results/report.md (+ PNG plots), report.csv, report.html"
	@echo "make reference-timings   CPU reference run at bench scale -> \$$(REF_OUT) (records + report)"
	@echo "make data-generate / data-verify   offline datasets in torchvision's on-disk formats"

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

$(IDS): venv
	$(ACCEL) launch $@ $(ARGS)
