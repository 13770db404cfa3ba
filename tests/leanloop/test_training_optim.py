"""No silent pure-bf16 optimizer (leanloop/training/optim.py): torch AdamW on bf16 weights rounds the
paper learning rates' updates away; the stages train fp32 weights under bf16-mixed (or DeepSpeed's
fp32 master weights), and refuse 16-bit weights otherwise, at config time and on the built model."""

from __future__ import annotations

import lightning as L
import pytest
import torch

from leanloop.training.models import ModelSpec, load_model, load_tokenizer
from leanloop.training.optim import OptimConfig, check_master_weights, configure_optimizers

STEPS = 4


class Tiny(L.LightningModule):
    def __init__(self, model, lr: float):
        super().__init__()
        self.model, self.optim = model, OptimConfig(lr=lr, schedule="constant", warmup_ratio=0.0)

    def training_step(self, batch, batch_idx):
        return self.model(input_ids=batch, labels=batch).loss

    def configure_optimizers(self):
        return configure_optimizers(self, self.optim)


@pytest.fixture(scope="module")
def start():
    """Weights as a bf16 checkpoint holds them (loading it in float32 is exact) and one batch."""
    torch.manual_seed(0)
    model = load_model(ModelSpec("qwen3-tiny"), tokenizer=load_tokenizer("qwen3"))
    batch = torch.randint(0, 2000, (2, 32), generator=torch.Generator().manual_seed(1))
    return {
        k: v.to(torch.bfloat16).float() if v.is_floating_point() else v for k, v in model.state_dict().items()
    }, batch


def _train(start, lr: float, precision: str, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    state, batch = start
    model = load_model(ModelSpec("qwen3-tiny"), tokenizer=load_tokenizer("qwen3"))
    model.load_state_dict(state)
    module = Tiny(model.to(dtype), lr)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        precision=precision,
        max_steps=STEPS,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, torch.utils.data.DataLoader([batch] * STEPS, batch_size=None))
    return {k: v.float() for k, v in module.model.state_dict().items()}


def _pure_bf16(start, lr: float) -> dict[str, torch.Tensor]:
    """What bf16-true with torch AdamW did (now refused): the same steps on bf16 weights."""
    state, batch = start
    model = load_model(ModelSpec("qwen3-tiny"), tokenizer=load_tokenizer("qwen3"))
    model.load_state_dict(state)
    model.to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    for _ in range(STEPS):
        optimizer.zero_grad()
        model(input_ids=batch, labels=batch).loss.backward()
        optimizer.step()
    return {k: v.float() for k, v in model.state_dict().items()}


def _moved(start, after) -> tuple[float, torch.Tensor]:
    """(share of weights that changed, the update as one vector)."""
    deltas = [after[k] - v for k, v in start[0].items() if v.is_floating_point()]
    changed = sum(int((d != 0).sum()) for d in deltas) / sum(d.numel() for d in deltas)
    return changed, torch.cat([d.flatten() for d in deltas])


@pytest.mark.parametrize("lr", [1e-5, 1e-6])  # LLF / LeanPRM's SFT and RL learning rates (configs/*/paper.yaml)
def test_bf16_mixed_moves_the_weights_as_fp32_does_where_pure_bf16_did_not(start, lr):
    fp32_changed, fp32 = _moved(start, _train(start, lr, "32-true"))
    mixed_changed, mixed = _moved(start, _train(start, lr, "bf16-mixed"))
    bf16_changed, bf16 = _moved(start, _pure_bf16(start, lr))
    ratio = float(mixed.norm() / fp32.norm())
    assert fp32_changed > 0.5
    assert mixed_changed >= 0.99 * fp32_changed and 0.9 < ratio < 1.1, (mixed_changed, fp32_changed, ratio)
    cosine = float(torch.nn.functional.cosine_similarity(mixed, fp32, dim=0))
    assert cosine > 0.9
    # the refused recipe: most weights never move, the applied update falls far short of fp32's
    bf16_ratio = float(bf16.norm() / fp32.norm())
    print(
        f"lr {lr}: changed fp32 {fp32_changed:.3f} bf16-mixed {mixed_changed:.3f} pure bf16 {bf16_changed:.3f}; "
        f"update norm vs fp32: bf16-mixed {ratio:.3f} pure bf16 {bf16_ratio:.3f}"
    )
    assert bf16_changed < 0.5 * fp32_changed and bf16_ratio < 0.7, (bf16_changed, fp32_changed, bf16_ratio)


def test_16_bit_trainable_weights_without_deepspeed_are_refused_on_the_built_model(start):
    with pytest.raises(
        ValueError,
        match=r"Tiny trains [\d,]+ of its [\d,]+ trainable weights in 16 bits with torch "
        r"AdamW, which keeps no fp32 copy",
    ):
        _train(start, 1e-5, "bf16-mixed", torch.bfloat16)


def test_16_bit_precision_without_deepspeed_is_refused_at_config_time(artifacts, capsys):
    from sft.train import run

    check_master_weights("bf16-mixed", None)
    check_master_weights("bf16-true", "deepspeed_stage_2")
    check_master_weights("bf16-true", {"class_path": "lightning.pytorch.strategies.DeepSpeedStrategy"})
    with pytest.raises(SystemExit) as exit_:
        run(["--config", "configs/sft/debug.yaml", "--trainer.precision", "bf16-true", "--run", "refused"])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1
    assert "precision bf16-true trains 16-bit weights with torch AdamW" in err and "bf16-mixed" in err
    assert not (artifacts / "sft" / "refused").exists()  # refused before the run folder is made
    # the paper configs as shipped train fp32 weights under bf16-mixed: accepted
    assert run(["--config", "configs/sft/paper.yaml", "--dry_run", "true"]).skipped
