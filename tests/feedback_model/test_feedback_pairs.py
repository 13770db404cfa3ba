"""SFT pairs from the real recorded traces, the completion-only loss mask and the packed loss."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from feedback_model.config import TraceFormat
from feedback_model.pairs import longest_token_chars, pair_examples, trace_pairs
from feedback_model.module import completion_loss
from leanloop.traces import source_preservation, trace_verdict
from leanloop.training.packing import IGNORE, PackedCollator, completion_example, pack_examples


def test_pairs_account_for_every_labelled_row(corpus_rows):
    counts: Counter = Counter()
    pairs = trace_pairs(corpus_rows, ["train", "valid", "test"], counts)
    by_id = {row["id"]: row for row in corpus_rows}
    labelled = [row for row in corpus_rows if row["label"] is not None]
    unlabelled = [row for row in corpus_rows if row["label"] is None]
    no_reference = sum(v for k, v in counts.items() if "/no_reference:" in k)
    assert len(pairs) + no_reference == len(labelled)
    assert sum(v for k, v in counts.items() if "/unlabelled:" in k) == len(unlabelled)
    assert {p.split for p in pairs} <= {"train", "valid", "test"}

    invalid = [p for p in pairs if not p.label]
    valid = [p for p in pairs if p.label]
    assert invalid and valid
    for pair in invalid:  # the data stage's reference traces, untouched
        assert pair.trace == by_id[pair.id]["reference_trace"]
        assert pair.kind == by_id[pair.id]["trace_kind"]
        if any(m["severity"] == "error" for m in by_id[pair.id]["messages"]):
            assert trace_verdict(pair.trace).valid is False
    for pair in valid:  # Lean answered with no error: the trace is the whole program, judged valid
        assert pair.kind in ("valid_no_states", "full")
        assert trace_verdict(pair.trace).valid is True
        assert source_preservation(pair.trace, pair.program) == "full"


def test_loss_mask_is_exactly_the_annotated_program(corpus_rows, qwen_tokenizer):
    fmt = TraceFormat()
    pairs = trace_pairs(corpus_rows, ["train"], Counter())
    sample = [p for p in pairs if not p.label][:3] + [p for p in pairs if p.label][:3]
    counts: Counter = Counter()
    kept, examples = pair_examples(sample, qwen_tokenizer, fmt, 8192, counts, "train")
    assert kept == sample
    assert counts["train_examples"] == len(sample)
    for pair, example in zip(sample, examples):
        prompt = qwen_tokenizer(fmt.prompt(pair.program), add_special_tokens=False)["input_ids"]
        n = len(prompt)
        assert example["input_ids"][:n] == prompt
        assert example["labels"][:n] == [IGNORE] * n
        trained = example["labels"][n:]
        assert IGNORE not in trained and trained == example["input_ids"][n:]
        assert trained[-1] == qwen_tokenizer.eos_token_id
        assert qwen_tokenizer.decode(trained[:-1]) == pair.trace


def test_over_length_pairs_are_dropped_counted_and_listed_never_truncated(corpus_rows, qwen_tokenizer):
    fmt = TraceFormat()
    pairs = sorted(
        trace_pairs(corpus_rows, ["train", "valid", "test"], Counter()), key=lambda p: len(p.program) + len(p.trace)
    )
    sample = pairs[:4] + pairs[-3:]  # the shortest and the longest real pairs
    chars = {p.id: len(fmt.prompt(p.program)) + len(p.trace) for p in sample}
    tokens = {
        p.id: len(completion_example(qwen_tokenizer, fmt.prompt(p.program), p.trace)["input_ids"]) for p in sample
    }
    per_token = longest_token_chars(qwen_tokenizer)
    # a limit under which the longest pair cannot fit even at the longest token per character run
    max_length = chars[sample[-1].id] // per_token - 1
    by_chars = {i for i in chars if chars[i] > max_length * per_token}
    fits = {i for i in tokens if tokens[i] <= max_length}
    assert by_chars and fits and set(chars) - fits - by_chars  # all three outcomes occur in this sample
    assert not by_chars & fits  # the character bound never drops a pair that would fit

    counts: Counter = Counter()
    dropped: list[str] = []
    kept, examples = pair_examples(sample, qwen_tokenizer, fmt, max_length, counts, "train", dropped)
    assert {p.id for p in kept} == fits
    assert [len(e["input_ids"]) for e in examples] == [tokens[p.id] for p in kept]  # whole pairs, not cut
    assert sorted(dropped) == sorted(set(chars) - fits)
    assert counts["train_too_long"] == len(sample) - len(fits) and counts["train_examples"] == len(fits)
    assert counts["train_too_long_chars"] == len(by_chars)


def test_packed_completion_loss_equals_hf_loss_and_per_example_loss(corpus_rows, qwen_tokenizer, tiny_model):
    fmt = TraceFormat()
    pairs = sorted(trace_pairs(corpus_rows, ["train"], Counter()), key=lambda p: len(p.program))[:2]
    _, examples = pair_examples(pairs, qwen_tokenizer, fmt, 4096, Counter(), "train")
    rows = pack_examples(examples, max_length=sum(len(e["input_ids"]) for e in examples))
    assert len(rows) == 1  # all in one packed row
    batch = PackedCollator(qwen_tokenizer.eos_token_id)(rows)
    with torch.no_grad():
        ours = completion_loss(tiny_model, batch)
        reference = tiny_model(**batch).loss
        # each example alone, token-weighted mean over the trace tokens
        total, tokens = 0.0, 0
        for example in examples:
            single = PackedCollator(qwen_tokenizer.eos_token_id)([[example]])
            n = int((single["labels"][:, 1:] != IGNORE).sum())
            total += float(tiny_model(**single).loss) * n
            tokens += n
    assert float(ours) == pytest.approx(float(reference), rel=1e-5)
    assert float(ours) == pytest.approx(total / tokens, rel=1e-4)
