"""``python -m pretrain.train --config configs/pretrain/default.yaml [--model.optim.lr 1e-5 ...]``"""

from __future__ import annotations

from leanloop.training.cli import main, run_stage
from pretrain.data import PretrainData
from pretrain.module import PretrainModule

STAGE = "pretrain"
# the datamodule tokenizes for the model's objective with the model's tokenizer
LINKS = [("model.base", "data.base"), ("model.objective", "data.objective")]


def run(args: list[str] | None = None):
    return run_stage(STAGE, PretrainModule, PretrainData, args, links=LINKS)


if __name__ == "__main__":
    main(STAGE, PretrainModule, PretrainData, links=LINKS)
