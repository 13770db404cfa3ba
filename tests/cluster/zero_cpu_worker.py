"""One rank of the DeepSpeed ZeRO check on CPU (started twice by test_cluster_strategy.py).

Lightning's DeepSpeedStrategy only runs on CUDA, so on this CPU machine the test hands the exact
DeepSpeed config that strategy built from configs/strategy/*.yaml to DeepSpeed itself, on its CPU
accelerator over gloo, and records what each rank holds after one optimizer step.

usage: python zero_cpu_worker.py CONFIGS.json OUT_DIR   (RANK, WORLD_SIZE, MASTER_* in the env)
"""

import json
import os
import sys

os.environ["DS_ACCELERATOR"] = "cpu"

import deepspeed  # noqa: E402
import deepspeed.ops  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

# WHY: with a compiler present, DeepSpeed's CPU backend JIT-builds a shared-memory allreduce op on
# first use (minutes). Marking it incompatible makes DeepSpeed use plain gloo collectives, which
# is all a correctness check needs. (DeepSpeed keeps this probe result in one module-level dict.)
deepspeed.ops.__compatible_ops__ = {"deepspeed_shm_comm": False}

BATCH, FEATURES, WIDTH, LR = 4, 8, 16, 0.05


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, WIDTH), torch.nn.Tanh(), torch.nn.Linear(WIDTH, 1))


def rank_batch(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + rank)
    return torch.randn(BATCH, FEATURES, generator=generator), torch.randn(BATCH, 1, generator=generator)


def reference_step(world_size: int) -> list[float]:
    """One plain-torch SGD step on the mean loss of every rank's batch: what data parallelism
    with averaged gradients must reproduce, whatever ZeRO shards."""
    model = tiny_model()
    loss = sum(torch.nn.functional.mse_loss(model(x), y) for x, y in map(rank_batch, range(world_size)))
    (loss / world_size).backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= LR * p.grad
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()


def hf_export_under_zero3(config: dict, final_dir: str) -> dict:
    """HFModule's export path (leanloop.training.module.save_hf) on a ZeRO-3-sharded transformers
    model after one step: every rank calls it, rank 0 writes. Returns what the test compares: the
    weights each rank sees inside a gather, and how much of them ``param.data`` holds outside one."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from leanloop.training.module import save_hf

    # below this many elements ZeRO-3 keeps a weight whole on every rank ("persistent"); a tiny
    # model's weights all are, a real model's matrices are not: make every weight a shard here
    config = {**config, "zero_optimization": {**config["zero_optimization"], "stage3_param_persistence_threshold": 0}}
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=96,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
            tie_word_embeddings=True,
        )
    )
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=torch.optim.SGD(model.parameters(), lr=LR), config=config
    )
    ids = torch.randint(0, 96, (BATCH, 12), generator=torch.Generator().manual_seed(dist.get_rank()))
    engine.backward(engine(input_ids=ids, labels=ids, use_cache=False).loss)
    engine.step()
    outside = sum(p.data.numel() for p in model.parameters())  # a naive save_pretrained writes these
    save_hf(model, None, final_dir, writer=dist.get_rank() == 0, zero3=True)
    with deepspeed.zero.GatheredParameters(list(model.parameters())):
        gathered = {n: p.detach().reshape(-1).tolist() for n, p in model.named_parameters()}
    dist.barrier()  # rank 0 has finished writing before anyone reports
    return {"data_elements_outside_gather": outside, "gathered": gathered}


def main() -> None:
    configs = json.loads(open(sys.argv[1]).read())
    out_dir = sys.argv[2]
    deepspeed.init_distributed("gloo")
    rank = dist.get_rank()
    results = {"reference_params": reference_step(dist.get_world_size())}
    for name, config in configs.items():
        model = tiny_model()
        params = list(model.parameters())
        engine, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.SGD(params, lr=LR), config=config)
        x, y = rank_batch(rank)
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
        stage = engine.zero_optimization_stage()
        full = sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in params)
        if stage == 3:
            local = sum(p.ds_tensor.numel() for p in params)  # this rank's shard of the weights
            with deepspeed.zero.GatheredParameters(params):
                flat = torch.cat([p.detach().reshape(-1) for p in params])
        else:
            # stage 1/2 keep weights whole; the fp32 master copy the optimizer steps is sharded
            local = sum(t.numel() for t in engine.optimizer.single_partition_of_fp32_groups)
            flat = torch.cat([p.detach().reshape(-1) for p in params])
        results[name] = {
            "stage": stage,
            "world_size": dist.get_world_size(),
            "local_elements": local,
            "full_elements": full,
            "params": flat.tolist(),
        }
        del engine
        if stage == 3:
            results[name]["hf_export"] = hf_export_under_zero3(config, os.path.join(out_dir, f"{name}_hf"))
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as handle:
        json.dump(results, handle)
    dist.barrier()


if __name__ == "__main__":
    main()
