"""``python -m autoformalizer.train --config configs/autoformalizer/default.yaml [--model.optim.lr 1e-4 ...]``

Stage 1, syntax-alignment SFT of the autoformalizer policy (informal statement -> Lean statement
ending in ``:= by sorry``). The run lands in ``artifacts/autoformalizer/<run>/``: ``final/`` (the
adapters merged into the full-precision unfused base, Hugging Face format, plus the tokenizer),
``final/adapter/`` (the PEFT adapter as trained), ``metrics.csv``, ``config.yaml`` and
``manifest.json`` (the trained and held-out theorems among its counts). Stage 2 (GRPO,
``python -m autoformalizer.train_grpo``) starts from ``artifacts://autoformalizer/<run>``.
"""

from __future__ import annotations

from autoformalizer.data import AutoformalizerSFTData
from autoformalizer.module import AutoformalizerSFTModule
from leanloop.training.cli import main, run_stage

STAGE = "autoformalizer"
# the datamodule tokenizes with the policy's tokenizer
LINKS = [("model.policy", "data.policy")]


def run(args: list[str] | None = None):
    return run_stage(STAGE, AutoformalizerSFTModule, AutoformalizerSFTData, args, links=LINKS)


if __name__ == "__main__":
    main(STAGE, AutoformalizerSFTModule, AutoformalizerSFTData, links=LINKS)
