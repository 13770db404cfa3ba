"""Typed configuration of the autoformalizer (read by jsonargparse from configs/autoformalizer/eval/*.yaml).

The sections here cover the policy model (unfused MoE, NF4, adapters), retrieval (System B),
repair (System A + loop), the statement type-check harness (``typecheck``; Lean itself is the shared
``lean:`` block), the statement pairs (:mod:`autoformalizer.data`) and the evaluation. The training
stages take the same sections as LightningModule / LightningDataModule arguments (``model.policy``,
``model.lean``, ``model.typecheck``, ``data.pairs``): one set of dataclasses, read by LightningCLI
there and by jsonargparse here. GRPO's gated reward (``model.reward``,
:class:`autoformalizer.reward.RewardConfig`) is the training stage's alone: the evaluation measures
statements, it pays no rewards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from leanloop.lean.check import LeanConfig

from autoformalizer.adapters import AdapterConfig
from leanloop.training.moe import MoEArchConfig
from autoformalizer.quantize import QuantConfig
from autoformalizer.retrieval import RetrievalConfig
from autoformalizer.typecheck import DEFAULT_HEADER, ERROR_CHARS


@dataclass
class PairSource:
    """A JSONL file of informal/formal pairs and its field names."""

    path: str
    """``shared://statements/<file>`` or any JSONL path."""
    informal_field: str = "informal_prefix"
    formal_field: str = "formal_statement"
    name_field: str = "name"
    split_field: str | None = "split"
    """The row's upstream split; None: every row is ``train`` (Herald, Lean Workbook)."""
    header_field: str | None = "header"
    """The header the statement was written against (imports, opens); missing: taken from the
    formal text's own leading import/open lines, if any."""
    goal_field: str | None = "goal"
    """The elaborated goal of the reference statement, where the source recorded it (DeepSeek's
    miniF2F/ProofNet copies): what ``goal_exact_match`` compares with."""


def _shared(name: str, **fields: Any) -> PairSource:
    return PairSource(path=f"shared://statements/{name}", **fields)


@dataclass
class PairsConfig:
    sources: list[PairSource] = field(
        default_factory=lambda: [
            # the repaired miniF2F-test copy first: it wins over the DeepSeek copy of the same theorem
            _shared("minif2f_goedel_prover_v2_repaired.jsonl", header_field=None),
            _shared("minif2f_deepseek_prover_v1.5.jsonl"),
            _shared("proofnet_deepseek_prover_v1.5.jsonl"),
        ]
    )
    train_splits: list[str] = field(default_factory=lambda: ["valid"])
    """Upstream splits trained on (SFT, GRPO); the paper's Herald / Lean Workbook rows are ``train``."""
    test_splits: list[str] = field(default_factory=lambda: ["test"])
    """Upstream splits held out for evaluation."""
    val_fraction: float = 0.1
    """Share of the train theorems (stable hash of the name) kept for the validation loss."""
    max_train_pairs: int | None = None
    """Cap on train pairs (the paper: 40,000), a seeded sample."""
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.sources:
            raise ValueError("pairs.sources is empty: name at least one JSONL of informal/formal pairs")
        if set(self.train_splits) & set(self.test_splits):
            raise ValueError(f"train_splits {self.train_splits} and test_splits {self.test_splits} overlap")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must lie in [0, 1), got {self.val_fraction}")


@dataclass
class PolicyConfig:
    """The policy model. ``name: qwen3-moe-tiny`` (the project's tiny Qwen3-MoE preset) builds the
    random tiny model from ``arch`` (tests, the embedded default); a checkpoint folder or hub id
    (``Qwen/Qwen3-Coder-30B-A3B-Instruct``, read from the local HF cache since the hub is offline) or
    a previous run (``artifacts://autoformalizer/<run>``) is loaded unfused and, with
    ``quant.enabled``, straight into NF4 (see :mod:`autoformalizer.policy`)."""

    name: str = "qwen3-moe-tiny"
    arch: MoEArchConfig = field(default_factory=MoEArchConfig)
    seed: int = 0
    dtype: str = "float32"  # weights that stay unquantized (bf16 on GPU, fp32 is faster on CPU)
    device_map: str = "auto"
    quant: QuantConfig = field(default_factory=lambda: QuantConfig(compute_dtype="float32"))
    adapters: AdapterConfig = field(default_factory=AdapterConfig)
    stage1: Literal["continue", "merge"] = "continue"
    """How a run starts from a Stage-1 run (``name: artifacts://autoformalizer/<run>``): ``continue``
    (the design) rebuilds Stage 1's base as Stage 1 had it and trains Stage 1's adapters further, the
    KL reference a frozen copy of them (the Stage-1 policy exactly); ``merge`` loads Stage 1 merged
    into full precision, re-quantizes it and attaches fresh adapters (``adapters``)."""


@dataclass
class RepairConfig:
    max_turns: int = 5
    error_chars: int = ERROR_CHARS
    did_you_mean: bool = True  # System A: fuzzy Mathlib lookup for unknown identifiers
    retrieval: bool = True  # System B: premises prefixed to the prompts
    max_new_tokens: int = 256


@dataclass
class TypecheckConfig:
    """The autoformalizer's statement harness: what each statement is type-checked under (Lean itself,
    the backend and its budget, is the shared ``lean:`` block)."""

    header: str = DEFAULT_HEADER
    """The header statements are checked under when the pair has none (or ``problem_header`` is off)."""
    problem_header: bool = True
    """Check each statement under its own problem's header when the pair has one (ProofNet and
    miniF2F open different namespaces); false: always ``header``."""
    warnings: Literal["allowed", "only_sorry"] = "allowed"
    """The type-check tier's rule: ``allowed`` (the design's: no error) or ``only_sorry`` (no warning
    other than sorry's either; the stricter rule, an option)."""

    def checker(self, lean: LeanConfig):
        """The statement checker of this harness on ``lean``'s backend (``lean.profile`` must be
        ``statement``: statements end in ``sorry``, which every proof profile rejects)."""
        from autoformalizer.typecheck import StatementChecker

        lean.require_profile(
            "statement", "the autoformalizer checks statements (ending in sorry) under the statement profile"
        )
        return StatementChecker(lean, header=self.header, warnings=self.warnings)


AUTOFORMALIZER_LEAN = LeanConfig(profile="statement")
"""The autoformalizer's ``lean:`` default: statements are checked under the ``statement`` profile,
with its 800,000-heartbeat harness line (null compiles verbatim, which is how every replay recording
was made, so only then can replay answer)."""
RENAMED_KEYS = {f"lean.{name}": f"typecheck.{name}" for name in ("header", "problem_header", "warnings")}
"""The old autoformalizer ``lean:`` options and where they went (refused by name)."""


@dataclass
class EvaluationConfig:
    """What ``python -m autoformalizer.evaluate`` measures (the nine metrics)."""

    split: str = "test"
    """Which split of ``pairs`` (test: never trained on; the policy's runs are checked for overlap)."""
    limit: int | None = 8
    """Problems evaluated: the first N of the split in a seeded shuffle (miniF2F and ProofNet mixed);
    None: all of them."""
    samples: int = 4
    """pass@N: N sampled first-turn statements per problem (0: pass@N is not measured)."""
    temperature: float = 1.0
    seed: int = 0
    threads: int | None = None
    """torch intra-op threads (1 suits the tiny model on a busy CPU); None keeps torch's default."""

    def __post_init__(self) -> None:
        if self.samples < 0 or (self.limit is not None and self.limit < 1):
            raise ValueError("evaluation.samples must be >= 0 and evaluation.limit >= 1 (or null)")


@dataclass
class AutoformalizerConfig:
    """The autoformalizer as a system (retrieval, repair, checks, evaluation): what
    ``python -m autoformalizer.evaluate`` and ``autoformalizer.evaluate_retrieval`` read
    (configs/autoformalizer/eval/*.yaml). The two training stages have their own Lightning configs
    (configs/autoformalizer/*.yaml: Stage 1 SFT; configs/autoformalizer/grpo/*.yaml: Stage 2 GRPO)."""

    RENAMED_KEYS: ClassVar[dict[str, str]] = RENAMED_KEYS

    run: str = "default"
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    repair: RepairConfig = field(default_factory=RepairConfig)
    lean: LeanConfig = field(default_factory=lambda: AUTOFORMALIZER_LEAN)
    typecheck: TypecheckConfig = field(default_factory=TypecheckConfig)
    pairs: PairsConfig = field(default_factory=PairsConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)


def parse_config(argv: list[str] | None = None, prog: str = "autoformalizer") -> AutoformalizerConfig:
    """``--config A.yaml --config B.yaml`` (layered, later wins) plus dotted overrides
    (``--policy.adapters.use_dora true``), as every stage entry point reads its config."""
    from leanloop.tool import parse_config as parse_tool_config

    return parse_tool_config(AutoformalizerConfig, argv, prog=prog)[0]


def load_config(*paths: str, overrides: list[str] | None = None) -> AutoformalizerConfig:
    """Layered YAML files plus ``--key=value`` overrides (the programmatic form of :func:`parse_config`)."""
    return parse_config([f"--config={p}" for p in paths] + list(overrides or []))
