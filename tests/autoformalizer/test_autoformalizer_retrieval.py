"""System B on the shipped Mathlib index: subsets, the embedding cache, recall@8, the extractor."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from autoformalizer.mathlib_index import IndexConfig, MathlibIndex, extract_file
from autoformalizer.retrieval import (
    MathlibRetriever,
    RetrievalConfig,
    format_premises,
    recall_at_k,
    recall_problems,
    used_names,
)
from autoformalizer.statements import find_declaration
from leanloop.cli import main as leanloop_main


@pytest.fixture(scope="module")
def full_names(shared_data):
    """Targets are resolved against the full index (names only)."""
    return MathlibIndex.load(IndexConfig())


@pytest.fixture(scope="module")
def problems(full_names):
    return recall_problems(full_names)


def test_used_names_reads_terms_not_tactics(shared_data, full_names):
    rows = [
        json.loads(line)
        for line in open(shared_data / "candidates/kimina_prover_preview_minif2f_test_solved.jsonl", encoding="utf-8")
    ]
    proof = next(r["correct_proof"] for r in rows if "nlinarith [sq_nonneg" in r["correct_proof"])
    names = used_names(proof, full_names)
    assert "sq_nonneg" in names and all(n in full_names for n in names)
    assert "by_contra" in full_names and not any(
        "by_contra" in used_names(r["correct_proof"], full_names)
        for r in rows
        if re.search(r"^\s*by_contra\b", r["correct_proof"], re.M)
        and not re.search(r"[(\[ ]by_contra\b", r["correct_proof"])
    )
    # `open Real` resolves `sqrt_nonneg` to Real.sqrt_nonneg
    assert used_names("open Real\ntheorem t (x : ℝ) : 0 ≤ √x := sqrt_nonneg x", full_names) == {"Real.sqrt_nonneg"}


def test_recall_at_8_on_a_subset_beats_chance_and_the_cache_is_keyed_by_content(problems, full_names, tmp_path):
    chosen = problems[:15]
    targets = sorted(set().union(*(p.targets for p in chosen)))
    modules = sorted({full_names[n].module for n in targets})
    config = IndexConfig(modules=modules, include_names=targets, max_declarations=100)
    index = MathlibIndex.load(config)
    assert set(targets) <= set(index.by_name) and len(index) <= 100 + len(targets)
    retrieval = RetrievalConfig(index=config, cache_dir=str(tmp_path), dense_k=100, rerank_k=8)
    retriever = MathlibRetriever(index, retrieval)
    assert not retriever.from_cache and retriever.cache_path.is_file()
    assert retriever.embeddings.shape == (len(index), 384)
    retrieved = [[d.name for d in r] for r in retriever.retrieve_many([p.query for p in chosen])]
    assert all(len(r) == 8 for r in retrieved)
    recall = recall_at_k(retrieved, [p.targets for p in chosen])
    chance = 8 / len(index)  # expected recall of 8 names drawn at random
    assert recall > 3 * chance
    # the same rows hit the cache; another subset gets another key
    again = MathlibRetriever(index, retrieval)
    assert again.from_cache and (again.embeddings == retriever.embeddings).all()
    smaller = MathlibIndex(index.declarations[:-1])
    assert smaller.content_hash != index.content_hash
    prefix = format_premises(retriever.retrieve(chosen[0].query))
    assert prefix.startswith("-- Possibly useful Mathlib declarations:") and prefix.count("\n-- ") == 8


def test_extractor_reads_namespaces_aliases_and_docstrings_of_real_lean(shared_data):
    source = (shared_data / "lean_text/batteries_tests/alias.lean").read_text(encoding="utf-8")
    rows = {r["name"]: r for r in extract_file(source, "Mathlib.Test.Alias")}
    # the names Lean itself printed for this file (its #guard_msgs deprecation warnings)
    printed = set(re.findall(r"`([\w.]+)` has been deprecated", source))
    assert printed and printed <= set(rows)
    assert rows["A.foo"]["doc"] == "doc string for foo" and rows["A.foo"]["sig"] == ": 1 + 1 = 2"
    assert rows["B.foo3"]["kind"] == "alias" and rows["A.Foo.barbaz"].get("protected")


def test_mathlib_index_command_builds_a_loadable_index(shared_data, tmp_path):
    rows = [
        json.loads(line) for line in open(shared_data / "statements/minif2f_yangky11_lean4.jsonl", encoding="utf-8")
    ][:25]
    for row in rows:
        target = tmp_path / "mathlib" / row["path"].replace("MiniF2F", "Mathlib")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(row["lean_file"], encoding="utf-8")
    out = tmp_path / "index.jsonl.gz"
    assert leanloop_main(["mathlib-index", "--mathlib", str(tmp_path / "mathlib"), "--out", str(out)]) == 0
    index = MathlibIndex.load(IndexConfig(path=str(out)))
    assert sorted(index.by_name) == sorted(r["name"] for r in rows)
    for row in rows:
        decl = find_declaration(row["lean_file"])
        assert index[row["name"]].sig == " ".join(decl.signature.split())
        assert index[row["name"]].module.startswith("Mathlib.")
    shutil.rmtree(tmp_path / "mathlib")
    with pytest.raises(FileNotFoundError, match="no Mathlib"):
        leanloop_main(["mathlib-index", "--mathlib", str(tmp_path), "--out", str(out)])


def test_rerank_keeps_the_bm25_order_of_the_dense_candidates():
    """The seed's System B: "BM25 lexical reranking filters candidates down to the top (k=8)" of the
    dense top 100; reciprocal-rank fusion with the dense order is the named option ``rrf``."""
    from autoformalizer.mathlib_index import Declaration

    names = [
        "Real.add_pow_le_pow_mul_pow_of_sq_le_sq",
        "Nat.succ_le_iff",
        "Real.sqrt_nonneg",
        "Finset.sum_range_succ",
        "sq_nonneg",
        "abs_sub_comm",
        "Nat.Prime.two_le",
        "mul_self_nonneg",
        "Int.emod_emod_of_dvd",
        "pow_two",
    ]
    index = MathlibIndex([Declaration(n, "theorem", "Mathlib.X", ": True") for n in names])
    retriever = MathlibRetriever.__new__(MathlibRetriever)  # rerank needs no embedder
    retriever.index, retriever.config = index, RetrievalConfig(rerank_k=3)
    dense = list(range(len(names)))  # the dense order: 0 first
    query = "the square root is nonneg and a square is nonneg"
    bm25 = retriever.rerank(query, dense)
    assert retriever.config.rerank == "bm25" and names[bm25[0]] in ("Real.sqrt_nonneg", "sq_nonneg")
    assert set(map(names.__getitem__, bm25[:2])) == {"Real.sqrt_nonneg", "sq_nonneg"}
    retriever.config = RetrievalConfig(rerank_k=3, rerank="rrf")
    fused = retriever.rerank(query, dense)
    assert fused != bm25 and len(fused) == 3
