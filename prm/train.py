"""``python -m prm.train --config configs/prm/default.yaml [--trainer.max_steps 10 ...]``

The step verifier: ``model.mode: sft`` (configs/prm/default.yaml) then ``model.mode: grpo`` from
that run (configs/prm/grpo.yaml); runs land in ``artifacts/prm/<run>/`` (model under ``final/``).
"""

from __future__ import annotations

from leanloop.training.cli import main, run_stage
from prm.data import PRMData
from prm.module import PRMModule

STAGE = "prm"
LINKS = [("model.base", "data.base"), ("model.mode", "data.mode"), ("model.layout", "data.layout")]


def run(args: list[str] | None = None):
    return run_stage(STAGE, PRMModule, PRMData, args, links=LINKS)


if __name__ == "__main__":
    main(STAGE, PRMModule, PRMData, links=LINKS)
