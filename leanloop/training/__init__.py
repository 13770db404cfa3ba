"""Shared training machinery for every stage (see the README section "Training stages").

- ``cli``: ``run_stage`` — LightningCLI entry point, run folder, export, manifest.
- ``models``: ``ModelSpec`` (preset / checkpoint / previous run), ``load_model``, ``load_tokenizer``.
- ``inputs``: manifest checks between stages (tokenizer, vocabulary, base model).
- ``packing``: exact sequence packing and completion-only loss masks for causal LMs.
- ``optim``: AdamW + warmup/decay schedule shared by all stages.
- ``module``: ``HFModule``, the base LightningModule for transformers models.
"""
