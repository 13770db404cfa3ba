"""Training order of the classifiers: batches of similar length, in random order (program length
predicts the verdict in this data, so long-to-short sweeps would feed runs of one-label batches)."""

from __future__ import annotations

import statistics

import pytest

from torch.utils.data import DataLoader

from classifiers.data import LengthGroupedBatches


def test_batches_group_lengths_and_come_in_random_order(real_programs):
    lengths = [len(program) for _, program, _ in real_programs]
    sampler = LengthGroupedBatches(lengths, batch_size=8, mega_batches=10, seed=3)
    batches = sampler.batches()
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))  # each program once
    assert all(len(b) == 8 for b in batches[:-1]) and 0 < len(batches[-1]) <= 8
    # the DataLoader cuts the index stream back into exactly these batches
    assert [b.tolist() for b in DataLoader(range(len(lengths)), batch_size=8, sampler=sampler)] == batches

    def spread(groups):  # mean (longest - shortest) inside a batch
        return statistics.mean(max(lengths[i] for i in g) - min(lengths[i] for i in g) for g in groups)

    unsorted = [list(range(len(lengths)))[k : k + 8] for k in range(0, len(lengths), 8)]
    assert spread(batches) < spread(unsorted) / 3  # far less padding than batches in file order

    # random batch order: the longest program of consecutive batches goes up about as often as down
    tops = [max(lengths[i] for i in b) for b in batches]
    rises = sum(b > a for a, b in zip(tops, tops[1:]))
    assert 0.3 < rises / (len(tops) - 1) < 0.7


def test_order_is_seeded_and_changes_every_epoch():
    lengths = [(i * 37) % 101 for i in range(200)]
    a, b = LengthGroupedBatches(lengths, 4, seed=1), LengthGroupedBatches(lengths, 4, seed=1)
    assert a.batches() == b.batches()
    b.set_epoch(1)
    assert a.batches() != b.batches()


def test_unlabelled_categories_never_train_as_false(tmp_path):
    """LLF Section 3: candidates rejected before compilation, timeouts and infrastructure errors are
    not in the labelled corpus. A corpus built before the rule gave precheck_rejected rows label False;
    the classifiers still leave them (and any other unlabelled category) out."""
    from classifiers.examples import _split_rows

    rows = [
        {
            "program": f"theorem t{i} : True := trivial",
            "name": f"t{i}",
            "split": "train",
            "category": category,
            "label": label,
        }
        for i, (category, label) in enumerate(
            [
                ("valid", True),
                ("invalid", False),
                ("precheck_rejected", False),
                ("timeout", None),
                ("infra_error", None),
                ("precheck_rejected", None),
            ]
        )
    ]
    corpus = _split_rows(tmp_path, rows, None)
    assert corpus.splits["train"].labels == [True, False]
    assert corpus.counts["train/precheck_rejected"] == 2 and corpus.counts["train/labelled"] == 2


def test_train_rows_subsample_is_seeded_and_keeps_corpus_order():
    from classifiers.examples import Split
    from classifiers.data import subsample

    split = Split([f"p{i}" for i in range(50)], [i % 3 == 0 for i in range(50)], [f"t{i // 5}" for i in range(50)])
    a, b, c = subsample(split, 20, 0), subsample(split, 20, 0), subsample(split, 20, 1)
    assert a.programs == b.programs and a.programs != c.programs and len(a) == 20
    assert a.programs == sorted(a.programs, key=lambda p: int(p[1:]))  # corpus order
    assert all(
        split.labels[int(p[1:])] == y and split.names[int(p[1:])] == n for p, y, n in zip(a.programs, a.labels, a.names)
    )
    assert len(subsample(split, 500, 0)) == 50


RL_LEAN = "shared://candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
APOLLO = "shared://candidates/apollo_deepseek_v2_split_prover_minif2f_test.jsonl.gz"


def apollo_source():
    from classifiers.examples import JsonlCorpus

    return JsonlCorpus(
        APOLLO,
        program_field="program",
        label_field="verdict",
        name_field="name",
        no_label_if="messages",
        no_label_pattern="timed out|No .theorem. found",
    )


def test_extra_training_programs_join_the_training_split_only():
    """The shipped APOLLO attempts (same miniF2F-test problems as RL-Lean) added to RL-Lean's training
    split: the evaluation splits stay as they were, no evaluation theorem enters training, and the
    attempts Lean gave no verdict (timeouts, "No 'theorem' found") are not labelled."""
    import gzip
    import json
    import re

    from classifiers.examples import JsonlCorpus, add_training_programs, load_jsonl_corpus
    from leanloop.paths import resolve_shared

    corpus = load_jsonl_corpus(JsonlCorpus(RL_LEAN, no_label_if="compilation_result.system_errors"))
    before = {split: (list(data.programs), list(data.labels)) for split, data in corpus.splits.items()}
    add_training_programs(corpus, [apollo_source()])

    with gzip.open(resolve_shared(APOLLO), "rt", encoding="utf-8") as handle:
        records = {}
        for line in handle:
            record = json.loads(line)
            records.setdefault(record["program"], record)  # exact duplicates count once
    held_out = set(corpus.splits["valid"].names) | set(corpus.splits["test"].names)
    no_verdict = {p for p, r in records.items() if re.search("timed out|No .theorem. found", r["messages"] or "")}
    expected = {p: bool(r["verdict"]) for p, r in records.items() if p not in no_verdict and r["name"] not in held_out}
    train = corpus.splits["train"]
    n = len(before["train"][0])
    assert (train.programs[:n], train.labels[:n]) == before["train"]
    assert dict(zip(train.programs[n:], train.labels[n:])) == expected and len(train) == n + len(expected)
    assert {split: (data.programs, data.labels) for split, data in corpus.splits.items() if split != "train"} == {
        split: value for split, value in before.items() if split != "train"
    }
    assert not set(train.names[n:]) & held_out
    tag = "extra_train/apollo_deepseek_v2_split_prover_minif2f_test.jsonl.gz"
    assert corpus.counts[f"{tag}/unlabelled"] == len(no_verdict) > 0
    assert corpus.counts[f"{tag}/added"] == len(expected) > 0
    assert len(set(train.labels[n:])) == 2  # both verdicts: valid and invalid attempts


def test_balanced_class_weights_and_extra_programs_in_a_real_run(tmp_path, monkeypatch):
    """``class_weight: balanced`` weighs each class n / (2 n_class) of the (enlarged) training split,
    and the training loss is the weighted mean cross-entropy torch computes with those weights."""
    import torch
    import torch.nn.functional as F

    from classifiers.train import run
    from leanloop.paths import REPO_ROOT

    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path))
    source = apollo_source()
    extra = (
        f'[{{path: "{source.path}", program_field: program, label_field: verdict, name_field: name, '
        f'no_label_if: messages, no_label_pattern: "{source.no_label_pattern}"}}]'
    )
    result = run(
        [
            "--config",
            str(REPO_ROOT / "configs/classifiers/debug.yaml"),
            "--trainer.fast_dev_run",
            "true",
            "--log.csv",
            "false",
            "--model.init_args.class_weight",
            "balanced",
            "--data.extra_train",
            extra,
        ]
    )
    module, corpus = result.model, result.datamodule.corpus
    labels = torch.tensor(corpus.splits["train"].labels, dtype=torch.long)
    counts = torch.bincount(labels, minlength=2).float()
    assert module._class_weights.tolist() == pytest.approx((len(labels) / (2 * counts)).tolist())
    counted = result.manifest["counts"]["corpus"]
    assert counted["train/used"] == len(labels) > 64  # the debug prefix of 64 plus APOLLO's training attempts
    assert "extra_train_0" in result.manifest["inputs"]

    module.train()
    logits = torch.tensor([[0.3, -0.2], [1.0, 0.5], [-0.4, 0.9]])
    batch_labels = torch.tensor([1, 0, 0])
    assert module.loss(logits, batch_labels).item() == pytest.approx(
        F.cross_entropy(logits, batch_labels, weight=module._class_weights).item()
    )
    module.eval()  # validation and test losses stay unweighted
    assert module.loss(logits, batch_labels).item() == pytest.approx(F.cross_entropy(logits, batch_labels).item())
