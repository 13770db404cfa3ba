"""A real (tiny) training run writes the artifact contract, and later stages check it."""

from __future__ import annotations

import csv
import json
import math

import pytest
import yaml

from leanloop.artifacts import ManifestError, content_hash
from leanloop.paths import REPO_ROOT
from leanloop.training.inputs import InputMismatchError, check_model_run, tokenizer_fingerprint
from leanloop.training.models import ModelSpec, load_model, load_tokenizer

DEBUG = str(REPO_ROOT / "configs/pretrain/debug.yaml")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """Seven optimizer steps (lr high enough for a visible fall) with step checkpoints, validation
    during the fit after steps 3 and 6 only (max_steps stops the epoch at 7), in an isolated
    artifacts root."""
    import os

    from pretrain.train import run

    root = tmp_path_factory.mktemp("artifacts")
    old = os.environ.get("LEANLOOP_ARTIFACTS")
    os.environ["LEANLOOP_ARTIFACTS"] = str(root)
    try:
        args = [
            "--config",
            DEBUG,
            "--run",
            "seven_steps",
            "--trainer.max_steps",
            "7",
            "--trainer.val_check_interval",
            "3",
            "--trainer.limit_val_batches",
            "1",
            "--checkpoint_every_n_steps",
            "3",
            "--model.optim.lr",
            "0.02",
            "--model.base.overrides",
            "{hidden_size: 32, head_dim: 8, intermediate_size: 64}",
            "--seed_everything",
            "7",
        ]
        result = run(args)
        yield root, result, args
    finally:
        if old is None:
            os.environ.pop("LEANLOOP_ARTIFACTS", None)
        else:
            os.environ["LEANLOOP_ARTIFACTS"] = old


def test_manifest_records_inputs_seed_counts_metrics_model(finished_run, shared_data):
    root, result, _ = finished_run
    run_dir = root / "pretrain" / "seven_steps"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["stage"] == "pretrain" and manifest["run"] == "seven_steps"
    assert manifest["seed"] == 7 and manifest["fast_dev_run"] is False
    proofs = shared_data / "candidates/kimina_prover_preview_minif2f_test_solved.jsonl"
    entry = manifest["inputs"]["jsonl:shared://candidates/kimina_prover_preview_minif2f_test_solved.jsonl"]
    assert entry == {
        "path": str(proofs),
        "ref": "shared://candidates/kimina_prover_preview_minif2f_test_solved.jsonl",
        "hash": content_hash(proofs),
        "bytes": proofs.stat().st_size,
    }
    counts = manifest["counts"]
    assert counts["global_step"] == 7
    assert counts["corpus"]["documents"] == 16  # debug.yaml: max_documents 16
    assert counts["train_documents"] + counts["val_documents"] == 16
    assert 0.9 < counts["train_row_fill"] <= 1.0  # packed rows are nearly full
    assert manifest["metrics"]["train/loss"] > 0 and "val/loss" in manifest["metrics"]
    tokenizer = load_tokenizer("qwen3")
    assert manifest["model"] == {
        "base": "preset:qwen3-tiny",
        "architecture": "Qwen3ForCausalLM",
        "model_type": "qwen3",
        "vocab_size": 151_936,
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "tokenizer_size": len(tokenizer),
    }
    assert manifest["git"]["rev"] and "torch" in manifest["versions"]


def test_run_folder_layout_and_resolved_config(finished_run):
    root, _, _ = finished_run
    run_dir = root / "pretrain" / "seven_steps"
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["trainer"]["max_steps"] == 7 and config["seed_everything"] == 7
    assert config["data"]["base"]["name"] == "qwen3-tiny"
    assert (run_dir / "step-000003" / "lightning.ckpt").is_file()
    assert (run_dir / "step-000006" / "lightning.ckpt").is_file()
    assert (run_dir / "metrics.csv").is_file()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(run_dir / "final")
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "final")
    assert model.config.vocab_size == 151_936 and len(tokenizer) == len(load_tokenizer("qwen3"))


def test_clm_loss_falls_on_real_text(finished_run):
    root, result, _ = finished_run
    with open(root / "pretrain/seven_steps/metrics.csv") as handle:
        losses = [float(row["train/loss"]) for row in csv.DictReader(handle) if row.get("train/loss")]
    assert len(losses) == 7
    assert losses[0] > math.log(151_936) - 0.5  # starts near uniform over the real vocabulary
    assert losses[-1] < losses[0] - 1.0
    assert result.manifest["metrics"]["val/loss"] < losses[0]


def test_final_metrics_hold_validation_of_the_exported_weights(finished_run):
    """max_steps stopped the fit after step 7, past the last in-fit validation (step 6): run_stage
    validates once more, so the manifest's val/loss is the loss of the exported model itself."""
    import torch
    from transformers import AutoModelForCausalLM

    root, result, _ = finished_run
    run_dir = root / "pretrain" / "seven_steps"
    with open(run_dir / "metrics.csv") as handle:
        val_rows = [row for row in csv.DictReader(handle) if row.get("val/loss")]
    assert len(val_rows) == 3  # steps 3 and 6 during the fit, then the final weights
    assert float(val_rows[-1]["val/loss"]) == pytest.approx(result.manifest["metrics"]["val/loss"])
    assert int(val_rows[-1]["step"]) > int(val_rows[-2]["step"])
    model = AutoModelForCausalLM.from_pretrained(run_dir / "final").eval()
    total = count = 0
    with torch.no_grad():  # limit_val_batches 1: the first (unshuffled) validation batch
        batch = next(iter(result.datamodule.val_dataloader()))
        trained = int((batch["labels"] != -100).sum())
        total += float(model(**batch).loss) * trained
        count += trained
    assert result.manifest["metrics"]["val/loss"] == pytest.approx(total / count, rel=1e-4)
    assert result.manifest["metrics"]["train/loss"] > 0  # the fit's own metrics are kept beside


def test_same_config_is_skipped_other_config_refused(finished_run, monkeypatch):
    from pretrain.train import run

    root, _, args = finished_run
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(root))
    before = (root / "pretrain/seven_steps/manifest.json").read_text()
    again = run(args)
    assert again.skipped and (root / "pretrain/seven_steps/manifest.json").read_text() == before
    with pytest.raises(SystemExit, match="different config"):
        run(args + ["--model.optim.lr", "0.5"])
    with pytest.raises(SystemExit, match="different config"):  # a debug run never clobbers a real one
        run(args + ["--trainer.fast_dev_run", "true"])
    assert (root / "pretrain/seven_steps/manifest.json").read_text() == before


def test_next_stage_loads_the_run_and_checks_it(finished_run, monkeypatch):
    root, _, _ = finished_run
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(root))
    spec = ModelSpec("artifacts://pretrain/seven_steps", expect_base="preset:qwen3-tiny")
    assert spec.base_name() == "preset:qwen3-tiny"
    model = load_model(spec, tokenizer=load_tokenizer(spec))
    assert type(model).__name__ == "Qwen3ForCausalLM"


def test_tokenizer_mismatch_fails_clearly(finished_run, monkeypatch):
    root, _, _ = finished_run
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(root))
    spec = ModelSpec("artifacts://pretrain/seven_steps")
    with pytest.raises(InputMismatchError, match=r"tokenizer mismatch: .*\(30522 tokens\)"):
        load_model(spec, tokenizer=load_tokenizer("minilm"))


def test_base_model_mismatch_fails_clearly(finished_run, monkeypatch):
    root, _, _ = finished_run
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(root))
    with pytest.raises(InputMismatchError, match="descends from 'preset:qwen3-tiny'.*Qwen3-8B-Base"):
        check_model_run(root / "pretrain/seven_steps", expect_base="Qwen/Qwen3-8B-Base")
    with pytest.raises(InputMismatchError, match="vocabulary mismatch"):
        check_model_run(root / "pretrain/seven_steps", expect_vocab_size=30_522)
    # the same base named by a local folder or a hub id is accepted
    check_model_run(root / "pretrain/seven_steps", expect_base="/models/preset:qwen3-tiny")


def test_unfinished_or_foreign_input_fails_clearly(finished_run, tmp_path):
    root, _, _ = finished_run
    with pytest.raises(ManifestError, match="no manifest.json"):
        check_model_run(tmp_path)
    with pytest.raises(ManifestError, match="is a 'pretrain' artifact, expected 'data'"):
        check_model_run(root / "pretrain/seven_steps", stage="data")


def test_tokenizer_must_fit_the_embedding():
    from transformers import AutoModelForMaskedLM

    spec = ModelSpec("modernbert-tiny", overrides={"vocab_size": 1000})
    with pytest.raises(InputMismatchError, match="30522 tokens but the model embeds only 1000"):
        load_model(spec, AutoModelForMaskedLM, tokenizer=load_tokenizer(spec))


def test_max_steps_beyond_one_epoch_says_max_epochs_stopped_it(tmp_path, monkeypatch, capsys):
    """The stage default is one epoch: a max_steps past it stops at the epoch's end, and says so.
    Its output is not a terminal here, so the progress bar is tqdm's, which keeps updating in a log."""
    from pretrain.train import run

    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path))
    result = run(
        [
            "--config",
            DEBUG,
            "--run",
            "long",
            "--trainer.max_steps",
            "10000",
            "--trainer.limit_val_batches",
            "1",
            "--data.corpus.max_documents",
            "4",
            "--model.base.overrides",
            "{hidden_size: 32, head_dim: 8, intermediate_size: 64}",
        ]
    )
    steps = json.loads((result.run_dir / "manifest.json").read_text())["counts"]["global_step"]
    assert 0 < steps < 10000
    out = capsys.readouterr()
    assert f"stopped at step {steps} by max_epochs=1, before max_steps=10000" in out.err
    assert "Epoch 0: 100%" in out.out + out.err and f"{steps}/{steps}" in out.out + out.err
