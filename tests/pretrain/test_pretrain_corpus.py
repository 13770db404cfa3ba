"""The pretraining corpus accounts for every shipped row and file, and can hold out evaluated theorems."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from leanloop.artifacts import Manifest
from leanloop.paths import REPO_ROOT
from pretrain.config import CorpusConfig, JsonlSource
from pretrain.documents import collect_documents, is_validation, load_prebuilt, main as build_main

PROOFS = "shared://candidates/kimina_prover_preview_minif2f_test_solved.jsonl"
MOBENCH = "shared://statements/matholympiadbench_goedel_prover_v2.jsonl"


def _rows(shared_data, ref):
    path = shared_data / ref[len("shared://") :]
    return [json.loads(line) for line in path.open() if line.strip()]


def test_every_row_and_file_is_accounted_for(shared_data):
    config = CorpusConfig(
        text_dirs=["shared://lean_text/batteries_tests"],
        jsonl=[
            JsonlSource(PROOFS, ["correct_proof"]),
            JsonlSource(MOBENCH, ["header?", "informal_prefix?", "formal_statement"]),
        ],
    )
    documents, counts = collect_documents(config)
    lean_files = list((shared_data / "lean_text/batteries_tests").rglob("*.lean"))
    total = len(lean_files) + len(_rows(shared_data, PROOFS)) + len(_rows(shared_data, MOBENCH))
    assert sum(counts["rows"].values()) == total
    assert counts["rows"]["kept"] == len(documents) == counts["documents"]
    texts = [d["text"] for d in documents]
    assert len(set(texts)) == len(texts)  # duplicates removed, and counted
    proofs = {r["correct_proof"].strip("\n") + "\n" for r in _rows(shared_data, PROOFS)}
    assert proofs <= set(texts)  # every distinct accepted proof is in, once


def test_optional_fields(shared_data):
    manual = "shared://lean_text/reference_manual_lean_outputs.jsonl"
    rows = _rows(shared_data, manual)
    lacking_code = sum(1 for r in rows if not (r.get("code") or "").strip())
    assert lacking_code > 0  # the real file has outputs whose code block was not paired
    _, strict = collect_documents(CorpusConfig(jsonl=[JsonlSource(manual, ["code", "output"], None)]))
    lenient, lenient_counts = collect_documents(CorpusConfig(jsonl=[JsonlSource(manual, ["code?", "output"], None)]))
    assert strict["rows"]["missing_field"] == lacking_code + sum(
        1 for r in rows if (r.get("code") or "").strip() and not (r.get("output") or "").strip()
    )
    assert lenient_counts["rows"].get("missing_field", 0) < strict["rows"]["missing_field"]
    unpaired = next(r for r in rows if not (r.get("code") or "").strip() and (r.get("output") or "").strip())
    assert any(d["text"] == unpaired["output"].strip("\n") + "\n" for d in lenient)


def test_holdout_leaves_out_evaluated_theorems(shared_data, artifacts):
    names = [r["name"] for r in _rows(shared_data, PROOFS)]
    held = set(names[:10])
    corpus_dir = artifacts / "data" / "toy"
    (corpus_dir / "final").mkdir(parents=True)
    pq.write_table(
        pa.table({"name": names[:20], "split": ["test"] * 10 + ["train"] * 10}), corpus_dir / "final" / "part-0.parquet"
    )
    Manifest(stage="data", run="toy").write(corpus_dir)
    documents, counts = collect_documents(
        CorpusConfig(jsonl=[JsonlSource(PROOFS, ["correct_proof"])], holdout="artifacts://data/toy")
    )
    assert counts["rows"]["held_out"] == sum(1 for n in names if n in held)
    assert not any(d["name"] in held for d in documents)
    assert any(d["name"] == names[15] for d in documents)  # train-split theorems stay


def test_validation_split_is_stable_by_content():
    texts = [f"theorem t{i} : {i} = {i} := rfl\n" for i in range(2000)]
    first = [is_validation(t, 0.1) for t in texts]
    assert first == [is_validation(t, 0.1) for t in texts]
    assert 0.07 < sum(first) / len(first) < 0.13


def test_corpus_build_and_reuse(artifacts):
    out = build_main(["--config", str(REPO_ROOT / "configs/pretrain/corpus/shipped.yaml"), "--run", "t"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stage"] == "pretrain_corpus"
    documents, counts = load_prebuilt("artifacts://pretrain_corpus/t")
    assert len(documents) == manifest["counts"]["documents"] == counts["documents"]
    in_process, _ = collect_documents(CorpusConfig(prebuilt=str(out), max_documents=5))
    assert in_process == documents[:5]


def test_missing_source_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="not a folder"):
        collect_documents(CorpusConfig(text_dirs=["shared://no_such_folder"]))
