"""The step verifier: SFT on Lean's step labels, then GRPO with the exact-agreement reward.

``mode: sft``: next-token loss on the label answer (`` + + - ...``), prompt masked.
``mode: grpo``: manual optimization; each training step samples ``grpo.num_generations`` answers per
proof (:class:`leanloop.grpo.rollout.TransformersRollout` under the label grammar), scores each by exact agreement with
Lean's labels (:func:`prm.verifier_io.exact_agreement`) and runs the project's TRL-parity update
(:meth:`leanloop.grpo.update.GRPOUpdate.step`) — one optimizer update per step, so
``trainer.max_steps`` is the number of updates (the paper: 500). Validation in both modes: greedy
answers on held-out proofs, ``val/exact`` (all labels right), ``val/first_error`` and ``val/parsed``.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from leanloop.grpo.objective import GRPOConfig
from leanloop.grpo.rollout import RolloutGenerationConfig, TransformersRollout
from leanloop.grpo.update import GRPOUpdate, finite_stats
from leanloop.training.models import ModelSpec, load_model
from leanloop.training.module import HFModule, set_torch_threads
from leanloop.training.optim import OptimConfig
from prm.predict import greedy_answers
from prm.verifier_io import END_OF_TURN, LabelGrammar, StepLabelReward, exact_agreement, first_error, parse_labels


class PRMModule(HFModule):
    def __init__(
        self,
        base: ModelSpec | None = None,
        optim: OptimConfig | None = None,
        mode: Literal["sft", "grpo"] = "sft",
        grpo: GRPOConfig | None = None,
        generation: RolloutGenerationConfig | None = None,
        threads: int | None = None,
        gradient_checkpointing: bool = False,
        wrong_weight: float = 1.0,
    ) -> None:
        """``base``: the model (paper: Qwen3-4B; embedded default: tiny Qwen3, or the SFT run
        ``artifacts://prm/<run>`` for GRPO). ``grpo`` / ``generation``: the update and its rollouts
        (TRL's names). ``threads``: torch intra-op threads (None: torch's default).
        ``gradient_checkpointing``: recompute each layer in backward (SFT rows and GRPO updates at length).
        ``wrong_weight`` (sft): the loss weight of a `` -`` label token against 1 for every other answer
        token; about 3 balances Lean's 76/24 correct/wrong steps."""
        if wrong_weight <= 0:
            raise ValueError(f"wrong_weight must be > 0, got {wrong_weight}")
        set_torch_threads(threads)
        super().__init__(base or ModelSpec(name="qwen3-tiny"), optim)
        if gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self.mode = mode
        self.grpo = grpo or GRPOConfig(num_generations=4)
        self.generation = generation or RolloutGenerationConfig(max_new_tokens=64)
        self.wrong_weight = wrong_weight
        self.wrong_token = LabelGrammar(self.tokenizer, 0, []).labels[1]
        self.reference = None
        self.update = GRPOUpdate(self.grpo, self.generation)
        if mode == "grpo":
            self.automatic_optimization = False
            self.rollout = TransformersRollout(self.tokenizer, self.generation, [END_OF_TURN, self.tokenizer.eos_token])
            if self.grpo.beta != 0.0:  # a frozen copy of the starting weights is the KL reference
                self.reference = load_model(self.base, tokenizer=self.tokenizer).eval().requires_grad_(False)
        self.save_hyperparameters()

    def training_step(self, batch: Any, batch_idx: int):
        if self.mode == "sft":
            loss, trained = self.answer_loss(batch)
            self.log("train/loss", loss, prog_bar=True, batch_size=max(trained, 1))
            return loss
        from transformers import LogitsProcessorList

        prompts = [e.prompt for e in batch]
        width = self.rollout.encode_prompts(prompts, 1)[0].shape[1]
        counts = [len(e.labels) for e in batch for _ in range(self.grpo.num_generations)]
        if max(counts) + 1 > self.generation.max_new_tokens:
            raise ValueError(
                f"generation.max_new_tokens {self.generation.max_new_tokens} cannot hold {max(counts)} "
                "labels + end of turn; raise it to data.max_proof_steps + 1"
            )
        grammar = LabelGrammar(self.tokenizer, width, counts)  # sampled answers label every step
        rollouts = self.rollout.generate(
            self.model, prompts, self.grpo.num_generations, logits_processor=LogitsProcessorList([grammar])
        )
        rewards = []
        for row, text in enumerate(rollouts.texts):
            truth = batch[row // self.grpo.num_generations].labels
            rewards.append(StepLabelReward(exact_agreement(text, truth), parse_labels(text, len(truth)) is not None))
        stats = self.update.step(self, self.model, self.reference, rollouts, rewards)
        stats["reward/exact"] = sum(r.reward for r in rewards) / len(rewards)
        stats["reward/parsed"] = sum(r.parsed for r in rewards) / len(rewards)
        self.log_dict(finite_stats(stats), prog_bar=False, batch_size=len(batch))
        self.log("reward", stats["reward/exact"], prog_bar=True, batch_size=len(batch))
        return None

    def answer_loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int]:
        """Next-token loss on the answer tokens only (`` -`` tokens weighted by ``wrong_weight``). The
        answer is a few tokens after a long prompt, so the LM head is applied to those positions alone
        (a full [B, T, vocab] logits tensor would be gigabytes for Qwen's 151k vocabulary and most of a
        CPU step)."""
        causal = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        hidden = causal.base_model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False
        ).last_hidden_state
        targets = batch["labels"][:, 1:]
        scored = targets != -100
        logits = causal.get_output_embeddings()(hidden[:, :-1][scored])
        answer = targets[scored]
        losses = torch.nn.functional.cross_entropy(logits.float(), answer, reduction="none")
        weights = torch.where(answer == self.wrong_token, self.wrong_weight, 1.0)
        return (losses * weights).sum() / weights.sum(), int(scored.sum())

    def validation_step(self, batch: list, batch_idx: int) -> None:
        answers = greedy_answers(
            self.model, self.tokenizer, [e.prompt for e in batch], [len(e.labels) for e in batch], batch_size=len(batch)
        )
        predicted = [parse_labels(a, len(e.labels)) for a, e in zip(answers, batch)]
        n = len(batch)
        self.log("val/exact", sum(p == e.labels for p, e in zip(predicted, batch)) / n, batch_size=n, prog_bar=True)
        self.log(
            "val/first_error",
            sum(p is not None and first_error(p) == first_error(e.labels) for p, e in zip(predicted, batch)) / n,
            batch_size=n,
        )
        self.log("val/parsed", sum(p is not None for p in predicted) / n, batch_size=n)

    def manifest_model(self) -> dict[str, Any]:
        return {
            **super().manifest_model(),
            "mode": self.mode,
            "answer_format": "one ' +'/' -' token per step, then " + END_OF_TURN,
        }
