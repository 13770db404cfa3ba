"""export() under several ranks: only global rank zero writes the run folder's files.

run_stage calls export() on every rank for HF modules (a ZeRO-3 gather is a collective); the
classifier's classifier.json and the feedback model's feedback.json must then come from rank zero
alone, like the weights.
"""

from types import SimpleNamespace

import pytest

from classifiers.module import EncoderClassifier
from feedback_model.module import FeedbackSFTModule
from leanloop.training.models import ModelSpec


def _attach(module, *, global_zero: bool) -> None:
    module._trainer = SimpleNamespace(is_global_zero=global_zero, strategy=SimpleNamespace(), datamodule=None)


@pytest.mark.parametrize(
    "build, side_file",
    [
        (lambda: EncoderClassifier(base=ModelSpec("modernbert-tiny")), "classifier.json"),
        (lambda: FeedbackSFTModule(base=ModelSpec("qwen3-tiny")), "feedback.json"),
    ],
)
def test_only_global_rank_zero_writes(build, side_file, tmp_path):
    module = build()
    other, zero = tmp_path / "rank1", tmp_path / "rank0"
    _attach(module, global_zero=False)
    module.export(other)
    assert not other.exists() or not any(other.iterdir())
    _attach(module, global_zero=True)
    module.export(zero)
    assert (zero / side_file).is_file() and (zero / "config.json").is_file()
