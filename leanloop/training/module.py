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

    def configure_optimizers(self):
        return configure_optimizers(self, self.optim)

    # -- hooks called by leanloop.training.cli.run_stage --------------------------------------
    def export(self, final_dir: Path) -> None:
        """Save model and tokenizer so that ``from_pretrained(final_dir)`` loads them.

        Called on every rank; gathers ZeRO-3-sharded weights first (a collective), writes on rank 0.
        """
        trainer = self._trainer
        writer = trainer is None or trainer.is_global_zero
        if trainer is not None and getattr(trainer.strategy, "zero_stage_3", False):
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(self.model.parameters()), modifier_rank=None):
                if writer:
                    self._save(final_dir)
            return
        if writer:
            self._save(final_dir)

    def _save(self, final_dir: Path) -> None:
        Path(final_dir).mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(final_dir)
        self.tokenizer.save_pretrained(final_dir)

    def manifest_model(self) -> dict[str, Any]:
        return model_identity(self.model, self.tokenizer, self.base.base_name())

    def manifest_inputs(self) -> dict[str, Path]:
        run = self.base.run_dir()
        return {"base_model": run} if run is not None else {}
