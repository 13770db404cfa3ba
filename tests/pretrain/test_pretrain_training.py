"""Pretraining data on real Lean text: packed CLM rows, MLM batches masking 30%, MiniLM end to end.
(The CLM loss falling on real text is tested on the manifest run in tests/leanloop/test_training_manifest.py.)"""

from __future__ import annotations

import json

import torch

from leanloop.paths import REPO_ROOT
from leanloop.training.models import ModelSpec
from pretrain.config import CorpusConfig, JsonlSource
from pretrain.data import PretrainData
from pretrain.module import PretrainModule

PROOFS = JsonlSource("shared://candidates/kimina_prover_preview_minif2f_test_solved.jsonl", ["correct_proof"])


def test_packed_rows_hold_every_token_once():
    data = PretrainData(
        CorpusConfig(jsonl=[PROOFS], max_documents=12, validation_fraction=0.0), max_length=128, batch_size=4
    )
    data.setup("fit")
    tokens = sum(len(e["input_ids"]) for row in data.train_set + data.val_set for e in row)
    assert tokens == data.counts["train_tokens"] + data.counts["val_tokens"]
    assert all(sum(len(e["input_ids"]) for e in row) <= 128 for row in data.train_set)
    batch = next(iter(data.train_dataloader()))
    assert batch["input_ids"].shape[0] == 4 and batch["input_ids"].shape[1] <= 128
    assert "attention_mask" not in batch and batch["use_cache"] is False


def test_prebuilt_corpus_is_tokenized_once(artifacts, monkeypatch):
    import pretrain.data
    from pretrain.config import CorpusBuild
    from pretrain.documents import build

    out = build(CorpusBuild(corpus=CorpusConfig(jsonl=[PROOFS], max_documents=6), run="small"))
    config = CorpusConfig(prebuilt="artifacts://pretrain_corpus/small")
    first = PretrainData(config, max_length=128)
    first.prepare_data()  # Lightning: once per node, before setup on every rank
    cache = first.cache_file()
    assert cache.is_file() and cache.parent == out / "cache"

    def no_rebuild(*_):
        raise AssertionError("setup re-read the corpus although a cache exists")

    monkeypatch.setattr(pretrain.data, "collect_documents", no_rebuild)
    second = PretrainData(config, max_length=128)
    second.setup("fit")
    assert second.counts["corpus"]["documents"] == 6
    assert sum(len(e["input_ids"]) for row in second.train_set for e in row) == second.counts["train_tokens"]
    assert PretrainData(config, max_length=64).cache_file() != cache  # another shape, another cache


def test_masked_lm_batches_mask_thirty_percent():
    data = PretrainData(
        CorpusConfig(jsonl=[PROOFS], max_documents=40),
        max_length=128,
        batch_size=16,
        objective="mlm",
        base=ModelSpec("minilm"),
        mlm_probability=0.3,
    )
    data.setup("fit")
    torch.manual_seed(0)
    selected = real = 0
    for batch in data.train_dataloader():
        ordinary = batch["attention_mask"].bool()
        assert (batch["input_ids"][:, 0] == data.tokenizer.cls_token_id).all()  # [CLS] leads, never masked
        assert (batch["labels"][:, 0] == -100).all()
        assert (batch["labels"][~ordinary] == -100).all()  # padding is never a target
        selected += int((batch["labels"] != -100).sum())
        real += int(ordinary.sum()) - 2 * ordinary.shape[0]  # without [CLS]/[SEP]
    assert 0.27 < selected / real < 0.33


class ModeRecordingModule(PretrainModule):
    """The stage's module, noting whether the model was in train mode at each training step."""

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        self.modes = getattr(self, "modes", []) + [(self.model.training, all(m.training for m in self.model.modules()))]
        return super().training_step(batch, batch_idx)


def test_mlm_default_runs_minilm_end_to_end_in_train_mode(artifacts):
    """The real MiniLM comes from from_pretrained, which returns eval mode (dropout off); the
    stage trains it in train mode all the same."""
    from transformers import AutoModelForMaskedLM

    from leanloop.training.cli import run_stage
    from pretrain.train import LINKS, STAGE

    loaded = AutoModelForMaskedLM.from_pretrained(ModelSpec("minilm").weights_location())
    assert not loaded.training and loaded.config.hidden_dropout_prob > 0  # what HFModule must undo
    result = run_stage(
        STAGE,
        ModeRecordingModule,
        PretrainData,
        [
            "--config",
            str(REPO_ROOT / "configs/pretrain/mlm_default.yaml"),
            "--trainer.fast_dev_run",
            "true",
            "--data.corpus.max_documents",
            "8",
            "--data.corpus.text_dirs",
            "[]",
            "--data.max_length",
            "64",
        ],
        links=LINKS,
    )
    assert result.model.modes == [(True, True)]  # every submodule, dropout included
    assert result.model.model.training  # and back in train mode after validation
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["model"]["base"] == "all-MiniLM-L6-v2"
    assert manifest["model"]["architecture"] == "BertForMaskedLM"
    model = AutoModelForMaskedLM.from_pretrained(result.run_dir / "final")
    assert model.config.hidden_size == 384  # the real MiniLM, not a fresh tiny model


def test_default_holds_out_the_data_corpus_eval_theorems(artifacts, shared_data):
    """configs/pretrain/default.yaml names the data stage's default corpus as holdout; a run with a
    holdout leaves out every proof/statement of its valid/test theorems and records that."""
    import pyarrow.parquet as pq
    import yaml

    from data.build import build, parse_config
    from leanloop.artifacts import describe_input
    from pretrain.train import run

    default = yaml.safe_load((REPO_ROOT / "configs/pretrain/default.yaml").read_text())
    data_run = yaml.safe_load((REPO_ROOT / "configs/data/default.yaml").read_text())["run"]
    assert default["data"]["corpus"]["holdout"] == f"artifacts://data/{data_run}"

    build(parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml")]), progress=False)
    corpus = pq.read_table(next((artifacts / "data/debug").rglob("*.parquet")), columns=["name", "split"]).to_pydict()
    evaluated = {n for n, s in zip(corpus["name"], corpus["split"]) if s != "train"}
    assert evaluated and {n for n, s in zip(corpus["name"], corpus["split"]) if s == "train"}
    proofs = [json.loads(line) for line in (shared_data / PROOFS.path[len("shared://") :]).open() if line.strip()]
    assert 0 < sum(r["name"] in evaluated for r in proofs) < len(proofs)  # the split really bites

    result = run(
        [
            "--config",
            str(REPO_ROOT / "configs/pretrain/debug.yaml"),
            "--trainer.fast_dev_run",
            "true",
            "--data.corpus.holdout",
            "artifacts://data/debug",
            "--data.max_length",
            "64",
        ]
    )
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["inputs"]["holdout"] == describe_input(artifacts / "data/debug")
    counts = manifest["counts"]["corpus"]
    assert counts["holdout_theorems"] == len(evaluated)
    assert counts["rows"]["held_out"] == sum(r["name"] in evaluated for r in proofs)
    from pretrain.documents import collect_documents

    documents, _ = collect_documents(CorpusConfig(jsonl=[PROOFS], holdout="artifacts://data/debug"))
    assert documents and not any(d["name"] in evaluated for d in documents)
