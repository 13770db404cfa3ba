"""Training order of the classifiers: batches of similar length, in random order (program length
predicts the verdict in this data, so long-to-short sweeps would feed runs of one-label batches)."""

from __future__ import annotations

import statistics

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

    unsorted = [list(range(len(lengths)))[k:k + 8] for k in range(0, len(lengths), 8)]
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

    rows = [{"program": f"theorem t{i} : True := trivial", "name": f"t{i}", "split": "train", "category": category,
             "label": label}
            for i, (category, label) in enumerate([("valid", True), ("invalid", False), ("precheck_rejected", False),
                                                   ("timeout", None), ("infra_error", None), ("precheck_rejected", None)])]
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
    assert all(split.labels[int(p[1:])] == y and split.names[int(p[1:])] == n
               for p, y, n in zip(a.programs, a.labels, a.names))
    assert len(subsample(split, 500, 0)) == 50
