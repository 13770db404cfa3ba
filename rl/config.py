"""Typed configuration of the RL stage (``configs/rl/*.yaml``, parsed by LightningCLI).

``model:`` (:class:`rl.module.GRPOModule`) takes ``policy``, ``optim``, ``grpo``, ``generation``,
``reward``, ``lean`` (the shared :class:`leanloop.lean.check.LeanConfig`), ``reward_checks``,
``evaluator``, ``drift``, ``refresh``, ``audit`` and ``evaluation``;
``data:`` (:class:`rl.data.RLData`) takes the statement sets, the filters and the curriculum
(``data.lean`` is linked from ``model.lean``). The dataclasses of each mechanism live beside its
code and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from feedback_model.evaluator import FeedbackEvaluatorOptions
from leanloop.lean.backends import BackendConfig
from leanloop.lean.check import LeanConfig
from leanloop.training.models import ModelSpec
from leanloop.training.optim import OptimConfig
from rl.audit import AuditConfig
from rl.curriculum import CurriculumConfig, ReplayConfig
from rl.drift import DriftConfig
from rl.passk_eval import EvaluationConfig
from rl.filters import FilterConfig
from leanloop.grpo.objective import GRPOConfig
from rl.refresh import RefreshConfig
from leanloop.grpo.rollout import RolloutGenerationConfig
from leanloop.prover.statements import StatementsConfig
from leanloop.prover.prompt import PromptConfig

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class AdapterConfig:
    kind: Literal["none", "lora", "qlora"] = "none"
    """none: full fine-tuning; lora: PEFT LoRA; qlora: LoRA over a bitsandbytes NF4 base (GPU)."""
    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: list(LORA_TARGETS))
    double_quant: bool = True
    """qlora: NF4 with double quantization of the quantization constants."""
    compute_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    """qlora: dtype the 4-bit weights are dequantized to for matmuls."""


@dataclass
class PolicyConfig:
    base: ModelSpec = field(default_factory=lambda: ModelSpec("qwen3-tiny"))
    """The starting checkpoint, named explicitly: the sft run (``artifacts://sft/default``), a
    checkpoint folder or a hub id. Never "the latest run"."""
    fallbacks: list[ModelSpec] = field(default_factory=list)
    """Tried in order when ``base`` names a run or folder that does not exist (e.g. the pretrain
    run when no sft run was made); the one used is logged and recorded in the manifest."""
    adapter: AdapterConfig = field(default_factory=AdapterConfig)
    gradient_checkpointing: bool = False
    prompt: PromptConfig | None = None
    """How statements are shown; default: the format the sft run recorded (raw for other checkpoints)."""


@dataclass
class RewardChecksConfig:
    """How rl runs its reward checks beyond the shared ``lean:`` block: the simulated Lean latency,
    the isolation candidates get, and the circuit breaker."""

    latency: Literal["none", "recorded"] = "none"
    """recorded: answers arrive after the Lean time recorded with them (rl.latency.TimedBackend)."""
    latency_scale: float = 1.0
    """recorded latency: Lean's clock compression (0.01 plays a 60 s timeout in 0.6 s)."""
    unrecorded_delay: float = 0.0
    """recorded latency: Lean time of a program with no recording (before ``scale``)."""
    allow_shared_repl: bool = False
    """Run the reward checks on REPL processes shared between candidates (``kind: kimina``, or
    ``local.fresh_process: false``). Refused unless set: a candidate's elaboration-time code then
    survives into later candidates' checks (docs/threat_model.md)."""
    sandbox: Literal["strong", "weak"] = "strong"
    """``strong``: a local backend's candidate REPLs must run in a sandbox with private /tmp,
    /var/tmp, /dev/shm and HOME, an environment allow-list and a PID namespace (bubblewrap, or
    unprivileged user namespaces), and every worker's budget must fit the machine; rl refuses to
    start otherwise. ``weak``: accept a weaker one (landrun, or none), with one warning line and
    ``sandbox.weak`` in the manifest."""
    max_infra_error_share: float | None = 0.5
    """Circuit breaker: stop the run with an error when more than this share of a step's Lean
    checks end ``infra_error`` (a broken toolchain, header pickle or REPL set-up gives every rollout
    reward None; a run must not train on a stream of Nones). None: never stop."""

    def __post_init__(self) -> None:
        share = self.max_infra_error_share
        if share is not None and not 0.0 <= share < 1.0:
            raise ValueError(f"reward_checks.max_infra_error_share must be in [0, 1) or null, got {share}")


RL_LEAN = LeanConfig(profile="rl")
"""rl's ``lean:`` default: rewards are checked under the hardened ``rl`` profile (the only one rl takes)."""
RENAMED_KEYS = {
    "lean.workers": "lean.concurrency",
    **{
        f"lean.{name}": f"reward_checks.{name}"
        for name in (
            "latency",
            "latency_scale",
            "unrecorded_delay",
            "allow_shared_repl",
            "sandbox",
            "max_infra_error_share",
        )
    },
}
"""The old rl ``lean:`` options and where they went (refused by name, :func:`leanloop.tool.check_renamed_keys`)."""


@dataclass
class RewardConfig:
    protocol: Literal["lean", "lean_matched", "hybrid", "evaluator"] = "hybrid"
    """lean (full timeout), lean_matched (per-proof timeout lowered so that lean-only scores the batch
    within the hybrid cutoff: the same time budget), hybrid (seed Eq. 8),
    evaluator (evaluator verdicts only). Prechecks and missing code are 0 under every protocol."""
    matched_timeout: float | None = None
    """lean_matched: the per-proof timeout at which lean-only scores a batch within the hybrid cutoff
    (``make bench-rl`` prints it for the simulated pool; or lower it until a lean-only step's
    reward/scoring_s matches a hybrid run's reward/cutoff_s)."""
    evaluator_reward: Literal["verdict", "score"] = "verdict"
    shadow_evaluator: bool = True
    """Under the lean protocols, run the evaluator beside Lean (not for rewards) so the drift
    monitor and the timeout audit can compare it with Lean."""
    evaluator_deadline_s: float | None = None
    """Deadline handed to the evaluator (items it has not scored by then wait for Lean)."""
    extraction: Literal["auto", "code_block", "continuation"] | None = None
    """How the proof is taken from a completion; default: code_block for chat prompts, auto
    (block if any, else the continuation) for raw prompts."""


@dataclass
class EvaluatorConfig:
    kind: Literal["classifier", "history", "untrained_onetoken", "factory", "none"] = "classifier"
    """classifier: a classifiers run (``path``); history: the same run's history-aware evaluator
    (classifiers.history: its score stacked with the problem's earlier Lean labels and, at the hybrid
    cutoff, the verdicts of the group's finished siblings; the run must have saved its stacker); factory: ``factory`` ("module:callable") called with
    ``path`` and ``options`` (e.g. the feedback cascade); untrained_onetoken: a randomly initialised
    one-token classifier (debug runs only: its verdicts are noise, and the logs say so); none."""
    path: str | None = None
    """A classifier run (``artifacts://classifiers/onetoken_default``) or its final/ folder."""
    factory: str | None = None
    options: FeedbackEvaluatorOptions = field(default_factory=FeedbackEvaluatorOptions)
    """kind factory: the evaluator's options (mode, generation, self_consistency, cascade), passed as
    keywords to the factory. Typed: config layers merge keys, numbers stay numbers."""
    history: str | None = None
    """kind history: a data run (``artifacts://data/default``) whose Lean labels start the per-problem
    evidence; every step's Lean labels join it. None: the evidence starts empty."""
    threshold: float | None = None
    """Override the threshold recorded with the classifier (kind history: with its stacker)."""
    batch_size: int = 16
    device: str = "auto"
    base: ModelSpec = field(default_factory=lambda: ModelSpec("qwen3-tiny"))
    """untrained_onetoken: the model built from scratch."""
    max_length: int = 512
    """untrained_onetoken: context in tokens."""


__all__ = [
    "AdapterConfig",
    "AuditConfig",
    "BackendConfig",
    "CurriculumConfig",
    "DriftConfig",
    "EvaluationConfig",
    "EvaluatorConfig",
    "FilterConfig",
    "GRPOConfig",
    "LeanConfig",
    "ModelSpec",
    "OptimConfig",
    "PolicyConfig",
    "PromptConfig",
    "RefreshConfig",
    "ReplayConfig",
    "RewardChecksConfig",
    "RewardConfig",
    "RolloutGenerationConfig",
    "StatementsConfig",
]
