"""Shared training machinery: stage CLI (``cli.run_stage``), model specs (``models``), input
checks (``inputs``), sequence packing (``packing``), optimizer/schedule (``optim``) and the base
LightningModule for transformers models (``module.HFModule``). See /tmp/team/TRAINING_API.md-style
guide in the README section "Training stages"."""
