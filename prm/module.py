"""The step verifier: SFT on Lean's step labels, then GRPO with the exact-agreement reward.

``mode: sft``: next-token loss on the label tokens and the closing end of turn, in either layout
(:mod:`prm.verifier_io`). ``mode: grpo``: manual optimization; each training step samples
``grpo.num_generations`` label sequences per proof (``after_each_step``: each label where its step
ends, :meth:`PRMModule.stepwise_rollouts`; ``after_proof``: answers under the label grammar), scores
each by exact agreement with Lean's labels and runs the project's TRL-parity update
(:meth:`leanloop.grpo.update.GRPOUpdate.step`): one optimizer update per step, so
``trainer.max_steps`` is the number of updates (the paper: 500). Validation in both modes: greedy
labels on held-out proofs, ``val/exact`` (all labels right), ``val/first_error`` and ``val/parsed``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch

from leanloop.grpo.objective import GRPOConfig
from leanloop.grpo.rollout import RolloutGenerationConfig, Rollouts, TransformersRollout, interleaved_rollouts
from leanloop.grpo.update import GRPOUpdate, finite_stats
from leanloop.training.models import ModelSpec, load_model
from leanloop.training.module import HFModule, set_torch_threads
from leanloop.training.optim import OptimConfig
from prm.predict import greedy_labels, model_layout, wrong_probabilities
from prm.verifier_io import (
    END_OF_TURN,
    LabelGrammar,
    Layout,
    StepLabelReward,
    exact_agreement,
    first_error,
    parse_labels,
    render_labels,
)


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
        layout: Layout = "after_each_step",
    ) -> None:
        """``base``: the model (paper: Qwen3-4B; embedded default: tiny Qwen3, or the SFT run
        ``artifacts://prm/<run>`` for GRPO). ``grpo`` / ``generation``: the update and its rollouts
        (TRL's names). ``threads``: torch intra-op threads (None: torch's default).
        ``gradient_checkpointing``: recompute each layer in backward (SFT rows and GRPO updates at length).
        ``wrong_weight`` (sft): the loss weight of a `` -`` label token against 1 for every other answer
        token; about 3 balances Lean's 76/24 correct/wrong steps. ``layout``: where the labels go,
        after the whole proof or each right after its step (:mod:`prm.verifier_io`)."""
        if wrong_weight <= 0:
            raise ValueError(f"wrong_weight must be > 0, got {wrong_weight}")
        trained_layout = model_layout(base) if base is not None and base.run_dir() is not None else layout
        if trained_layout != layout:
            raise ValueError(f"{base.name} was trained with layout {trained_layout}; set model.layout {trained_layout}")
        set_torch_threads(threads)
        super().__init__(base or ModelSpec(name="qwen3-tiny"), optim)
        if gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self.mode = mode
        self.layout = layout
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
        rollouts = self.stepwise_rollouts(batch) if self.layout == "after_each_step" else self.answer_rollouts(batch)
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

    def answer_rollouts(self, batch: list) -> Rollouts:
        """``after_proof``: G answers per proof sampled under the label grammar."""
        from transformers import LogitsProcessorList

        prompts = [e.prompt_ids for e in batch]
        width = self.rollout.encode_prompts(prompts, 1)[0].shape[1]
        counts = [len(e.labels) for e in batch for _ in range(self.grpo.num_generations)]
        if max(counts) + 1 > self.generation.max_new_tokens:
            raise ValueError(
                f"generation.max_new_tokens {self.generation.max_new_tokens} cannot hold {max(counts)} "
                "labels + end of turn; raise it to data.max_proof_steps + 1"
            )
        grammar = LabelGrammar(self.tokenizer, width, counts)  # sampled answers label every step
        return self.rollout.generate(
            self.model, prompts, self.grpo.num_generations, logits_processor=LogitsProcessorList([grammar])
        )

    def stepwise_rollouts(self, batch: list) -> Rollouts:
        """``after_each_step``: G label sequences per proof, each label sampled (at the rollout
        temperature, between `` +`` and `` -`` as the grammar allows) where its step ends, the text of
        the steps forced between them. While the labels so far are all `` +`` the context is the one
        scoring reads, so one forward pass gives every label's distribution up to the first `` -``;
        the labels after it are `` -`` (first-error shape) and, not being sampled, not trained on:
        the rollouts' ``loss_mask`` covers the labels up to the first `` -``."""
        g = self.grpo.num_generations
        unlabelled = [e.encoded.relabelled(None, self.tokenizer) for e in batch]
        hazards = wrong_probabilities(self.model, self.tokenizer, unlabelled, len(batch), cumulative=False)
        t = self.generation.temperature
        rows, texts, masks = [], [], []
        for example, hazard in zip(batch, hazards):
            for _ in range(g):
                labels, wrong = [], False
                for h in hazard:
                    logit = math.log(max(h, 1e-12)) - math.log(max(1 - h, 1e-12))
                    wrong = wrong or bool(torch.rand(()) < torch.sigmoid(torch.tensor(logit / t)))
                    labels.append(not wrong)
                encoded = example.encoded.relabelled(labels, self.tokenizer)
                first = first_error(labels)
                trained = encoded.slots if first is None else encoded.slots[: first + 1]
                rows.append(encoded)
                texts.append(render_labels(labels))
                masks.append([k - encoded.answer_start for k in trained])
        return interleaved_rollouts(rows, masks, texts, g, self.rollout.pad_id, next(self.model.parameters()).device)

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
        unlabelled = [e.encoded.relabelled(None, self.tokenizer) for e in batch]
        predicted = greedy_labels(self.model, self.tokenizer, unlabelled, self.layout, batch_size=len(batch))
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
            "layout": self.layout,
            "answer_format": (
                "one ' +'/' -' token per step, then " + END_OF_TURN
                if self.layout == "after_proof"
                else "each numbered step followed by its ' +'/' -' token, then " + END_OF_TURN
            ),
        }
