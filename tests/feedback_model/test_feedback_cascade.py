"""The cascade: gating, "accept only if both accept", residency and the time accounting."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from classifiers.evaluator import ClassifierEvaluator, ClassifierSpec
from feedback_model.cascade import CascadeEvaluator
from feedback_model.config import CascadeConfig, FeedbackEvaluatorOptions, TraceGenerationConfig


class Recording:
    """A real evaluator that also keeps the programs it was asked to score."""

    def __init__(self, inner, seen: list):
        self.inner, self.seen = inner, seen

    def score(self, programs, deadline=None):
        self.seen.extend(programs)
        return self.inner.score(programs, deadline)


def midpoint_threshold(scores) -> float:
    """A threshold between the two middle scores: half pass, with a margin on both sides."""
    ordered = sorted(scores)
    middle = len(ordered) // 2
    return (ordered[middle - 1] + ordered[middle]) / 2


@pytest.fixture(scope="module")
def programs(corpus_rows):
    labelled = sorted((r for r in corpus_rows if r["label"] is not None), key=lambda r: len(r["program"]))
    return [r["program"] for r in labelled[:6]]


@pytest.fixture(scope="module")
def two_classifiers(saved_gate, make_tiny, qwen_tokenizer, programs):
    """The gate (one-token classifier, seed 1) and an independent second judge (seed 2), each with a
    threshold splitting these programs in half."""
    spec = ClassifierSpec.read(saved_gate)
    gate_model, second_model = make_tiny(1), make_tiny(2)
    gate_scores = [p.score for p in ClassifierEvaluator(spec, gate_model, qwen_tokenizer).score(programs)]
    second_scores = [p.score for p in ClassifierEvaluator(spec, second_model, qwen_tokenizer).score(programs)]
    return (
        spec,
        gate_model,
        second_model,
        gate_scores,
        midpoint_threshold(gate_scores),
        second_scores,
        midpoint_threshold(second_scores),
    )


def test_only_gate_positives_reach_stage_two_and_both_must_accept(two_classifiers, qwen_tokenizer, programs):
    spec, gate_model, second_model, gate_scores, gate_t, second_scores, second_t = two_classifiers
    seen: list[str] = []
    cascade = CascadeEvaluator(
        lambda: ClassifierEvaluator(spec, gate_model, qwen_tokenizer, threshold=gate_t),
        lambda: Recording(ClassifierEvaluator(spec, second_model, qwen_tokenizer, threshold=second_t), seen),
    )
    predictions = cascade.score(programs)
    positives = [i for i, s in enumerate(gate_scores) if s >= gate_t]
    assert 0 < len(positives) < len(programs)
    assert seen == [programs[i] for i in positives]
    assert cascade.last_timing.gate_positive == len(positives)
    outcomes = set()
    for i, prediction in enumerate(predictions):
        expected = gate_scores[i] >= gate_t and second_scores[i] >= second_t
        assert prediction.verdict == expected
        if i in positives:
            assert prediction.score == pytest.approx(second_scores[i], abs=1e-5)
            outcomes.add(prediction.verdict)
        else:
            assert prediction.score == 0.0 and prediction.trace is None
            assert prediction.reason.startswith("gate rejected")
    assert outcomes == {True, False}  # stage two both accepted and overruled gate positives


def test_time_accounting_and_residency(two_classifiers, qwen_tokenizer, programs):
    spec, gate_model, second_model, _, gate_t, _, second_t = two_classifiers

    def cascade(residency: str) -> CascadeEvaluator:
        return CascadeEvaluator(
            lambda: ClassifierEvaluator(spec, gate_model, qwen_tokenizer, threshold=gate_t),
            lambda: ClassifierEvaluator(spec, second_model, qwen_tokenizer, threshold=second_t),
            residency,
        )

    sequential = cascade("sequential")
    calls = []
    for _ in range(2):
        predictions = sequential.score(programs)
        timing = sequential.last_timing
        calls.append(timing)
        assert timing.gate_s > 0 and timing.traces_s > 0 and timing.load_s > 0  # loaded anew each batch
        assert timing.gate_s + timing.load_s + timing.traces_s + timing.other_s == pytest.approx(timing.total_s)
        assert timing.load_s <= sum(p.time_s for p in predictions) <= timing.total_s + 1e-9
        assert sequential.loaded == {}  # one model at a time: both released after the batch
    assert sequential.total_timing.total_s == pytest.approx(sum(t.total_s for t in calls))
    assert sequential.total_timing.programs == 2 * len(programs)

    # one call over many batches: one load of each model and one transition, not one per batch
    whole = cascade("sequential")
    loads = Counter()
    whole.loaders = {
        role: (lambda role=role, load=load: (loads.update([role]), load())[1]) for role, load in whole.loaders.items()
    }
    batched = whole.score(programs, batch_size=2)
    assert len(programs) > 2 and loads == {"gate": 1, "feedback": 1}
    assert [p.verdict for p in batched] == [p.verdict for p in predictions]
    # per-candidate cost terms (LLF Eq. 13): the load share is the same for all, stage two only for positives
    assert all(set(p.cost) == {"gate_s", "load_s", "feedback_s", "other_s"} for p in batched)
    assert len({p.cost["load_s"] for p in batched}) == 1 and len({p.cost["other_s"] for p in batched}) == 1
    # C_other / N is in every candidate's cost (Eq. 13), not left out of the mean
    assert sum(p.cost["other_s"] for p in batched) == pytest.approx(whole.last_timing.other_s)
    assert whole.last_timing.other_s > 0
    assert all(p.cost["feedback_s"] == 0.0 for p in batched if p.reason.startswith("gate rejected"))
    assert sum(p.cost["load_s"] for p in batched) == pytest.approx(whole.last_timing.load_s)

    together = cascade("together")
    together.score(programs)
    first = together.last_timing.load_s
    again = together.score(programs)
    assert first > 0 and together.last_timing.load_s == 0.0
    assert set(together.loaded) == {"gate", "feedback"}
    assert [p.verdict for p in again] == [p.verdict for p in sequential.score(programs)]
    with pytest.raises(ValueError, match="residency"):
        CascadeEvaluator(lambda: None, lambda: None, "auto")


def test_rl_builds_the_cascade_from_saved_runs_through_the_factory(saved_gate, saved_feedback_model, corpus_rows):
    """The RL stage's ``evaluator.kind: factory`` path: the cascade built from a gate run and a
    feedback run, scoring a batch within a deadline (verdict, score and trace per program)."""
    from feedback_model.config import SelfConsistencyConfig
    from feedback_model.consistency import SelfConsistencyEvaluator
    from feedback_model.factory import evaluator as factory
    from leanloop.evaluator import Evaluator, deadline_in
    from rl.config import EvaluatorConfig
    from rl.reward_evaluator import build_evaluator

    labelled = sorted((r for r in corpus_rows if r["label"] is not None), key=lambda r: len(r["program"]))
    programs = [labelled[0]["program"], labelled[-1]["program"]]
    options = FeedbackEvaluatorOptions(
        "cascade",
        TraceGenerationConfig(max_input_tokens=400, max_new_tokens=4),
        cascade=CascadeConfig(str(saved_gate), threshold=0.0),
    )  # 0: all pass the gate
    cascade, info = build_evaluator(
        EvaluatorConfig(
            kind="factory", factory="feedback_model.factory:evaluator", path=str(saved_feedback_model), options=options
        )
    )
    assert isinstance(cascade, Evaluator) and isinstance(cascade, CascadeEvaluator)
    assert info["gate_path"] == str(saved_gate) and info["path"] == str(saved_feedback_model)
    assert cascade.residency == "together"  # two tiny models fit in memory
    short, long = cascade.score(programs, deadline=deadline_in(300.0))
    assert short.trace is not None and short.verdict is False and short.truncated and short.score == 0.0
    assert short.reason.startswith("gate passed") and short.reason.endswith("output_limit")
    # over the feedback model's input limit: not judged, with the reason, even behind the gate
    assert long.verdict is None and long.score is None and "input_too_long" in long.reason
    timing = cascade.last_timing
    assert timing.gate_positive == 2 and timing.traces_s > 0 and timing.gate_s > 0
    # a deadline already passed: nothing judged, nothing guessed
    late = cascade.score(programs, deadline=deadline_in(-1.0))
    assert all(p.verdict is None and p.score is None for p in late)

    with pytest.raises(ValueError, match="unknown keys"):
        factory(str(saved_feedback_model), generation={"max_tokens": 4})
    with pytest.raises(ValueError, match="mode"):
        factory(str(saved_feedback_model), mode="gate")
    voting = factory(
        str(saved_feedback_model),
        mode="feedback",
        self_consistency=True,
        generation={"max_input_tokens": 400, "max_new_tokens": 4},
    )
    assert isinstance(voting, SelfConsistencyEvaluator) and voting.consistency == SelfConsistencyConfig()
    assert (voting.samples, voting.temperature, voting.consistency.min_valid) == (5, 0.8, 4)  # the seed's defaults


def test_rl_manifest_names_the_feedback_run_and_the_gate_run(saved_gate, saved_feedback_model, tmp_path):
    """A cascade built from two stage runs: the RL stage's manifest lists both as inputs."""
    from types import SimpleNamespace

    from rl.config import EvaluatorConfig
    from rl.reward_evaluator import build_evaluator
    from rl.module import GRPOModule

    runs = {}
    for role, final, stage in (
        ("feedback", saved_feedback_model, "feedback_model"),
        ("gate", saved_gate, "classifiers"),
    ):
        run = tmp_path / role
        run.mkdir()
        (run / "final").symlink_to(final, target_is_directory=True)
        (run / "manifest.json").write_text(json.dumps({"stage": stage}))
        runs[role] = run
    options = FeedbackEvaluatorOptions(cascade=CascadeConfig(str(runs["gate"] / "final")))
    _, info = build_evaluator(
        EvaluatorConfig(
            kind="factory",
            factory="feedback_model.factory:evaluator",
            path=str(runs["feedback"] / "final"),
            options=options,
        )
    )
    assert (info["run"], info["gate_run"]) == (str(runs["feedback"]), str(runs["gate"]))
    module = SimpleNamespace(base=SimpleNamespace(run_dir=lambda: None), evaluator_info=info)
    assert GRPOModule.manifest_inputs(module) == {"evaluator": runs["feedback"], "evaluator_gate": runs["gate"]}
