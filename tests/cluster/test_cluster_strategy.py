"""Strategy configs: they parse into real Lightning strategies, layer onto a stage config, and the
distributed paths train for real on CPU over gloo (Lightning DDP; DeepSpeed ZeRO 2/3 engines)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cluster.strategy import deepspeed_config, load_trainer_options
from cluster.sweep import expand, load_sweep, run_sweep
from cluster.sweep_report import summarize
from leanloop.artifacts import read_manifest
from leanloop.paths import REPO_ROOT

STRATEGIES = REPO_ROOT / "configs" / "strategy"
ZERO = ["zero2", "zero3", "zero3_offload"]
WORKER = Path(__file__).with_name("zero_cpu_worker.py")


def init_args(name: str) -> dict:
    return yaml.safe_load((STRATEGIES / f"{name}.yaml").read_text())["trainer"]["strategy"]["init_args"]


@pytest.mark.parametrize("name", ZERO)
def test_zero_configs_build_lightnings_deepspeed_strategy(name):
    options = load_trainer_options(STRATEGIES / f"{name}.yaml")
    strategy = options["strategy"]
    assert type(strategy).__name__ == "DeepSpeedStrategy"
    assert options["accelerator"] == "gpu"  # Lightning's DeepSpeed runs on CUDA only
    wanted = init_args(name)
    zero = deepspeed_config(strategy)["zero_optimization"]
    assert zero["stage"] == wanted["stage"]
    for key in ("allgather_bucket_size", "reduce_bucket_size", "overlap_comm", "contiguous_gradients"):
        assert zero[key] == wanted[key], key
    assert ("offload_optimizer" in zero) == wanted["offload_optimizer"]
    assert ("offload_param" in zero) == wanted.get("offload_parameters", False)
    if wanted["offload_optimizer"]:
        assert zero["offload_optimizer"]["device"] == wanted["offload_optimizer_device"]
        assert zero["offload_param"]["device"] == wanted["offload_params_device"]


def test_ddp_configs_pick_the_backend_for_their_device():
    cpu = load_trainer_options(STRATEGIES / "ddp_cpu.yaml")
    gpu = load_trainer_options(STRATEGIES / "ddp.yaml")
    assert type(cpu["strategy"]).__name__ == type(gpu["strategy"]).__name__ == "DDPStrategy"
    assert (cpu["accelerator"], cpu["strategy"].process_group_backend) == ("cpu", "gloo")
    assert (gpu["accelerator"], gpu["strategy"].process_group_backend) == ("gpu", "nccl")


def test_strategy_file_layers_onto_a_stage_config_with_the_stage_parser(artifacts, monkeypatch):
    from leanloop.training.cli import TRAINER_DEFAULTS, StageCLI
    from pretrain.data import PretrainData
    from pretrain.module import PretrainModule
    from pretrain.train import LINKS, STAGE

    class ParseOnly(StageCLI):  # the stage's own parser, stopped before anything is built
        def before_instantiate_classes(self) -> None:
            pass

        def instantiate_classes(self) -> None:
            pass

    monkeypatch.setattr(sys, "argv", ["pretrain.train"])  # LightningCLI reads args, not pytest's argv
    debug = yaml.safe_load((REPO_ROOT / "configs/pretrain/debug.yaml").read_text())
    cli = ParseOnly(
        STAGE,
        PretrainModule,
        PretrainData,
        links=LINKS,
        run=False,
        args=["--config", "configs/pretrain/debug.yaml", "--config", "configs/strategy/zero3.yaml"],
        save_config_callback=None,
        auto_configure_optimizers=False,
        seed_everything_default=42,
        trainer_defaults=TRAINER_DEFAULTS,
    )
    trainer = cli.config.trainer
    assert trainer.strategy.class_path == "lightning.pytorch.strategies.DeepSpeedStrategy"
    assert trainer.strategy.init_args.stage == 3
    assert trainer.max_steps == debug["trainer"]["max_steps"]  # the stage's own trainer options survive
    assert cli.config.model.optim.lr == debug["model"]["optim"]["lr"]


def test_local_sweep_runs_a_two_process_gloo_ddp_probe(tmp_path, artifacts):
    """Lightning DDP over gloo, two CPU ranks, launched by the sweep's local executor; a run that
    fails first does not stop the sweep and is reported."""
    sweep_file = tmp_path / "gloo.yaml"
    sweep_file.write_text(
        yaml.safe_dump(
            {
                "name": "gloo",
                "stage": "probe",
                "entry": "cluster.probe",
                "config": ["configs/strategy/ddp_cpu.yaml"],
                "overrides": {"log.wandb": False},
                "runs": [{"name": "broken", "overrides": {"model.lr": "fast"}}, {"name": "ddp"}],
                "metric": "train/loss",
            }
        )
    )
    sweep = load_sweep(sweep_file)
    statuses = run_sweep(sweep)
    assert [s.status for s in statuses] == ["failed", "finished"], [s.detail for s in statuses]
    assert statuses[0].detail.startswith("exit status")
    broken, run = expand(sweep)
    assert not broken.stage_run.finished
    manifest = read_manifest(run.stage_run.run_dir, stage="probe")
    probe = manifest["counts"]["probe"]
    assert manifest["trainer"]["world_size"] == probe["world_size"] == 2
    assert (probe["strategy"], probe["backend"]) == ("DDPStrategy", "gloo")
    # each rank saw its own half of the data, yet both ended with the same weights: gradients
    # were averaged across processes, and training moved them
    samples = manifest["counts"]["samples"]
    assert probe["samples_per_rank"] == [samples // 2, samples // 2]
    assert probe["samples_seen_by_several_ranks"] == 0
    assert probe["max_param_spread"] == 0.0
    assert probe["param_change"] > 1e-3
    summary = summarize(sweep, statuses)
    assert [r["status"] for r in summary.rows] == ["failed", "finished"]
    assert summary.rows[1]["train/loss"] == manifest["metrics"]["train/loss"]
    assert summary.manifest_path is None  # a failed run: the sweep is not complete


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_deepspeed_zero_shards_and_matches_plain_sgd_on_cpu_over_gloo(tmp_path):
    """DeepSpeed's own engine on its CPU accelerator, with the configs the strategy files build.

    Lightning refuses DeepSpeed without CUDA, so the strategy's DeepSpeed config is handed to
    ``deepspeed.initialize`` directly, after adding what Lightning adds at fit time."""
    configs = {}
    for name in ZERO:
        config = deepspeed_config(load_trainer_options(STRATEGIES / f"{name}.yaml")["strategy"])
        config.update(train_micro_batch_size_per_gpu=4, gradient_accumulation_steps=1, gradient_clipping=0.0)
        if "offload_optimizer" in config["zero_optimization"]:
            # with offload DeepSpeed insists on its C++ CPU Adam (a compiled op); let it step the
            # test's torch SGD instead so the offload code path runs without a build
            config["zero_force_ds_cpu_optimizer"] = False
        configs[name] = config
    (tmp_path / "configs.json").write_text(json.dumps(configs))
    port = _free_port()
    procs = []
    for rank in range(2):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), str(tmp_path / "configs.json"), str(tmp_path)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]

    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    reference = ranks[0]["reference_params"]
    for name in ZERO:
        results = [rank[name] for rank in ranks]
        for result in results:
            assert result["stage"] == init_args(name)["stage"]
            assert result["world_size"] == 2
            # each rank holds about half (ZeRO pads shards to an alignment), not the whole
            assert result["full_elements"] / 2 <= result["local_elements"] < result["full_elements"]
            assert result["params"] == pytest.approx(reference, abs=1e-6), name
        assert results[0]["params"] == results[1]["params"]

    # HFModule.export under ZeRO-3 (leanloop.training.module.save_hf): outside a gather no rank
    # holds the weights, yet the Hugging Face folder rank 0 wrote has them whole, and they are the
    # trained weights both ranks see
    from transformers import AutoModelForCausalLM

    for name in ("zero3", "zero3_offload"):
        exports = [rank[name]["hf_export"] for rank in ranks]
        assert [e["data_elements_outside_gather"] for e in exports] == [0, 0]
        saved = AutoModelForCausalLM.from_pretrained(tmp_path / f"{name}_hf")
        params = dict(saved.named_parameters())
        assert set(params) == set(exports[0]["gathered"])
        for key, param in params.items():
            assert param.detach().reshape(-1).tolist() == pytest.approx(exports[0]["gathered"][key], abs=1e-7)
        assert exports[0]["gathered"] == exports[1]["gathered"]
