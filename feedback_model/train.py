"""``python -m feedback_model.train --config configs/feedback_model/default.yaml [--model.optim.lr 1e-5 ...]``

Feedback-trace SFT (``make feedback-model``): the run lands in ``artifacts/feedback_model/<run>/`` with the
model in Hugging Face format plus ``feedback.json`` under ``final/``, which
:class:`feedback_model.evaluator.FeedbackEvaluator` loads.
"""

from __future__ import annotations

from feedback_model.data import FeedbackData
from feedback_model.module import FeedbackSFTModule
from leanloop.training.cli import main, run_stage

STAGE = "feedback_model"
# the datamodule tokenizes with the model's tokenizer and writes pairs in the format the model records
LINKS = [("model.base", "data.base"), ("model.format", "data.format")]


def run(args: list[str] | None = None):
    return run_stage(STAGE, FeedbackSFTModule, FeedbackData, args, links=LINKS)


if __name__ == "__main__":
    main(STAGE, FeedbackSFTModule, FeedbackData, links=LINKS)
