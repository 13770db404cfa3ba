"""The one way this codebase starts vLLM (optional ``gpu`` extra: ``pip install -e '.[gpu]'``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

VLLM_HINT = (
    "generation backend vllm needs vLLM: the optional `gpu` extra (`pip install -e '.[gpu]'`) on a CUDA "
    "machine, or vLLM's CPU build (`make vllm-venv`: .venv-vllm); else use the transformers backend"
)


@dataclass
class VLLMEngineConfig:
    """How one vLLM engine is sized. Defaults are vLLM's where it has one."""

    gpu_memory_utilization: float = 0.9
    """Share of the GPU this engine may use for its weights, activations and KV cache."""
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    """Prompt + completion tokens; None: the model config's context length."""
    max_num_seqs: int | None = None
    enable_prefix_caching: bool = True
    enable_sleep_mode: bool = False
    """Offload the engine while the optimizer runs (GRPO colocate mode; TRL's ``vllm_enable_sleep_mode``)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Any other ``vllm.LLM`` keyword (passed as given; vLLM rejects unknown ones)."""

    def __post_init__(self) -> None:
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"vllm.gpu_memory_utilization must lie in (0, 1], got {self.gpu_memory_utilization}")
        if self.tensor_parallel_size < 1:
            raise ValueError("vllm.tensor_parallel_size must be >= 1")


def import_vllm():
    try:
        import vllm
    except ImportError as error:
        raise ImportError(VLLM_HINT) from error
    return vllm


def distributed_rank() -> tuple[int, int, int] | None:
    """(rank, local rank, world size) of the torch.distributed job this process belongs to, or None.

    The local rank (the GPU on this node) comes from ``LOCAL_RANK`` (torchrun, Lightning's own
    launcher), else ``SLURM_LOCALID`` (under srun Lightning sets no ``LOCAL_RANK``), else the rank
    modulo the node's GPUs: never the global rank, which is 8-15 on a second 8-GPU node."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    rank = dist.get_rank()
    local = os.environ.get("LOCAL_RANK") or os.environ.get("SLURM_LOCALID")
    local_rank = int(local) if local else rank % max(torch.cuda.device_count(), 1)
    return rank, local_rank, dist.get_world_size()


def engine_args(
    model: str,
    config: VLLMEngineConfig,
    *,
    dtype: str | None = None,
    seed: int = 0,
    tokenizer: str | None = None,
    in_process: bool = False,
    **task_args: Any,
) -> dict[str, Any]:
    """The ``vllm.LLM`` keywords for an engine on ``model`` (a Hugging Face folder). ``task_args``
    are the caller's own (``speculative_config``, ``quantization``, ...); ``config.extra`` wins last.
    ``in_process``: the engine must live in this process even outside a distributed job (GRPO's
    weight sync writes into its model directly)."""
    args: dict[str, Any] = {
        "model": model,
        "tokenizer": tokenizer or model,
        "gpu_memory_utilization": config.gpu_memory_utilization,
        "tensor_parallel_size": config.tensor_parallel_size,
        "max_model_len": config.max_model_len,
        "max_num_seqs": config.max_num_seqs,
        "enable_prefix_caching": config.enable_prefix_caching,
        "enable_sleep_mode": config.enable_sleep_mode,
        "seed": seed,
        "logprobs_mode": "processed_logprobs",
    }
    if dtype is not None:
        args["dtype"] = dtype
    job = distributed_rank() or ((0, 0, 1) if in_process else None)
    if job is not None:
        rank, local_rank, world = job
        if world % config.tensor_parallel_size:
            raise ValueError(
                f"vllm.tensor_parallel_size {config.tensor_parallel_size} must divide the world size {world}"
            )
        # TRL's colocate mode: the engine lives in this rank's process, one seed per TP group
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(world))
        from trl.trainer.utils import ensure_master_addr_port

        ensure_master_addr_port()
        args.update(
            distributed_executor_backend="external_launcher",
            max_num_batched_tokens=4096,
            seed=seed + rank // config.tensor_parallel_size,
        )
    args.update({k: v for k, v in task_args.items() if v is not None})
    args.update(config.extra)
    return {k: v for k, v in args.items() if v is not None}


def start_engine(model: str, config: VLLMEngineConfig, *, seeded: bool = False, **kwargs: Any):
    """A ``vllm.LLM`` on ``model`` sized by ``config`` (see :func:`engine_args`). ``seeded``: its
    requests carry their own seeds; vLLM's CPU build (0.30, 0.32) then needs whole prefills, as it
    cannot rewind a request's CPU generator after a chunked prefill step ("CPU Generator does not use
    offset"). With ``speculative_config`` on 0.30's CPU build, :mod:`leanloop.vllm_cpu_kernels` runs in
    each worker."""
    vllm = import_vllm()
    args = engine_args(model, config, **kwargs)
    if seeded and "enable_chunked_prefill" not in config.extra and _cpu_build():
        args["enable_chunked_prefill"] = False  # vLLM then batches at least max_model_len tokens per step
        if "max_num_batched_tokens" in args:
            args["max_num_batched_tokens"] = max(args["max_num_batched_tokens"], args.get("max_model_len") or 0)
    if args.get("speculative_config") and _cpu_build():
        from leanloop import vllm_cpu_kernels

        if vllm_cpu_kernels.needed():  # vLLM 0.30's CPU build: the drafts' verify kernels (see that module)
            args.setdefault("worker_extension_cls", f"{vllm_cpu_kernels.__name__}.CPUSamplerKernels")
    return vllm.LLM(**args)


def _cpu_build() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()
