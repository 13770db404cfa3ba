"""Self-consistency: the vote over k traces judged by the seed's rule, and reproducible samples."""

from __future__ import annotations

from collections import Counter

import pytest

from feedback_model.config import SelfConsistencyConfig, TraceFormat, TraceGenerationConfig
from feedback_model.consistency import SelfConsistencyEvaluator, vote
from feedback_model.pairs import trace_pairs
from feedback_model.generate import HFTraceGenerator
from leanloop.traces import trace_verdict


def test_vote_over_real_traces(corpus_rows):
    pairs = trace_pairs(corpus_rows, ["train", "valid", "test"], Counter())
    valid_trace = next(p.trace for p in pairs if p.label)
    error_trace = next(p.trace for p in pairs if not p.label and "-- type: error" in p.trace)
    judge = [trace_verdict(valid_trace).valid, trace_verdict(error_trace).valid]
    assert judge == [True, False]

    def verdicts(n_valid: int, n_invalid: int, truncated_valid: int = 0) -> list[bool]:
        return (
            [trace_verdict(valid_trace).valid] * n_valid
            + [trace_verdict(error_trace).valid] * n_invalid
            + [trace_verdict(valid_trace, truncated=True).valid] * truncated_valid
        )

    assert vote(verdicts(4, 1), min_valid=4) == (True, 0.8)
    assert vote(verdicts(3, 2), min_valid=4) == (False, 0.6)
    assert vote(verdicts(5, 0), min_valid=4) == (True, 1.0)
    # a trace cut at the output limit is a vote against, whatever its text says
    assert vote(verdicts(3, 0, truncated_valid=2), min_valid=4) == (False, 0.6)
    with pytest.raises(ValueError):
        vote([], min_valid=1)
    with pytest.raises(ValueError, match="min_valid"):
        SelfConsistencyConfig(samples=5, min_valid=6)


def test_self_consistency_scores_are_vote_shares_and_samples_are_reproducible(tiny_model, qwen_tokenizer, corpus_rows):
    programs = [
        r["program"]
        for r in sorted((r for r in corpus_rows if r["label"] is not None), key=lambda r: len(r["program"]))[:2]
    ]
    config = TraceGenerationConfig(max_new_tokens=5, draft_tokens=8)
    consistency = SelfConsistencyConfig(samples=3, temperature=1.0, min_valid=2)
    evaluator = SelfConsistencyEvaluator(
        HFTraceGenerator(tiny_model, qwen_tokenizer, config), qwen_tokenizer, TraceFormat(), config, consistency
    )
    both = evaluator.score(programs)
    for prediction in both:
        assert len(prediction.votes) == 3
        assert prediction.score == pytest.approx(sum(prediction.votes) / 3)
        assert prediction.verdict == (sum(prediction.votes) >= 2)
        assert prediction.reason.startswith(f"vote: {sum(prediction.votes)}/3")
    # the same program gets the same samples alone as in a batch
    alone = evaluator.score(programs[1:])[0]
    assert (alone.trace, alone.votes, alone.new_tokens) == (both[1].trace, both[1].votes, both[1].new_tokens)
    # sampling at T = 1 really draws different traces
    traces = evaluator.generator.generate(
        [evaluator.encode(programs[0])], samples=3, temperature=1.0, seeds=[evaluator.seeds(programs[0])]
    )[0]
    assert len({t.text for t in traces}) > 1
