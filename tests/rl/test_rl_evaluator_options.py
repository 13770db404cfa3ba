"""``model.evaluator.options`` is typed (feedback_model's FeedbackEvaluatorOptions): layers merge its
keys, command-line numbers stay numbers, and a cascade whose gate cannot be resolved is an error
naming it (it used to fall back to the demo's one-token gate)."""

from __future__ import annotations

import pytest
import yaml


def test_layers_merge_options_and_cli_numbers_stay_numbers(artifacts, tmp_path):
    from rl.train import run

    layer = tmp_path / "shorter_traces.yaml"
    layer.write_text("model:\n  evaluator:\n    options:\n      generation: {max_new_tokens: 100}\n")
    result = run(
        [
            "--config",
            "configs/rl/paper.yaml",
            "--config",
            str(layer),
            "--dry_run",
            "true",
            "--model.evaluator.options.cascade.threshold",
            "0.7",
        ]
    )
    options = yaml.safe_load(result.config)["model"]["evaluator"]["options"]
    assert options["generation"]["max_new_tokens"] == 100  # the layer's key
    assert options["generation"]["backend"] == "vllm" and options["generation"]["max_input_tokens"] == 16384
    assert options["cascade"]["gate"] == "artifacts://classifiers/paper"  # paper.yaml's gate survives both
    assert options["cascade"]["threshold"] == 0.7 and isinstance(options["cascade"]["threshold"], float)
    assert options["mode"] == "cascade"


def test_a_cascade_without_a_resolvable_gate_is_an_error_naming_it(tmp_path):
    from feedback_model.config import CascadeConfig, FeedbackEvaluatorOptions
    from rl.config import EvaluatorConfig
    from rl.reward_evaluator import build_evaluator

    def build(options):
        return build_evaluator(
            EvaluatorConfig(
                kind="factory",
                factory="feedback_model.factory:evaluator",
                path=str(tmp_path / "feedback"),
                options=options,
            )
        )

    with pytest.raises(ValueError, match="gate is not set: name its classifier run in cascade.gate"):
        build(FeedbackEvaluatorOptions())
    with pytest.raises(FileNotFoundError, match=r"cascade.gate artifacts://classifiers/no_such_gate"):
        build(FeedbackEvaluatorOptions(cascade=CascadeConfig("artifacts://classifiers/no_such_gate")))
