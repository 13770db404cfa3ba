"""Base LightningModule for stages that train a transformers model.

It holds ``self.model`` and ``self.tokenizer`` built from a :class:`ModelSpec`, configures AdamW and
the schedule from an :class:`OptimConfig`, and implements the three hooks ``run_stage`` calls:
``export(final_dir)`` (Hugging Face format: model + tokenizer), ``manifest_model()`` (base, vocab
and tokenizer identity, checked by later stages) and ``manifest_inputs()`` (the run it started
from, if any). A stage subclasses it, sets ``auto_class`` and writes ``training_step``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import lightning as L
import torch

from leanloop.training.inputs import model_identity
from leanloop.training.models import ModelSpec, load_model, load_tokenizer
from leanloop.training.optim import OptimConfig, configure_optimizers


class HFModule(L.LightningModule):
    auto_class: ClassVar[Any] = None  # e.g. transformers.AutoModelForCausalLM; None means causal LM
    # run_stage calls export() on every rank for this class: under DeepSpeed ZeRO-3 the weights are
    # sharded and gathering them is a collective; only global rank zero writes
    export_on_all_ranks: ClassVar[bool] = True

    def __init__(self, base: ModelSpec, optim: OptimConfig | None = None) -> None:
        super().__init__()
        self.base = base
        self.optim = optim or OptimConfig()
        self.tokenizer = load_tokenizer(base)
        self.model = load_model(base, self.auto_class, tokenizer=self.tokenizer)
        # from_pretrained returns a model in eval mode, and Lightning (>= 2.2) keeps the modes it
        # finds: without this, training from a checkpoint would run with dropout switched off
        self.model.train()

    def configure_optimizers(self):
        return configure_optimizers(self, self.optim)

    # -- hooks called by leanloop.training.cli.run_stage --------------------------------------
    def export(self, final_dir: Path) -> None:
        """Save model and tokenizer so that ``from_pretrained(final_dir)`` loads them.

        Called on every rank (ZeRO-3 gathering is a collective, see :func:`save_hf`); global rank
        zero writes.
        """
        trainer = self._trainer
        save_hf(
            self.model,
            self.tokenizer,
            final_dir,
            writer=self.writes_files,
            zero3=trainer is not None and bool(getattr(trainer.strategy, "zero_stage_3", False)),
        )

    @property
    def writes_files(self) -> bool:
        """True on the process that writes the run folder: global rank zero, or outside a Trainer.
        Subclasses' export() write their side files (classifier.json, feedback.json) only here."""
        return self._trainer is None or self._trainer.is_global_zero

    def manifest_model(self) -> dict[str, Any]:
        return model_identity(self.model, self.tokenizer, self.base.base_name())

    def manifest_inputs(self) -> dict[str, Path]:
        run = self.base.run_dir()
        return {"base_model": run} if run is not None else {}


def set_torch_threads(threads: int | None) -> None:
    """A module's ``threads`` option: torch intra-op threads (1 suits tiny models on a busy CPU, where
    more threads spin against each other); None keeps torch's default."""
    if threads is None:
        return
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    torch.set_num_threads(threads)


def save_hf(model: Any, tokenizer: Any, final_dir: Path, *, writer: bool = True, zero3: bool = False) -> None:
    """``model.save_pretrained`` (+ the tokenizer's) into ``final_dir`` when ``writer``.

    Under DeepSpeed ZeRO-3 each rank holds only a shard of every weight and ``param.data`` is an
    empty placeholder outside a gather, so a plain ``save_pretrained`` would write empty tensors.
    With ``zero3`` EVERY rank must call this (the gather is a collective; a rank that skips it
    hangs the others); the full weights exist inside the gather, where the writer saves them.
    """
    if zero3:
        import deepspeed

        # modifier_rank=None: read-only gather on all ranks, nothing is scattered back afterwards
        with deepspeed.zero.GatheredParameters(list(model.parameters()), modifier_rank=None):
            if writer:
                _write(model, tokenizer, final_dir)
    elif writer:
        _write(model, tokenizer, final_dir)


def _write(model: Any, tokenizer: Any, final_dir: Path) -> None:
    Path(final_dir).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(final_dir)
    if tokenizer is not None:
        tokenizer.save_pretrained(final_dir)
