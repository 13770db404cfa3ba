"""Rollouts: G sampled completions per prompt, as token ids (for the loss) and text (for the harness).

``TransformersRollout`` (default, CPU or GPU) calls ``model.generate`` on the prompts repeated G
times (group after group, as TRL lays them out), left padded. ``VLLMRollout`` (optional ``gpu``
extra) generates with vLLM and loads the policy's current weights into it before each step.
The completion mask covers the tokens up to and including the first stop token, as TRL's does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import torch


@dataclass
class GenerationConfig:
    backend: Literal["transformers", "vllm"] = "transformers"
    """transformers (CPU or GPU) or vllm (GPU, optional ``gpu`` extra: pip install -e '.[gpu]')."""
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
    vllm_args: dict[str, Any] = field(default_factory=dict)
    """Extra ``vllm.LLM`` arguments (gpu_memory_utilization, tensor_parallel_size, ...)."""

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

    def __len__(self) -> int:
        return len(self.texts)

    def replace(self, row: int, completion_ids: Sequence[int], text: str) -> None:
        """Put a stored completion into row ``row`` (the replay buffer), right padded / cut to C."""
        width = self.completion_ids.shape[1]
        ids = list(completion_ids)[:width]
        self.completion_ids[row].fill_(self.pad_id)
        self.completion_ids[row, :len(ids)] = torch.tensor(ids, dtype=self.completion_ids.dtype)
        self.completion_mask[row].zero_()
        self.completion_mask[row, :len(ids)] = 1
        self.texts[row] = text
        self.truncated[row] = False


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
    def __init__(self, tokenizer: Any, config: GenerationConfig, stop_tokens: Sequence[str]):
        self.tokenizer = tokenizer
        self.config = config
        ids = {tokenizer.convert_tokens_to_ids(t) for t in stop_tokens if t}
        self.stop_ids = sorted(i for i in ids if i is not None and i != tokenizer.unk_token_id)
        if not self.stop_ids:
            raise ValueError(f"none of the stop tokens {list(stop_tokens)} is in the vocabulary")
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_ids[0]

    def encode_prompts(self, prompts: Sequence[str], repeat: int) -> tuple[torch.Tensor, torch.Tensor]:
        batch = self.tokenizer(list(prompts), add_special_tokens=False, padding=True, padding_side="left",
                               return_tensors="pt")
        return (batch["input_ids"].repeat_interleave(repeat, dim=0),
                batch["attention_mask"].repeat_interleave(repeat, dim=0))

    @torch.no_grad()
    def generate(self, model: Any, prompts: Sequence[str], num_generations: int, **generate_args: Any) -> Rollouts:
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
                input_ids=prompt_ids, attention_mask=prompt_mask, do_sample=True, temperature=c.temperature,
                top_p=c.top_p, top_k=c.top_k, max_new_tokens=c.max_new_tokens, min_new_tokens=c.min_new_tokens or None,
                eos_token_id=self.stop_ids, pad_token_id=self.pad_id, use_cache=True, **generate_args,
            )
        finally:
            model.train(was_training)
        completion_ids = out[:, prompt_ids.size(1):]
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


class VLLMRollout(TransformersRollout):
    """vLLM on GPU (colocated with training). Before each step the policy's weights (LoRA merged)
    are loaded into the engine, so rollouts are on-policy."""

    def __init__(self, tokenizer: Any, config: GenerationConfig, stop_tokens: Sequence[str], model_path: str,
                 dtype: str = "bfloat16"):
        super().__init__(tokenizer, config, stop_tokens)
        try:
            import vllm
        except ImportError as error:
            raise ImportError("generation.backend: vllm needs the optional GPU extra (pip install -e '.[gpu]' on a "
                              "CUDA machine); use generation.backend: transformers otherwise") from error
        self.vllm = vllm
        self.llm = vllm.LLM(model=model_path, dtype=dtype, **config.vllm_args)

    def sync_weights(self, model: Any) -> None:
        merged = hasattr(model, "merge_adapter")
        if merged:
            model.merge_adapter()
        try:
            state = model.get_base_model().state_dict() if merged else model.state_dict()
            runner = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
            prefix = "base_model.model."
            runner.load_weights((k.removeprefix(prefix).replace(".base_layer", ""), v) for k, v in state.items()
                                if "lora_" not in k)
        finally:
            if merged:
                model.unmerge_adapter()

    @torch.no_grad()
    def generate(self, model: Any, prompts: Sequence[str], num_generations: int) -> Rollouts:
        c = self.config
        self.sync_weights(model)
        params = self.vllm.SamplingParams(n=1, temperature=c.temperature, top_p=c.top_p, top_k=c.top_k or -1,
                                          max_tokens=c.max_new_tokens, min_tokens=c.min_new_tokens,
                                          stop_token_ids=self.stop_ids, skip_special_tokens=False)
        repeated = [p for p in prompts for _ in range(num_generations)]
        outputs = self.llm.generate(repeated, params, use_tqdm=False)
        device = next(model.parameters()).device
        prompt_ids, prompt_mask = self.encode_prompts(prompts, num_generations)
        rows = [list(o.outputs[0].token_ids) for o in outputs]
        width = max(1, max(len(r) for r in rows))
        completion_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        for i, r in enumerate(rows):
            completion_ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
        mask, truncated = completion_mask(completion_ids, self.stop_ids)
        for i, r in enumerate(rows):  # vLLM stops at the stop token; padding beyond must stay masked
            mask[i, len(r):] = 0
        return Rollouts(prompt_ids.to(device), prompt_mask.to(device), completion_ids.to(device), mask.to(device),
                        self.decode(completion_ids, mask), truncated, num_generations, self.pad_id)
