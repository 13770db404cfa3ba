"""``python -m autoformalizer.train_grpo --config configs/autoformalizer/grpo/default.yaml [--model.grpo.beta 0.04 ...]``

Stage 2, GRPO against the compiler, starting from a Stage-1 run (``model.policy.name:
artifacts://autoformalizer/<run>``). The run lands in ``artifacts/autoformalizer_grpo/<run>/``:
``final/`` (merged policy, Hugging Face format) and ``final/adapter/``, ``steps.jsonl``,
``rollouts.jsonl``, ``report.md`` + ``rewards.png``, ``metrics.csv``, ``config.yaml`` and
``manifest.json``. Evaluation: ``python -m autoformalizer.evaluate``.
"""

from __future__ import annotations

from autoformalizer.data import AutoformalizerGRPOData
from autoformalizer.grpo import AutoformalizerGRPOModule
from leanloop.training.cli import main, run_stage

STAGE = "autoformalizer_grpo"


def run(args: list[str] | None = None):
    return run_stage(STAGE, AutoformalizerGRPOModule, AutoformalizerGRPOData, args)


if __name__ == "__main__":
    main(STAGE, AutoformalizerGRPOModule, AutoformalizerGRPOData)
