"""``configs/feedback_model/debug.yaml`` end to end with fast_dev_run, and the exported model in use."""

from __future__ import annotations

import json

from feedback_model.config import FEEDBACK_FILE, TraceFormat, TraceGenerationConfig
from feedback_model.evaluator import FeedbackEvaluator
from leanloop.paths import REPO_ROOT


def test_debug_config_trains_exports_and_loads_in_the_evaluator(artifacts, feedback_corpus, corpus_rows):
    from feedback_model.train import run

    (artifacts / "data").mkdir(parents=True)
    (artifacts / "data" / "debug").symlink_to(feedback_corpus / "data" / "debug")
    result = run(["--config", str(REPO_ROOT / "configs/feedback_model/debug.yaml"), "--trainer.fast_dev_run", "true"])
    manifest = result.manifest
    assert manifest["stage"] == "feedback_model" and manifest["fast_dev_run"] is True
    assert manifest["model"]["format"] == {"separator": TraceFormat().separator}
    assert manifest["inputs"]["corpus"]["path"].endswith("data/debug")
    counts = manifest["counts"]
    assert counts["train_valid_pairs"] > 0 and counts["train_invalid_pairs"] > 0
    # every training-split pair is either used, beyond max_examples, or too long: none silently lost
    pairs = sum(v for k, v in counts.items() if k.startswith("train/pairs:"))
    assert pairs == counts["train_examples"] + counts.get("train_too_long", 0) + counts.get(
        "train_over_max_examples", 0
    )
    assert counts["train_examples"] == 8 and counts["train_too_long"] > 0  # debug.yaml: 8 examples, 512 tokens
    assert len(counts["train_too_long_ids"]) == counts["train_too_long"]  # and which ones, by id
    assert counts["train_trace_tokens"] < counts["train_tokens"]  # the programs carry no loss

    final = result.run_dir / "final"
    card = json.loads((final / FEEDBACK_FILE).read_text())
    assert card["format"]["separator"] == TraceFormat().separator and card["max_length"] == 512

    program = min((r["program"] for r in corpus_rows if r["label"] is not None), key=len)
    evaluator = FeedbackEvaluator.load(
        f"artifacts://feedback_model/{result.run_dir.name}",
        TraceGenerationConfig(max_input_tokens=512, max_new_tokens=3),
    )
    prediction = evaluator.score([program])[0]
    assert prediction.new_tokens == 3 and prediction.verdict is False and prediction.reason == "output_limit"
