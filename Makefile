# leanloop: one target per stage; stages chain through artifacts/<stage>/<run>/manifest.json.
# `make help` lists the targets. CONFIG=path swaps a stage's config; RUN=name names its run folder.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export WANDB_MODE ?= offline
export TOKENIZERS_PARALLELISM ?= false
export DS_BUILD_OPS ?= 0
STAMP := $(VENV)/.installed
ART := artifacts

.PHONY: help setup test demo
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-22s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	DS_BUILD_OPS=0 $(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP) ## create .venv and install leanloop with its pinned dependencies (idempotent)

test: setup ## run the whole test suite offline (README's test command)
	$(PY) -m pytest -n 2 -q

demo: setup ## the main job on the embedded default: every stage end to end, on CPU
	$(MAKE) data
# >>> demo chain (stages append their target to the demo recipe above as they land)

# --- data stage (issue: foundation) ---
.PHONY: data bench-data
data: setup ## label candidate proofs with Lean into a corpus (CONFIG=configs/data/X.yaml)
	$(PY) -m data.build --config $(or $(CONFIG),configs/data/default.yaml)

bench-data: setup ## precheck / corpus / annotation / metric throughput
	$(PY) -m leanloop.bench.data

# --- training machinery: sweeps and cluster ---

# --- pretrain stage ---

# --- classifiers stage ---

# --- sft stage ---

# --- feedback_model stage ---

# --- rl stage ---

# --- autoformalizer stage ---
