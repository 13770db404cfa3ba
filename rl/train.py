"""``python -m rl.train --config configs/rl/default.yaml [--model.grpo.beta 0.04 ...]``

GRPO on a prover with hybrid Lean + evaluator rewards. The run lands in ``artifacts/rl/<run>/``:
``final/`` (the policy in Hugging Face format, adapters merged; ``final/adapter`` too when one was
trained), ``steps.jsonl`` (every logged number per step), ``filters.jsonl``, ``curriculum.json``,
``drift.jsonl`` / ``audit.jsonl`` / ``refresh.jsonl``, ``report.md`` + ``rewards.png``, ``metrics.csv``,
``config.yaml`` and ``manifest.json``. Reward protocols are layered configs
(``configs/rl/reward_*.yaml``).
"""

from __future__ import annotations

from leanloop.training.cli import main, run_stage
from rl.data import RLData
from rl.module import GRPOModule

STAGE = "rl"
# the statement filters run through the same Lean backend as the rewards
LINKS = [("model.lean", "data.lean")]


def run(args: list[str] | None = None):
    return run_stage(STAGE, GRPOModule, RLData, args, links=LINKS)


if __name__ == "__main__":
    main(STAGE, GRPOModule, RLData, links=LINKS)
