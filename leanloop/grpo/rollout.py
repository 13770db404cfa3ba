"""Rollouts: G sampled completions per prompt, as token ids (for the loss) and text (for the harness).

``TransformersRollout`` (default, CPU or GPU) calls ``model.generate`` on the prompts repeated G
times (group after group, as TRL lays them out), left padded. ``VLLMRollout`` (optional ``gpu``
extra) generates with TRL's own vLLM helper (``trl.generation.vllm_generation.VLLMGeneration``) in
its colocate or server mode and pushes the policy's current weights into the engine before each
step; it also returns vLLM's per-token sampling log-probabilities, for the update's
importance-sampling correction (:class:`leanloop.grpo.objective.GRPOConfig`).
The completion mask covers the tokens up to and including the first stop token, as TRL's does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Sequence

import torch

from leanloop.vllm_engine import VLLMEngineConfig


@dataclass
class VLLMRolloutConfig:
    """vLLM for GRPO rollouts, TRL's two modes (``GRPOConfig.vllm_mode``): ``colocate`` runs one
    engine inside every training rank on its GPU (the paper config); ``server`` sends the rollouts
    to a ``trl vllm-serve`` process on GPUs of its own and streams the weights to it over NCCL."""

    mode: Literal["colocate", "server"] = "colocate"
    engine: VLLMEngineConfig = field(default_factory=lambda: VLLMEngineConfig(gpu_memory_utilization=0.3))
    """colocate only (a server is sized on its own command line); 0.3 is TRL's colocate default."""
    server_base_url: str | None = None
    """server only, e.g. http://gpu-node-7:8000 (default: http://<server_host>:<server_port>)."""
    server_host: str = "0.0.0.0"
    server_port: int = 8000
    server_timeout: float = 240.0
    """seconds to wait for the server to come up."""
    group_port: int = 51216
    """port of the NCCL group that carries the weights to the server."""


@dataclass
class RolloutGenerationConfig:
    """How a policy's GRPO rollouts are sampled (rl, autoformalizer Stage 2, prm): engine, sampling
    parameters and length limits."""

    backend: Literal["transformers", "vllm"] = "transformers"
    """transformers (CPU or GPU) or vllm (optional ``gpu`` extra on CUDA; vLLM's CPU build on CPU)."""
    max_new_tokens: int = 256
    """Completion limit; a completion that reaches it is ``truncated`` (see grpo.mask_truncated_completions)."""
    min_new_tokens: int = 0
    """Force at least this many tokens (benchmarks use it to fix the completion length)."""
    temperature: float = 1.0
    """Sampling temperature; the loss's log-probabilities use the same one (TRL's convention)."""
    top_p: float = 1.0
    top_k: int = 0
    max_prompt_length: int | None = None
    """Statements whose prompt is longer are left out at data setup (counted), never truncated."""
    vllm: VLLMRolloutConfig = field(default_factory=lambda: VLLMRolloutConfig())
    """backend vllm only: colocate or server mode and the engine's size."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1 or self.temperature <= 0 or not 0 < self.top_p <= 1:
            raise ValueError("need max_new_tokens >= 1, temperature > 0 and 0 < top_p <= 1")
        if not 0 <= self.min_new_tokens <= self.max_new_tokens:
            raise ValueError("min_new_tokens must lie in [0, max_new_tokens]")


@dataclass
class Rollouts:
    """B*G rollouts, group after group (rows g*G .. g*G+G-1 share prompt g)."""

    prompt_ids: torch.Tensor  # [N, P] left padded
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor  # [N, C] right padded
    completion_mask: torch.Tensor  # 1 up to and including the first stop token
    texts: list[str]  # decoded completions, stop token excluded
    truncated: list[bool]  # reached max_new_tokens without a stop token
    num_generations: int
    pad_id: int = 0
    sampling_logps: torch.Tensor | None = None
    """[N, C] the sampler's log-probability of each completion token (vLLM's processed logprobs),
    NaN where it has none (a replayed completion); None when the trainer's own model sampled."""
    loss_mask: torch.Tensor | None = None
    """[N, C] the completion tokens the update trains on, where a completion interleaves forced text
    with sampled tokens (:func:`interleaved_rollouts`); None: all of ``completion_mask`` (TRL's)."""

    def __len__(self) -> int:
        return len(self.texts)

    def replace(self, row: int, completion_ids: Sequence[int], text: str) -> None:
        """Put a stored completion into row ``row`` (the replay buffer), right padded / cut to C."""
        width = self.completion_ids.shape[1]
        ids = list(completion_ids)[:width]
        self.completion_ids[row].fill_(self.pad_id)
        self.completion_ids[row, : len(ids)] = torch.tensor(ids, dtype=self.completion_ids.dtype)
        self.completion_mask[row].zero_()
        self.completion_mask[row, : len(ids)] = 1
        if self.loss_mask is not None:
            raise ValueError("a stored completion cannot replace an interleaved rollout (its loss mask is unknown)")
        self.texts[row] = text
        self.truncated[row] = False
        if self.sampling_logps is not None:  # not sampled now: no correction for this row
            self.sampling_logps[row].fill_(float("nan"))


def interleaved_rollouts(
    rows: Sequence[Any],
    trained: Sequence[Sequence[int]],
    texts: Sequence[str],
    num_generations: int,
    pad_id: int,
    device: Any = None,
) -> Rollouts:
    """Rollouts whose completions mix forced text with sampled tokens: ``rows[i]`` has ``ids`` (prompt
    then completion) and ``answer_start`` (where the completion starts), ``trained[i]`` the indices into
    the completion of its sampled tokens, the only ones the update trains on (``loss_mask``)."""
    prompts = [r.ids[: r.answer_start] for r in rows]
    completions = [r.ids[r.answer_start :] for r in rows]
    p_width, c_width = max(map(len, prompts)), max(map(len, completions))
    n = len(rows)
    prompt_ids = torch.full((n, p_width), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((n, p_width), dtype=torch.long)
    completion_ids = torch.full((n, c_width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, c_width), dtype=torch.long)
    loss_mask = torch.zeros((n, c_width), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompts, completions)):
        prompt_ids[i, p_width - len(p) :], prompt_mask[i, p_width - len(p) :] = torch.tensor(p), 1
        completion_ids[i, : len(c)], attention[i, : len(c)] = torch.tensor(c), 1
        loss_mask[i, list(trained[i])] = 1
    return Rollouts(
        prompt_ids.to(device),
        prompt_mask.to(device),
        completion_ids.to(device),
        attention.to(device),
        list(texts),
        [False] * n,
        num_generations,
        pad_id,
        loss_mask=loss_mask.to(device),
    )


def completion_mask(completion_ids: torch.Tensor, stop_ids: Sequence[int]) -> tuple[torch.Tensor, list[bool]]:
    """1 for tokens up to and including the first stop token; truncated = no stop token."""
    is_stop = torch.isin(completion_ids, torch.tensor(list(stop_ids), device=completion_ids.device))
    width = completion_ids.size(1)
    first = torch.full((completion_ids.size(0),), width, dtype=torch.long, device=completion_ids.device)
    has = is_stop.any(dim=1)
    first[has] = is_stop.int().argmax(dim=1)[has]
    positions = torch.arange(width, device=completion_ids.device).expand_as(completion_ids)
    return (positions <= first.unsqueeze(1)).long(), (~has).tolist()


class TransformersRollout:
    def __init__(self, tokenizer: Any, config: RolloutGenerationConfig, stop_tokens: Sequence[str]):
        self.tokenizer = tokenizer
        self.config = config
        ids = {tokenizer.convert_tokens_to_ids(t) for t in stop_tokens if t}
        self.stop_ids = sorted(i for i in ids if i is not None and i != tokenizer.unk_token_id)
        if not self.stop_ids:
            raise ValueError(f"none of the stop tokens {list(stop_tokens)} is in the vocabulary")
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_ids[0]

    def encode_prompts(
        self, prompts: Sequence[str] | Sequence[list[int]], repeat: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompts as text or as token ids, left padded, each repeated ``repeat`` times."""
        rows = [self.tokenizer(p, add_special_tokens=False)["input_ids"] if isinstance(p, str) else p for p in prompts]
        batch = self.tokenizer.pad({"input_ids": rows}, padding=True, padding_side="left", return_tensors="pt")
        return (
            batch["input_ids"].repeat_interleave(repeat, dim=0),
            batch["attention_mask"].repeat_interleave(repeat, dim=0),
        )

    @torch.no_grad()
    def generate(
        self, model: Any, prompts: Sequence[str] | Sequence[list[int]], num_generations: int, **generate_args: Any
    ) -> Rollouts:
        """``generate_args`` go to ``model.generate`` (e.g. a ``logits_processor`` constraining the
        answers to a grammar, as the prm stage's verifier does)."""
        c = self.config
        device = next(model.parameters()).device
        prompt_ids, prompt_mask = self.encode_prompts(prompts, num_generations)
        prompt_ids, prompt_mask = prompt_ids.to(device), prompt_mask.to(device)
        was_training = model.training
        model.eval()
        try:
            out = model.generate(
                input_ids=prompt_ids,
                attention_mask=prompt_mask,
                do_sample=True,
                temperature=c.temperature,
                top_p=c.top_p,
                top_k=c.top_k,
                max_new_tokens=c.max_new_tokens,
                min_new_tokens=c.min_new_tokens or None,
                eos_token_id=self.stop_ids,
                pad_token_id=self.pad_id,
                use_cache=True,
                **generate_args,
            )
        finally:
            model.train(was_training)
        completion_ids = out[:, prompt_ids.size(1) :]
        if completion_ids.size(1) == 0:  # cannot happen with max_new_tokens >= 1; keep shapes honest
            completion_ids = torch.full((out.size(0), 1), self.pad_id, dtype=out.dtype, device=out.device)
        mask, truncated = completion_mask(completion_ids, self.stop_ids)
        texts = self.decode(completion_ids, mask)
        return Rollouts(prompt_ids, prompt_mask, completion_ids, mask, texts, truncated, num_generations, self.pad_id)

    def decode(self, completion_ids: torch.Tensor, mask: torch.Tensor) -> list[str]:
        texts = []
        for ids, m in zip(completion_ids.tolist(), mask.tolist()):
            kept = [t for t, keep in zip(ids, m) if keep and t not in self.stop_ids]
            texts.append(self.tokenizer.decode(kept, skip_special_tokens=False))
        return texts


def trl_generation():
    """TRL's ``VLLMGeneration`` with its colocate engine started by :mod:`leanloop.vllm_engine` (the
    same keywords TRL passes -- ``external_launcher``, one seed per TP group, 4096 batched tokens,
    ``processed_logprobs``, bitsandbytes for an NF4 policy -- plus this project's engine fields such
    as prefix caching and ``extra``); server mode and everything else is TRL's, unchanged."""
    from trl.generation.vllm_generation import VLLMGeneration

    class Generation(VLLMGeneration):
        def __init__(self, *args: Any, engine: VLLMEngineConfig, **kwargs: Any):
            self.engine_config = engine
            super().__init__(*args, **kwargs)

        def _init_vllm(self) -> None:
            if self.mode != "colocate":
                return super()._init_vllm()
            from leanloop.vllm_engine import start_engine

            world, tp = self.accelerator.num_processes, self.tensor_parallel_size
            if world % tp:
                raise ValueError(f"vllm.engine.tensor_parallel_size ({tp}) must divide the world size ({world})")
            if tp > 1:
                self.tp_group, _ = torch.distributed.new_subgroups_by_enumeration(
                    [list(range(i * tp, (i + 1) * tp)) for i in range(world // tp)]
                )
            dtype = str(next(self.model.parameters()).dtype).removeprefix("torch.")
            path = getattr(self.model, "name_or_path", "") or ""
            if not (path and Path(path).is_dir()):  # a preset built from a config ('', and Path('') is '.')
                import tempfile

                self._scratch = tempfile.TemporaryDirectory(prefix="leanloop-vllm-policy-")  # removed with the run
                path = save_architecture(self.model, self.processing_class, self._scratch.name)
            self.llm = start_engine(
                path, self.engine_config, in_process=True, dtype=dtype, quantization=_vllm_quantization(self.model)
            )
            if self.enable_sleep_mode:
                self.llm.sleep(level=2)
            self._llm_weights_sleeping = self.enable_sleep_mode
            self.accelerator.wait_for_everyone()

        def sync_weights(self) -> None:
            """TRL's per-parameter ``load_weights`` where the engine's parameters hold its weights (CUDA);
            where the engine repacked them after loading (vLLM's CPU build empties each linear layer's
            parameter for a packed copy, so the loader has nowhere to write), vLLM's own in-place
            ``reload_weights`` on the same named parameters, which repacks every layer it loads."""
            if self.mode != "colocate" or not repacked(self._runner().model):
                return super().sync_weights()
            runner = self._runner()
            runner.reload_weights(weights_iterator=self._iter_named_params())
            head = getattr(runner.model, "lm_head", None)
            if getattr(runner.model_config.hf_text_config, "tie_word_embeddings", False) and head is not None:
                # a tied head gets no weight of its own in the reload, so its packed copy stays stale
                head.quant_method.process_weights_after_loading(head)
            self.llm.reset_prefix_cache()

        def _runner(self) -> Any:
            return self.llm.llm_engine.model_executor.driver_worker.model_runner

    return Generation


def repacked(engine_model: Any) -> bool:
    """Whether the engine moved its weights out of their parameters after loading (an emptied parameter)."""
    return any(p.numel() == 0 for p in engine_model.parameters())


def save_architecture(model: Any, tokenizer: Any, folder: str) -> str:
    """``folder`` holding the policy's config with fresh weights and the tokenizer, for vLLM to load a
    preset policy built from a config (the tiny debug models): the first sync replaces every weight."""
    from transformers import AutoModelForCausalLM

    config = (model.get_base_model() if hasattr(model, "get_base_model") else model).config
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _vllm_quantization(model: Any) -> str | None:
    """bitsandbytes for an NF4 (QLoRA) policy, as TRL decides it; 8-bit is refused (vLLM cannot)."""
    try:
        import bitsandbytes as bnb
    except ImportError:
        return None
    for module in model.modules():
        if isinstance(module, bnb.nn.Linear8bitLt):
            raise ValueError("vLLM does not support in-flight 8-bit quantization")
        if isinstance(module, bnb.nn.Linear4bit):
            return "bitsandbytes"
    return None


class LightningAccelerator:
    """What ``VLLMGeneration`` reads of an ``accelerate.Accelerator``, answered by a Lightning
    trainer: ranks, device, a barrier, and the sharding plugin (DeepSpeed ZeRO stage / FSDP version)
    that decides how parameters are gathered for the weight sync."""

    def __init__(self, trainer: Any, device: torch.device):
        from types import SimpleNamespace

        self.trainer = trainer
        self.device = device
        self.process_index = int(trainer.global_rank)
        self.local_process_index = int(trainer.local_rank)
        self.num_processes = int(trainer.world_size)
        self.is_main_process = self.process_index == 0
        strategy = trainer.strategy
        zero = getattr(strategy, "config", None)
        zero_stage = (zero or {}).get("zero_optimization", {}).get("stage", 0) if isinstance(zero, dict) else 0
        name = type(strategy).__name__
        fsdp_version = 1 if name == "FSDPStrategy" else 2 if name == "ModelParallelStrategy" else None
        self.state = SimpleNamespace(
            deepspeed_plugin=SimpleNamespace(zero_stage=zero_stage) if name == "DeepSpeedStrategy" else None,
            fsdp_plugin=SimpleNamespace(fsdp_version=fsdp_version) if fsdp_version else None,
        )

    def wait_for_everyone(self) -> None:
        if self.num_processes > 1:
            self.trainer.strategy.barrier()


class VLLMRollout(TransformersRollout):
    """Rollouts from TRL's ``VLLMGeneration``, given the policy (PEFT adapters are merged for each
    sync and unmerged after, ZeRO-3 / FSDP parameters gathered: TRL's ``_iter_named_params``), a
    :class:`LightningAccelerator` for the ranks, and the tokenizer. Its interface fits as is: it
    takes token-id prompts and returns token ids plus the sampled tokens' log-probabilities; this
    class only lays them out as :class:`Rollouts`. The engine starts at the first ``generate``
    (the trainer, hence the ranks, is known only then); the policy's weights are synced before
    the first call after every optimizer step, so rollouts are on-policy up to the engine's numerics."""

    def __init__(
        self, tokenizer: Any, config: RolloutGenerationConfig, stop_tokens: Sequence[str], trainer: Any | None = None
    ):
        super().__init__(tokenizer, config, stop_tokens)
        from leanloop.vllm_engine import import_vllm

        import_vllm()  # fail before any model is loaded when the optional extra is missing
        self.trainer = trainer
        self.engine = None
        self._synced_step: int | None = None  # the trainer's global step whose weights the engine holds

    def bind(self, trainer: Any) -> None:
        """The Lightning trainer whose ranks the engine follows (the rl stage calls this at fit start)."""
        self.trainer = trainer

    def _start(self, model: Any) -> Any:
        v, e = self.config.vllm, self.config.vllm.engine
        if self.trainer is None:
            raise RuntimeError("VLLMRollout.bind(trainer) must be called before the first generate")
        device = next(model.parameters()).device
        return trl_generation()(
            model,
            LightningAccelerator(self.trainer, device),
            self.tokenizer,
            mode=v.mode,
            server_base_url=v.server_base_url,
            server_host=v.server_host,
            server_port=v.server_port,
            server_timeout=v.server_timeout,
            group_port=v.group_port,
            tensor_parallel_size=e.tensor_parallel_size,
            gpu_memory_utilization=e.gpu_memory_utilization,
            max_model_length=e.max_model_len,
            max_num_seqs=e.max_num_seqs,
            enable_sleep_mode=e.enable_sleep_mode,
            logprobs=0,
            engine=e,
        )

    def _sampling(self, generation: Any) -> None:
        """This call's sampling settings (pass@k evaluation swaps ``self.config`` on a copy)."""
        c = self.config
        generation.temperature, generation.top_p, generation.top_k = c.temperature, c.top_p, c.top_k
        generation.max_completion_length = c.max_new_tokens
        generation.generation_kwargs = {
            "stop_token_ids": list(self.stop_ids),
            "min_tokens": c.min_new_tokens,
            "skip_special_tokens": False,
        }

    @torch.no_grad()
    def generate(self, model: Any, prompts: Sequence[str], num_generations: int) -> Rollouts:
        if self.engine is None:
            self.engine = self._start(model)
        self._sampling(self.engine)
        step = getattr(self.trainer, "global_step", None)
        if step is None or step != self._synced_step:  # TRL too syncs once per optimizer step, not per call
            self.engine.sync_weights()
            self._synced_step = step
        encoded = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        repeated = [ids for ids in encoded for _ in range(num_generations)]  # TRL's layout: group after group
        _, rows, logprobs, _ = self.engine.generate(repeated, None, num_generations)
        return self.layout(model, prompts, num_generations, rows, logprobs)

    def layout(
        self,
        model: Any,
        prompts: Sequence[str],
        num_generations: int,
        rows: Sequence[Sequence[int]],
        logprobs: Sequence[Sequence[Sequence[float | None]]] | None,
    ) -> Rollouts:
        """vLLM's completions (token ids, per-token ``[[logprob]]``) as right-padded :class:`Rollouts`."""
        device = next(model.parameters()).device
        prompt_ids, prompt_mask = self.encode_prompts(prompts, num_generations)
        rows = [list(r) for r in rows]
        width = max(1, max(len(r) for r in rows))
        completion_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        sampled = torch.full((len(rows), width), float("nan"))
        for i, r in enumerate(rows):
            completion_ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            if logprobs is not None:
                values = [float("nan") if t[0] is None else float(t[0]) for t in logprobs[i][: len(r)]]
                sampled[i, : len(values)] = torch.tensor(values)
        mask, truncated = completion_mask(completion_ids, self.stop_ids)
        for i, r in enumerate(rows):  # vLLM stops at the stop token; padding beyond must stay masked
            mask[i, len(r) :] = 0
        return Rollouts(
            prompt_ids.to(device),
            prompt_mask.to(device),
            completion_ids.to(device),
            mask.to(device),
            self.decode(completion_ids, mask),
            truncated,
            num_generations,
            self.pad_id,
            sampling_logps=sampled.to(device) if logprobs is not None else None,
        )
