"""Stage 2: GRPO against the compiler, on the RL stage's machinery."""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import lightning as L

from autoformalizer.config import AUTOFORMALIZER_LEAN, RENAMED_KEYS, PolicyConfig, TypecheckConfig
from autoformalizer.data import END_OF_TURN
from autoformalizer.module import PolicyRunHooks
from autoformalizer.prompts import extract_statement
from autoformalizer.reward import NO_VERDICT, GatedReward, RewardConfig, RewardResult, training_value
from leanloop.jsonl import append_jsonl
from leanloop.lean.check import LeanConfig
from leanloop.training.module import set_torch_threads
from leanloop.training.optim import OptimConfig, configure_optimizers
from leanloop.grpo.objective import GRPOConfig
from leanloop.grpo.rollout import RolloutGenerationConfig, TransformersRollout
from leanloop.grpo.update import GRPOUpdate, finite_stats

STEPS_FILE = "steps.jsonl"
ROLLOUTS_FILE = "rollouts.jsonl"
GATES = ("malformed", "rejected", "fails_typecheck", "typechecks", *NO_VERDICT, "input_error")


@dataclass
class FormalizationReward:
    """One rollout's training reward (``reward``: what GRPO reads) and the gated result behind it."""

    reward: float | None
    result: RewardResult
    well_formed_only: bool  # credited with the well-formedness part only (no Lean verdict)
    statement: str  # the Lean text taken from the completion


class AutoformalizerGRPOModule(PolicyRunHooks, L.LightningModule):
    # The RL stage's GRPO update (leanloop.grpo.update.GRPOUpdate), held as is, not re-implemented: it reads
    # the ``.reward`` of each scored rollout; its KL reference is the Stage-1 policy (reference_adapter).
    RENAMED_KEYS = RENAMED_KEYS

    def __init__(
        self,
        policy: PolicyConfig | None = None,
        optim: OptimConfig | None = None,
        grpo: GRPOConfig | None = None,
        generation: RolloutGenerationConfig | None = None,
        reward: RewardConfig | None = None,
        lean: LeanConfig = AUTOFORMALIZER_LEAN,
        typecheck: TypecheckConfig | None = None,
        threads: int | None = None,
    ) -> None:
        """``policy``: the Stage-1 run (``artifacts://autoformalizer/<run>``): its adapters trained further
        (``policy.stage1: continue``, the design; the KL reference is a frozen copy of them) or, with
        ``merge``, merged, re-quantized to NF4 with fresh adapters (the reference: adapters off). ``grpo``: G, beta
        and the objective (TRL's names); ``generation``: sampling; ``reward``: the gated reward's
        numbers and what no Lean verdict means for training; ``lean``: the Verifier's backend and
        budget; ``typecheck``: the statement harness (header, warnings rule). ``threads``: torch
        intra-op threads (None: torch's default)."""
        super().__init__()
        set_torch_threads(threads)
        from autoformalizer.policy import build_policy

        self.automatic_optimization = False
        self.policy_config = policy or PolicyConfig()
        self.optim = optim or OptimConfig()
        self.grpo = grpo or GRPOConfig(beta=0.04)
        self.generation = generation or RolloutGenerationConfig()
        self.reward_config = reward or RewardConfig()
        self.lean = lean
        self.typecheck = typecheck or TypecheckConfig()
        self.save_hyperparameters()
        self.model, self.tokenizer = build_policy(self.policy_config)
        self.model.train()
        self.reference = None  # the update then uses reference_adapter(): the Stage-1 policy
        self.update = GRPOUpdate(self.grpo, self.generation, reference_adapter=self.reference_adapter)
        self.rollout = TransformersRollout(self.tokenizer, self.generation, [END_OF_TURN, self.tokenizer.eos_token])
        self.gated: GatedReward | None = None
        self.history: list[dict[str, Any]] = []
        self.totals: Counter = Counter()
        self.export_info: dict[str, Any] = {}

    @contextmanager
    def reference_adapter(self):
        """The KL reference is the Stage-1 policy: with continued adapters, their frozen ``reference``
        copy (the adapters switched off would be the raw base); with fresh ones, the adapters off."""
        from autoformalizer.adapters import REFERENCE_ADAPTER

        if REFERENCE_ADAPTER not in getattr(self.model, "peft_config", {}):
            with self.model.disable_adapter():
                yield
            return
        self.model.set_adapter(REFERENCE_ADAPTER)
        try:
            yield
        finally:
            self.model.set_adapter("default")  # default trainable again, the reference frozen

    # -- set-up ---------------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        if self.gated is not None:
            return
        checker = self.typecheck.checker(self.lean)
        inner = checker.verifier.backend
        if hasattr(inner, "index"):
            inner.index  # load the replay recordings now, not inside the first step
        self.gated = GatedReward(checker, self.reward_config)
        print(f"[autoformalizer_grpo] {self.provenance()}", file=sys.stderr)

    def provenance(self) -> str:
        """One honest sentence on what the rewards can be."""
        backend = self.lean.backend.kind
        text = f"Lean backend: {backend}"
        if backend == "replay":
            text += (
                " (recorded Lean output; no Lean toolchain here): a generated statement has a type-check "
                "verdict only if that exact program was recorded, so almost every well-formed statement is "
                "'unavailable'"
            )
        if self.reward_config.unavailable == "well_formed_only":
            text += (
                f"; statements without a Lean verdict are credited with the well-formedness part of the "
                f"gated reward only ({self.reward_config.fails_typecheck}: the least any well-formed statement "
                "gets, a lower bound, not a type-check verdict; the type-check and faithfulness terms are "
                "never credited without Lean)"
            )
        else:
            text += "; statements without a Lean verdict get no reward (advantage 0, outside the group baseline)"
        return text

    def configure_optimizers(self):
        return configure_optimizers(self, self.optim)

    @property
    def run_dir(self) -> Path | None:
        return Path(self.trainer.default_root_dir) if self._trainer is not None else None

    # -- one step -------------------------------------------------------------------------------
    def score(self, problems: list, texts: list[str]) -> list[FormalizationReward]:
        """The gated reward of G completions per problem (rows group after group)."""
        G = self.grpo.num_generations
        statements = [extract_statement(t) for t in texts]
        owners = [problems[i // G] for i in range(len(texts))]
        results = self.gated.score(
            statements,
            [p.formal for p in owners],
            [p.header if self.typecheck.problem_header else None for p in owners],
        )
        scored = []
        for result, statement in zip(results, statements):
            value, credited = training_value(result, self.reward_config)
            scored.append(FormalizationReward(value, result, credited, statement))
        return scored

    def training_step(self, batch, batch_idx: int):
        problems = list(batch)
        G = self.grpo.num_generations
        step = int(self.global_step)
        began, began_cpu = time.perf_counter(), time.process_time()
        rollouts = self.rollout.generate(self.model, [p.prompt for p in problems], G)
        generated = time.perf_counter()
        scored = self.score(problems, rollouts.texts)
        scoring = time.perf_counter()
        update = self.update.step(self, self.model, self.reference, rollouts, scored)
        stats = {
            **update,
            **self._reward_stats(scored),
            "time/generation_s": generated - began,
            "time/scoring_s": scoring - generated,
            "time/update_s": time.perf_counter() - scoring,
            "time/step_cpu_s": time.process_time() - began_cpu,
            "train/completion_tokens": float(rollouts.completion_mask.sum(dim=1).float().mean()),
            "train/truncated": float(sum(rollouts.truncated)) / len(rollouts),
        }
        self.log_dict(finite_stats(stats), on_step=True, on_epoch=False, batch_size=len(rollouts))
        self.history.append({"step": step, **finite_stats(stats)})
        self._append(STEPS_FILE, [self.history[-1]])
        self._append(
            ROLLOUTS_FILE,
            [
                {
                    "step": step,
                    "problem": problems[i // G].name,
                    "statement": s.statement,
                    "gate": s.result.gate,
                    "gated_reward": s.result.value,
                    "training_reward": s.reward,
                    "well_formed_only": s.well_formed_only,
                    "reason": s.result.reason[:300],
                }
                for i, s in enumerate(scored)
            ],
        )

    def _reward_stats(self, scored: list[FormalizationReward]) -> dict[str, float]:
        gates = Counter(s.result.gate for s in scored)
        values = [s.reward for s in scored if s.reward is not None]
        no_verdict = sum(gates[g] for g in NO_VERDICT)
        credited = sum(s.well_formed_only for s in scored)
        faith = [s.result.faithfulness for s in scored if s.result.faithfulness is not None]
        self.totals.update({f"gate:{g}": n for g, n in gates.items()})
        self.totals["rollouts"] += len(scored)
        self.totals["no_verdict"] += no_verdict
        self.totals["well_formed_only"] += credited
        self.totals["unscored"] += len(scored) - len(values)
        return {
            "train/reward": sum(values) / len(values) if values else float("nan"),
            "train/well_formed": 1.0 - gates["malformed"] / len(scored),
            "train/faithfulness": sum(faith) / len(faith) if faith else float("nan"),
            "reward/no_verdict": float(no_verdict),
            "reward/well_formed_only": float(credited),
            "reward/unscored": float(len(scored) - len(values)),
            **{f"reward/gate/{g}": float(gates[g]) for g in GATES},
        }

    def _append(self, name: str, rows: list[dict]) -> None:
        if self.run_dir is None or not self.trainer.is_global_zero:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / name, "a", encoding="utf-8") as handle:
            for row in rows:
                append_jsonl(handle, row)

    # -- after fit: report ----------------------------------------------------------------------
    def on_fit_start(self) -> None:
        if self.run_dir is not None and self.trainer.is_global_zero:
            for name in (STEPS_FILE, ROLLOUTS_FILE):
                (self.run_dir / name).unlink(missing_ok=True)

    def on_fit_end(self) -> None:
        if self.run_dir is not None and self.trainer.is_global_zero:
            write_grpo_report(self, self.run_dir)

    # -- hooks called by leanloop.training.cli.run_stage (export and identity: PolicyRunHooks) -----

    def manifest_counts(self) -> dict[str, Any]:
        return {
            "reward_provenance": self.provenance(),
            "rollouts": dict(self.totals),
            "grpo": asdict(self.grpo),
            "unavailable_treatment": self.reward_config.unavailable,
        }


def _plot(history: list[dict], path: Path) -> bool:
    from leanloop.plots import Lines, Stacked, step_panels

    return (
        step_panels(
            history,
            path,
            [
                Lines(
                    "reward",
                    [("train/reward", "mean reward"), ("train/well_formed", "well-formed")],
                    ylim=(-0.05, 1.05),
                ),
                Stacked("rollouts by reward gate", "reward/gate/{}", list(GATES)),
            ],
        )
        is not None
    )


def write_grpo_report(module: AutoformalizerGRPOModule, run_dir: Path) -> Path:
    totals = module.totals
    lines = [
        "# Autoformalizer GRPO (Stage 2)",
        "",
        f"- start: `{module.policy_config.name}`; G = "
        f"{module.grpo.num_generations}, beta = {module.grpo.beta}, loss {module.grpo.loss_type}",
        f"- rewards: {module.provenance()}",
        f"- rollouts: {totals['rollouts']}; without a Lean verdict: {totals['no_verdict']}; credited with the "
        f"well-formedness part only: {totals['well_formed_only']}; with no reward at all: {totals['unscored']}",
        "- gates: " + ", ".join(f"{g} {totals[f'gate:{g}']}" for g in GATES if totals[f"gate:{g}"]),
    ]
    flat = sum(h.get("train/zero_std_groups") == 1.0 for h in module.history)
    if flat:
        lines.append(
            f"- {flat} of {len(module.history)} steps had equal rewards within every group: no advantage, only "
            "the KL term acted on them (and it is zero while the policy still equals its reference)"
        )
    lines += [
        "",
        "| step | reward | well-formed | no verdict | well-formed only | zero-std groups | loss |",
        "|---|---|---|---|---|---|---|",
    ]

    def fmt(value: Any) -> str:
        return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"

    for h in module.history:
        lines.append(
            f"| {h['step']} | {fmt(h.get('train/reward'))} | {fmt(h.get('train/well_formed'))} | "
            f"{int(h.get('reward/no_verdict', 0))} | {int(h.get('reward/well_formed_only', 0))} | "
            f"{fmt(h.get('train/zero_std_groups'))} | {fmt(h.get('train/loss'))} |"
        )
    if _plot(module.history, run_dir / "rewards.png"):
        lines += ["", "![rewards](rewards.png)"]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
