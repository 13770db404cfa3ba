"""Trace generation: prompt token ids in, generated traces out, with the output limit made explicit."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence

import torch

from feedback_model.config import TraceGenerationConfig
from leanloop.training.packing import pad_token_id


@dataclass(frozen=True)
class GeneratedTrace:
    text: str  # the generated annotated program, end-of-text token removed
    finished: bool  # the model ended it (end-of-text token)
    truncated: bool  # it reached max_new_tokens without ending: invalid (output-limit rule)
    new_tokens: int
    time_s: float

    @property
    def stopped(self) -> bool:
        """Cut by the deadline before it finished or reached the limit."""
        return not self.finished and not self.truncated


class TraceGenerator(Protocol):
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        samples: int = 1,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seeds: Sequence[Sequence[int]] | None = None,
        deadline: float | None = None,
    ) -> list[list[GeneratedTrace] | None]:
        """Per prompt: ``samples`` traces (greedy when ``temperature == 0``), or None if not started
        before ``deadline`` (``time.monotonic()`` clock). ``seeds[i][j]`` seeds sample j of prompt i."""
        ...


def prompt_lookup_kwargs(config: TraceGenerationConfig) -> dict[str, int]:
    """transformers ``generate`` arguments that turn prompt-lookup drafting on (empty: off)."""
    if config.draft_tokens <= 0:
        return {}
    return {"prompt_lookup_num_tokens": config.draft_tokens, "max_matching_ngram_size": config.ngram_size}


def sample_seeds(program: str, samples: int, seed: int) -> list[int]:
    """Per-sample seeds from the program text: a program gets the same samples in any batch."""
    digest = hashlib.sha256(f"{seed}\0{program}".encode()).digest()
    base = int.from_bytes(digest[:6], "big")
    return [(base + j * 1_000_003) % 2**48 for j in range(samples)]


def split_completion(new_ids: Sequence[int], eos_id: int | None, max_new_tokens: int) -> tuple[list[int], bool, bool]:
    """(trace ids without the end-of-text token, finished, truncated) of one generated sequence.
    Ending exactly at the limit with the end-of-text token is finished, not truncated."""
    ids = list(new_ids)
    if eos_id is not None and eos_id in ids:
        return ids[: ids.index(eos_id)], True, False
    return ids, False, len(ids) >= max_new_tokens


class HFTraceGenerator:
    """transformers ``generate`` on a loaded causal LM."""

    def __init__(self, model: Any, tokenizer: Any, config: TraceGenerationConfig) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.config = config
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = pad_token_id(tokenizer)
        if self.eos_id is None:
            raise ValueError("the feedback model's tokenizer has no end-of-text token: traces could never finish")
        self.device = next(model.parameters()).device

    @classmethod
    def load(cls, final_dir: str | Path, tokenizer: Any, config: TraceGenerationConfig) -> "HFTraceGenerator":
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(final_dir), dtype=getattr(torch, config.dtype))
        return cls(model.to(config.device), tokenizer, config)

    @property
    def context_length(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    @torch.inference_mode()
    def _run(
        self,
        prompt: Sequence[int],
        temperature: float,
        top_p: float,
        num: int,
        seed: int | None,
        deadline: float | None,
    ) -> list[GeneratedTrace]:
        config = self.config
        input_ids = torch.tensor([list(prompt)], dtype=torch.long, device=self.device)
        kwargs: dict[str, Any] = dict(
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=config.max_new_tokens,
            eos_token_id=self.eos_id,
            pad_token_id=self.pad_id,
            num_return_sequences=num,
        )
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=temperature, top_p=top_p, top_k=0)
        else:
            kwargs.update(do_sample=False)
        if num == 1:  # prompt lookup needs batch size 1 and one sequence
            kwargs.update(prompt_lookup_kwargs(config))
        if deadline is not None:
            kwargs["max_time"] = max(deadline - time.monotonic(), 1e-3)
        began = time.perf_counter()
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            if seed is not None:
                torch.manual_seed(seed)
            output = self.model.generate(input_ids, **kwargs)
        elapsed = (time.perf_counter() - began) / num
        traces = []
        for row in output[:, input_ids.shape[1] :].tolist():
            ids, finished, truncated = split_completion(row, self.eos_id, config.max_new_tokens)
            traces.append(GeneratedTrace(self._decode(ids), finished, truncated, len(ids) + finished, elapsed))
        return traces

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        samples: int = 1,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seeds: Sequence[Sequence[int]] | None = None,
        deadline: float | None = None,
    ) -> list[list[GeneratedTrace] | None]:
        if samples > 1 and temperature <= 0:
            raise ValueError("several samples of one prompt need temperature > 0 (greedy gives one trace)")
        results: list[list[GeneratedTrace] | None] = []
        # Several samples of a prompt go in one batched call (num_return_sequences: k rows per
        # forward, the prompt encoded once). Prompt lookup verifies one sequence at a time, and k
        # drafted runs cost far more: sampled tokens stray from the copied span, so drafts are
        # rejected more often, and each verification pays the output layer for every drafted
        # position (5 samples on the embedded default: 4.5x the CPU time of one batched call).
        batched = samples > 1
        for index, prompt in enumerate(prompts):
            if deadline is not None and time.monotonic() >= deadline:
                results.append(None)
                continue
            prompt_seeds = list(seeds[index]) if seeds is not None else [None] * samples
            if batched:
                traces = self._run(prompt, temperature, top_p, samples, prompt_seeds[0], deadline)
            else:
                traces = []
                for j in range(samples):
                    traces += self._run(prompt, temperature, top_p, 1, prompt_seeds[j], deadline)
            results.append(traces)
        return results
