"""Informal/formal pairs from the shipped ProofNet and miniF2F files: targets, theorem-disjoint
splits, and every row accounted for."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from autoformalizer.data import PairSource, PairsConfig, clean_informal, formal_target, load_pairs
from autoformalizer.statements import canonicalize, find_declaration, well_formed


def _rows(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def default_pairs():
    return load_pairs(PairsConfig())


def test_splits_are_theorem_disjoint_and_every_row_is_accounted_for(default_pairs, shared_data):
    pairs, counts = default_pairs
    names = {split: {p.name for p in items} for split, items in pairs.items()}
    assert all(len(names[s]) == len(pairs[s]) for s in pairs)  # one pair per theorem
    assert not names["train"] & names["test"] and not names["val"] & names["test"] and not names["train"] & names["val"]
    test_statements = {canonicalize(p.formal) for p in pairs["test"]}
    assert not any(canonicalize(p.formal) in test_statements for p in pairs["train"] + pairs["val"])
    # the benchmarks' test halves are the test split, their validation halves train (+ val)
    dsp = {r["name"]: r["split"] for r in _rows(shared_data / "statements/minif2f_deepseek_prover_v1.5.jsonl")}
    assert {dsp[n] for n in names["test"] if n in dsp} == {"test"}
    assert {dsp[n] for n in names["train"] | names["val"] if n in dsp} == {"valid"}
    # every row read is kept or dropped for a counted reason
    read = sum(v for k, v in counts.items() if k.endswith(":read"))
    dropped = sum(v for k, v in counts.items() if ":" in k and not k.endswith(":read")) + sum(
        v for k, v in counts.items() if k.endswith("_same_statement_as_test")
    )
    assert read == dropped + sum(len(items) for items in pairs.values())
    assert 0.05 < len(pairs["val"]) / (len(pairs["train"]) + len(pairs["val"])) < 0.2  # val_fraction 0.1


def test_targets_are_the_sources_statements_ending_in_by_sorry(default_pairs, shared_data):
    pairs, _ = default_pairs
    everything = [p for items in pairs.values() for p in items]
    for pair in everything:
        assert pair.formal.endswith(":= by sorry") and well_formed(pair.formal).ok
        assert find_declaration(pair.formal).name == pair.name
        assert "import" not in pair.formal and "/--" not in pair.formal and pair.informal
        assert not pair.informal.startswith("/-") and not pair.informal.endswith("-/")
    # the repaired Goedel-V2 copy of a miniF2F-test statement wins over DeepSeek's
    goedel = {r["name"]: r for r in _rows(shared_data / "statements/minif2f_goedel_prover_v2_repaired.jsonl")}
    dsp = {r["name"]: r for r in _rows(shared_data / "statements/minif2f_deepseek_prover_v1.5.jsonl")}
    repaired = [
        n for n in goedel if canonicalize(goedel[n]["formal_statement"]) != canonicalize(dsp[n]["formal_statement"])
    ]
    assert repaired
    by_name = {p.name: p for p in pairs["test"]}
    for name in repaired:
        assert canonicalize(by_name[name].formal) == canonicalize(goedel[name]["formal_statement"])
        assert by_name[name].header.startswith("import Mathlib")  # taken from Goedel's own text
    # ProofNet pairs keep ProofNet's header (its namespaces differ from miniF2F's); DeepSeek rows carry the goal
    first_rows: dict = {}
    for row in _rows(shared_data / "statements/proofnet_deepseek_prover_v1.5.jsonl"):
        first_rows.setdefault(row["name"], row)
    proofnet = [p for p in everything if p.source.startswith("proofnet")]
    assert proofnet and all(p.header == first_rows[p.name]["header"] for p in proofnet)
    assert len({p.header for p in proofnet}) > 1 and all("open" in p.header for p in proofnet)
    assert all(p.goal and "⊢" in p.goal for p in everything if p.source == "minif2f_deepseek_prover_v1.5.jsonl")


def test_informal_text_and_target_cleaning_on_real_rows(shared_data):
    rahul = _rows(shared_data / "statements/proofnet_lean4_rahul3613.jsonl")
    with_proof = next(r for r in rahul if "\\begin{proof}" in r["informal_stmt"])
    cleaned = clean_informal(with_proof["informal_stmt"])
    assert cleaned and "\\begin{proof}" not in cleaned and with_proof["informal_stmt"].startswith(cleaned)
    # rahul3613 ends in `:= sorry`, DeepSeek ProofNet in `:=`, DeepSeek miniF2F in `:= by`
    for row in rahul[:20] + _rows(shared_data / "statements/proofnet_deepseek_prover_v1.5.jsonl")[:20]:
        target = formal_target(row["formal_statement"])
        if target is not None and well_formed(target).ok:
            assert canonicalize(target) == canonicalize(row["formal_statement"])
    assert formal_target("/-- doc -/\ndef f : ℕ := 1") is None


def test_paper_style_sources_and_statement_level_dedup(shared_data, tmp_path):
    """A source without splits (Herald / Lean Workbook style) is all train; a train row restating a
    test problem under another name is dropped and counted."""
    mobench = _rows(shared_data / "statements/matholympiadbench_goedel_prover_v2.jsonl")
    test_pair = next(p for p in load_pairs(PairsConfig())[0]["test"] if p.source.startswith("minif2f"))
    renamed = test_pair.formal.replace(test_pair.name, "workbook_copy_of_a_test_problem", 1)
    rows = [{"id": r["name"], "nl": r["informal_prefix"], "fl": r["formal_statement"]} for r in mobench]
    rows.append({"id": "workbook_copy_of_a_test_problem", "nl": "a restated test problem", "fl": renamed})
    path = tmp_path / "workbook.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = PairsConfig(
        sources=[
            PairSource(
                str(path),
                informal_field="nl",
                formal_field="fl",
                name_field="id",
                split_field=None,
                header_field=None,
                goal_field=None,
            ),
            PairSource("shared://statements/minif2f_goedel_prover_v2_repaired.jsonl", header_field=None),
        ],
        train_splits=["train"],
        val_fraction=0.0,
        max_train_pairs=100,
    )
    pairs, counts = load_pairs(config)
    assert counts["train_same_statement_as_test"] == 1
    assert "workbook_copy_of_a_test_problem" not in {p.name for p in pairs["train"]}
    usable = (
        len(mobench)
        + 1
        - 1
        - sum(v for k, v in counts.items() if k.startswith("workbook.jsonl:") and not k.endswith(":read"))
    )
    assert len(pairs["train"]) == min(100, usable) and counts["train_over_max_train_pairs"] == usable - 100
    goedel = _rows(shared_data / "statements/minif2f_goedel_prover_v2_repaired.jsonl")
    assert len(pairs["test"]) == len({r["name"] for r in goedel}) and not pairs["val"]
    assert Counter(p.source for p in pairs["train"]) == {"workbook.jsonl": 100}
    with pytest.raises(ValueError, match="overlap"):
        PairsConfig(train_splits=["test"], test_splits=["test"])


def test_the_grpo_problem_stream_resumes_where_it_stopped(default_pairs):
    from autoformalizer.data import ProblemStream
    from leanloop.training.resume import resumable
    from torch.utils.data import DataLoader

    pairs = default_pairs[0]["train"][:5]

    def loader():
        return DataLoader(ProblemStream(pairs, 2, seed=3), batch_size=None, collate_fn=lambda problems: problems)

    def names(it, n):
        return [[p.name for p in next(it)] for _ in range(n)]

    straight = names(iter(loader()), 7)  # crosses epochs of the shuffle
    wrapped, order, per_batch = resumable(loader(), seed=0)
    assert order is wrapped.dataset and per_batch == 1
    order.skip = 4  # a run restored after 4 steps
    assert names(iter(wrapped), 3) == straight[4:]
    assert names(iter(wrapped), 2) == straight[:2]  # the skip is for the first pass only


def test_each_rank_draws_its_own_grpo_problems_and_resumes_them(default_pairs):
    """Under DDP every rank holds the same seeded stream: rank r takes steps r, r + world, ... of it,
    so the ranks' problems of a step are disjoint (within an epoch of the shuffle: 6 problems, 3
    per step over 2 ranks)."""
    from autoformalizer.data import ProblemStream
    from leanloop.training.resume import resumable
    from torch.utils.data import DataLoader

    pairs = default_pairs[0]["train"][:6]

    def draws(rank, world, n, skip=0):
        loader = DataLoader(ProblemStream(pairs, 3, seed=3), batch_size=None, collate_fn=lambda problems: problems)
        wrapped, order, _ = resumable(loader, seed=0, rank=rank, world_size=world)
        order.skip = skip
        it = iter(wrapped)
        return [[p.name for p in next(it)] for _ in range(n)]

    single = draws(0, 1, 8)
    ranks = [draws(rank, 2, 4) for rank in (0, 1)]
    assert ranks[0] == single[0::2] and ranks[1] == single[1::2]
    for step in range(4):
        assert sorted(ranks[0][step] + ranks[1][step]) == sorted(p.name for p in pairs)  # one epoch, split
    assert draws(1, 2, 2, skip=2) == ranks[1][2:]  # a restored rank continues its own draws
