"""Sampling k attempts per prompt: transformers ``generate`` (default, CPU or GPU) or vLLM (the
optional ``gpu`` extra).

Every prompt is sampled with its own seed derived from (run seed, statement name), so a statement's
attempts are the same whichever shard, process or batch it lands in: this is what makes a sharded
run merge to the same file as an unsharded one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Sequence

if TYPE_CHECKING:
    from leanloop.vllm_engine import VLLMEngineConfig


@dataclass
class SamplingConfig:
    k: int = 8
    """Attempts per statement."""
    temperature: float = 1.0
    top_p: float = 0.95
    max_new_tokens: int = 32_768
    """Token limit per attempt; an attempt that reaches it is recorded with finish_reason 'length'."""
    seed: int = 0
    attempts_per_batch: int = 8
    """transformers: how many of a statement's k attempts are generated in one ``generate`` call."""

    def __post_init__(self) -> None:
        if self.k < 1 or self.attempts_per_batch < 1 or self.max_new_tokens < 1:
            raise ValueError("k, attempts_per_batch and max_new_tokens must be >= 1")
        if self.temperature <= 0 or not 0 < self.top_p <= 1:
            raise ValueError(
                f"need temperature > 0 and 0 < top_p <= 1 (got {self.temperature}, "
                f"{self.top_p}); greedy decoding gives k identical attempts"
            )

    def record(self) -> dict[str, Any]:
        """What each candidate row records about how it was sampled."""
        return {
            "k": self.k,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_new_tokens": self.max_new_tokens,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class Attempt:
    text: str
    finish_reason: Literal["stop", "length"]
    num_tokens: int


def statement_seed(seed: int, name: str, chunk: int = 0) -> int:
    digest = hashlib.sha256(f"{seed}\x00{name}\x00{chunk}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % (2**63 - 1)


class TransformersGenerator:
    """``model.generate`` with sampling; one statement at a time, its attempts batched."""

    def __init__(self, model: Any, tokenizer: Any, stop_tokens: Sequence[str]):
        import torch

        self.model, self.tokenizer, self.torch = model.eval(), tokenizer, torch
        self.stop_ids = sorted(
            {tokenizer.convert_tokens_to_ids(t) for t in stop_tokens if t is not None} - {None, tokenizer.unk_token_id}
        )
        if not self.stop_ids:
            raise ValueError(f"none of the stop tokens {list(stop_tokens)} is in the vocabulary")

    def sample(self, prompt: str, name: str, config: SamplingConfig) -> list[Attempt]:
        torch = self.torch
        device = next(self.model.parameters()).device
        ids = self.tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
        ids = ids.to(device)
        attempts: list[Attempt] = []
        for chunk, start in enumerate(range(0, config.k, config.attempts_per_batch)):
            n = min(config.attempts_per_batch, config.k - start)
            torch.manual_seed(statement_seed(config.seed, name, chunk))
            with torch.no_grad():
                out = self.model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    do_sample=True,
                    temperature=config.temperature,
                    top_p=config.top_p,
                    top_k=0,
                    max_new_tokens=config.max_new_tokens,
                    num_return_sequences=n,
                    eos_token_id=self.stop_ids,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            for row in out[:, ids.shape[1] :].tolist():
                stop = next((i for i, token in enumerate(row) if token in self.stop_ids), None)
                tokens = row if stop is None else row[:stop]
                attempts.append(
                    Attempt(
                        text=self.tokenizer.decode(tokens, skip_special_tokens=False),
                        finish_reason="stop" if stop is not None else "length",
                        num_tokens=len(tokens) + (stop is not None),
                    )
                )
        return attempts

    def sample_batch(self, prompts: Sequence[str], names: Sequence[str], config: SamplingConfig) -> list[list[Attempt]]:
        return [self.sample(prompt, name, config) for prompt, name in zip(prompts, names)]


class VLLMGenerator:
    """vLLM (GPU, or CPU with its CPU build); same seeds per statement, so shards merge deterministically here too."""

    def __init__(self, model_path: str, stop_tokens: Sequence[str], engine: VLLMEngineConfig, dtype: str = "bfloat16"):
        from leanloop.vllm_engine import import_vllm, start_engine

        self.vllm = import_vllm()
        self.llm = start_engine(model_path, engine, dtype=dtype, seeded=True)
        self.stop_tokens = [t for t in stop_tokens if t]

    def sample_batch(self, prompts: Sequence[str], names: Sequence[str], config: SamplingConfig) -> list[list[Attempt]]:
        params = [
            self.vllm.SamplingParams(
                n=config.k,
                temperature=config.temperature,
                top_p=config.top_p,
                max_tokens=config.max_new_tokens,
                seed=statement_seed(config.seed, name),
                stop=self.stop_tokens,
                skip_special_tokens=False,
            )
            for name in names
        ]
        results = self.llm.generate(list(prompts), params, use_tqdm=False)
        return [
            [
                Attempt(
                    text=o.text,
                    finish_reason="length" if o.finish_reason == "length" else "stop",
                    num_tokens=len(o.token_ids),
                )
                for o in result.outputs
            ]
            for result in results
        ]
