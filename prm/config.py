"""Typed configs of the prm stage's tools: labelling (``prm.label``), generation (``prm.generate``)
and evaluation (``prm.evaluate``). The verifier's training options are the module's and the
datamodule's own arguments (``prm.train``, LightningCLI). Every YAML under ``configs/prm/`` layers
(``--config a.yaml --config b.yaml``) and takes dotted overrides."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from leanloop.lean.check import LeanConfig
from leanloop.prover.generation import SamplingConfig
from leanloop.prover.statements import StatementsConfig
from leanloop.training.models import ModelSpec
from leanloop.vllm_engine import VLLMEngineConfig
from prm.review import ReviewRule
from prm.verifier_io import Layout

RECORDED_RL_LEAN = "shared://candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"


@dataclass
class SplitConfig:
    """Splits by theorem: every proof of a theorem lands in the same split (hash of the name)."""

    valid: float = 0.1
    test: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        if self.valid < 0 or self.test < 0 or self.valid + self.test >= 1:
            raise ValueError("split fractions must be >= 0 and leave room for train")


@dataclass
class RecordedConfig:
    """The embedded default: whole programs with recorded Lean answers, cut into top-level tactic
    steps and labelled from the recorded first error (no generator model)."""

    path: str = RECORDED_RL_LEAN
    """RL-Lean rows (``code``, ``name``, ``compilation_result``)."""
    sources: list[str] = field(default_factory=lambda: ["rl_lean"])
    """Replay sources holding the programs' Lean answers."""
    limit: int | None = None
    """The first N rows (smoke runs)."""


PARSE_ERRORS = ReviewRule("unknown tactic|unexpected token|expected term", "syntax", "Lean could not parse the tactic")
"""The scripted reviewer's default rule: a failure Lean reports as a parse error is about the step's
text, not its mathematics."""


@dataclass
class ReviewerConfig:
    """LeanPRM step 3. ``rules`` (the default, CPU): a scripted rule reviewer (regex on the compiler
    output; by default Lean's parse errors are syntax, every other failure mathematical). ``model``:
    a second LM reads the failure. ``none``: every failure counts."""

    kind: Literal["none", "rules", "model"] = "rules"
    model: ModelSpec | None = None
    rules: list[ReviewRule] = field(default_factory=lambda: [PARSE_ERRORS])
    otherwise: Literal["mathematical", "syntax", "unclear"] = "mathematical"
    max_new_tokens: int = 256


@dataclass
class JudgeConfig:
    """Step correspondence: ``model`` asks an LM whether sentence and tactic say the same thing."""

    kind: Literal["none", "model"] = "none"
    model: ModelSpec | None = None


@dataclass
class LabelConfig:
    RENAMED_KEYS: ClassVar[dict[str, str]] = {
        "backend": "lean.backend",
        "profile": "lean.profile",
        "timeout": "lean.timeout",
    }

    run: str = "default"
    """Output: artifacts/prm_label/<run>/."""
    recorded: RecordedConfig | None = field(default_factory=RecordedConfig)
    """The embedded default (recorded whole programs); null to label only generated proofs."""
    generated: str | None = None
    """A prm-generate run (``artifacts://prm_generate/<run>``) whose paired proofs are labelled."""
    checker: Literal["auto", "incremental", "prefix"] = "auto"
    """auto: incremental REPL proof states when ``lean.backend`` is local, prefix compilation otherwise."""
    lean: LeanConfig = field(default_factory=LeanConfig)
    """How generated proofs are checked: the backend runs the step checks (``checker``) and the whole
    program, whose verdict the acceptance ``profile`` decides (also for ``recorded``, whose programs
    are answered by its own replay sources)."""
    reviewer: ReviewerConfig = field(default_factory=ReviewerConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    splits: SplitConfig = field(default_factory=SplitConfig)


@dataclass
class GenerateConfig:
    model: ModelSpec = field(default_factory=ModelSpec)
    """The generator (paper: a strong instruction model; embedded default: tiny random Qwen3)."""
    run: str = "default"
    """Output: artifacts/prm_generate/<run>/."""
    statements: StatementsConfig = field(default_factory=StatementsConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    backend: Literal["transformers", "vllm"] = "transformers"
    threads: int | None = None
    vllm: VLLMEngineConfig = field(default_factory=VLLMEngineConfig)
    """backend vllm only: the engine's size (:mod:`leanloop.vllm_engine`)."""
    shard: str | None = None
    """``I/N``: sample only shard I of N of the statements (a stable hash of each name picks its
    shard) as the run ``<run>/shards/<I>-of-<N>/``; default: an array task's own shard, else all."""
    merge_shards: int = 0
    """Above 0: merge that many finished shards into the run's final/samples.jsonl instead of sampling."""
    system: str | None = None


@dataclass
class ExternalSet:
    """A published step-label set in its own JSONL format."""

    format: Literal["processbench", "prmbench", "prm800k"]
    path: str
    limit: int | None = None


@dataclass
class EvalConfig:
    model: ModelSpec = field(default_factory=lambda: ModelSpec(name="artifacts://prm/grpo"))
    """The step verifier (a prm run)."""
    layout: Layout | None = None
    """Where the verifier reads its labels (:mod:`prm.verifier_io`); None: what the prm run's manifest
    records (:func:`prm.predict.model_layout`)."""
    run: str = "default"
    """Output: artifacts/prm_eval/<run>/."""
    dataset: str | None = "artifacts://prm_label/default"
    """Held-out theorems: the test split of a prm-label run."""
    split: str = "test"
    decision_split: str | None = "valid"
    """The split of ``dataset`` on which the decision rules are chosen: thresholds on P(step wrong)
    with the best exact score (``verifier``, ``tfidf_steps@exact``) or F1 on wrong steps
    (``verifier@f1``, ``tfidf_steps@f1``) there, same ``limit`` and ``max_steps``. None: the
    verifier flags a step at P(wrong) >= 0.5."""
    external: list[ExternalSet] = field(default_factory=list)
    """Further sets in ProcessBench / PRMBench / PRM800K format, reported the same way."""
    limit: int | None = None
    """N proofs of each set, taken in rounds over its theorems (every theorem's first proof, then
    every theorem's second, ...), so N >= the theorem count covers every held-out theorem."""
    max_steps: int = 24
    """Proofs are shown with at most this many labelled steps (longer ones are cut to their first
    ``max_steps``; counted as ``cut`` in metrics.json and the report)."""
    batch_size: int = 8
    classifier: str | None = None
    """A classifiers run (``artifacts://classifiers/<run>``) scored on proof prefixes as a baseline."""
    seed: int = 0
    threads: int | None = None
