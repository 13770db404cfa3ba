"""Typed configs of the sft stage: training (``sft.train``, parsed by LightningCLI), sampling
(``sft.sample``), evaluation (``sft.evaluate``) and the flywheel driver (``sft.flywheel``).

Non-Lightning entry points parse these dataclasses with jsonargparse, like every tool here, so the
YAML files under ``configs/sft/`` layer and take dotted overrides the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from leanloop.lean.check import LeanConfig
from leanloop.training.models import ModelSpec
from leanloop.prover.generation import SamplingConfig
from leanloop.prover.prompt import PromptConfig
from leanloop.prover.statements import StatementsConfig
from leanloop.vllm_engine import VLLMEngineConfig


@dataclass
class ProofGenerationConfig:
    """The engine that samples candidate proofs (``sft.sample``); what it samples (temperature, k, length)
    is ``sampling`` (:class:`leanloop.prover.generation.SamplingConfig`)."""

    backend: Literal["transformers", "vllm"] = "transformers"
    """transformers (CPU or GPU) or vllm (optional ``gpu`` extra on CUDA; vLLM's CPU build on CPU)."""
    device: str = "auto"
    """transformers: cpu / cuda / auto."""
    threads: int | None = None
    """transformers on CPU: torch intra-op threads (None: torch's default). Small models on busy
    machines run far faster with 1 thread per process; shard over processes instead
    (``make sft-sample ARRAY=N PROFILE=configs/cluster/local.yaml``)."""
    statements_per_batch: int = 1
    """Statements handed to the generator at once (vLLM batches them; written after each batch)."""
    vllm: VLLMEngineConfig = field(default_factory=VLLMEngineConfig)
    """backend vllm only: the engine's size (:mod:`leanloop.vllm_engine`)."""


@dataclass
class SampleConfig:
    model: ModelSpec
    """The prover: an sft run (``artifacts://sft/<run>``), a checkpoint folder or a hub id."""
    run: str = "default"
    """Output run folder: artifacts/sft_sample/<run>/."""
    statements: StatementsConfig = field(default_factory=StatementsConfig)
    prompt: PromptConfig | None = None
    """How statements are shown; default: the format the sft run was trained with (raw text for
    any other checkpoint). Setting one that differs from the sft run's is an error."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    generation: ProofGenerationConfig = field(default_factory=ProofGenerationConfig)
    shard: str | None = None
    """``I/N``: sample only the statements of shard I of N (a stable hash of each statement's name
    picks its shard) as the run ``<run>/shards/<I>-of-<N>/``; default: the array task's own shard
    (``LEANLOOP_SHARD_INDEX``/``_COUNT``, ``SLURM_ARRAY_TASK_ID``/``_COUNT``), else every statement."""
    source: str = "sft-sample"
    """The ``source`` field of every candidate row."""
    keep_completion: bool = True
    """Store each raw completion beside its extracted program (audits of the extractor)."""
    merge_shards: int = 0
    """Above 0: merge that many finished shards into the run's final/candidates.jsonl instead of sampling."""


@dataclass
class EvaluateConfig:
    RENAMED_KEYS: ClassVar[dict[str, str]] = {"verifier": "lean"}

    samples: str
    """A finished sample run (``artifacts/sft_sample/<run>``) whose candidates are verified."""
    run: str = "default"
    """Output run folder: artifacts/sft_eval/<run>/."""
    ks: list[int] = field(default_factory=lambda: [1, 8])
    fewer_than_k: Literal["fail", "refuse"] = "fail"
    """A statement with fewer than k attempts in the sample run (an interrupted or partial run):
    ``fail`` keeps it in pass@k's denominator with the missing attempts counted as failed up to k
    (LLF Eq. 10 divides by all problems); ``refuse`` stops the evaluation instead."""
    lean: LeanConfig = field(default_factory=lambda: LeanConfig(profile="rl"))
    """How the candidates are checked; pass@k is reported under the hardened ``rl`` profile."""
    sft: str | None = None
    """The sft run that produced the prover; its training theorems must not be evaluated on."""


@dataclass
class FlywheelConfig:
    rounds: int = 1
    sft_config: str = "configs/sft/default.yaml"
    sample_config: str = "configs/sft/sample/flywheel.yaml"
    data_config: str = "configs/data/default.yaml"
    """The corpus config of round 0; round r adds the samples of rounds 1..r as sources."""
    prefix: str = "round"
    """Runs are named <prefix>-<r> in every stage (artifacts/sft/round-1, sft_sample/round-1, ...)."""
    continue_from_previous: bool = False
    """Round r > 1 fine-tunes round r-1's prover instead of the sft config's base model (expert
    iteration restarts from the base by default, so errors of one round are not compounded)."""
    sft_args: list[str] = field(default_factory=list)
    sample_args: list[str] = field(default_factory=list)
    """Extra dotted overrides passed to each round's sft / sample entry point."""
