"""``python -m sft.train --config configs/sft/default.yaml [--model.optim.lr 1e-5 ...]``

Prover SFT on valid proofs; the run lands in ``artifacts/sft/<run>/`` with the model in Hugging Face
format under ``final/`` (the RL stage's default starting checkpoint is ``artifacts/sft/default/final``).
"""

from __future__ import annotations

from leanloop.training.cli import main, run_stage
from sft.data import ProverSFTData
from sft.module import ProverSFTModule

STAGE = "sft"
# the datamodule tokenizes with the model's tokenizer, and renders prompts as the module records
LINKS = [("model.base", "data.base"), ("model.prompt", "data.prompt")]


def run(args: list[str] | None = None):
    return run_stage(STAGE, ProverSFTModule, ProverSFTData, args, links=LINKS)


if __name__ == "__main__":
    main(STAGE, ProverSFTModule, ProverSFTData, links=LINKS)
