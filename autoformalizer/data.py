"""The autoformalizer's data: informal/formal statement pairs, theorem-disjoint splits, and the
LightningDataModules of Stage 1 (SFT) and Stage 2 (GRPO).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import lightning as L
from torch.utils.data import DataLoader

from autoformalizer.config import PairSource, PairsConfig, PolicyConfig  # noqa: F401 (PairSource: readers of this module)
from autoformalizer.prompts import formalize_prompt
from autoformalizer.statements import canonicalize, find_declaration, well_formed
from leanloop.jsonl import numbered_jsonl
from leanloop.paths import resolve_shared
from leanloop.training.packing import TooLongError, collator_for, completion_example, pack_examples
from leanloop.training.resume import StepStream

END_OF_TURN = "<|im_end|>"  # the chat turn's end: what the policy learns to stop on
_DOC_MARKERS = re.compile(r"^\s*/-[-!]?\s*|\s*-/\s*$", re.S)
_HEADER = re.compile(r"\A(?:[ \t]*(?:import|open|set_option)\b[^\n]*\n|[ \t]*\n)+")


@dataclass
class Pair:
    name: str
    informal: str
    formal: str  # theorem ... := by sorry
    header: str | None
    split: str  # train / val / test
    source: str
    goal: str | None = None  # the reference's elaborated goal, when the source has it

    @property
    def prompt(self) -> str:
        return formalize_prompt(self.informal)


def clean_informal(text: str) -> str:
    """The informal statement as prose: Lean doc-comment markers removed, and the proof that some
    ProofNet copies append (``\\begin{proof} ... \\end{proof}``) cut off."""
    text = text.split("\\begin{proof}")[0]
    return _DOC_MARKERS.sub("", text.strip()).strip()


def formal_target(text: str) -> str | None:
    """``theorem NAME BINDERS : TYPE := by sorry`` from a source's formal text (its first theorem, as
    written, up to the top-level ``:=``); None when the text has no theorem declaration."""
    decl = find_declaration(text)
    if decl is None:
        return None
    end = len(text) - len(decl.body) - 2 if decl.body is not None else len(text)
    return text[decl.start : end].rstrip() + " := by sorry"


def header_of(text: str) -> str | None:
    """The leading import/open/set_option lines of a formal text, if it starts with any."""
    match = _HEADER.match(text)
    return match.group(0) if match and "import" in match.group(0) else None


def _in_val(name: str, fraction: float) -> bool:
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def _rows(path: Path) -> Iterator[tuple[int, dict]]:
    return numbered_jsonl(path)


def load_pairs(config: PairsConfig) -> tuple[dict[str, list[Pair]], Counter]:
    """``{"train": [...], "val": [...], "test": [...]}`` and the counts of what was dropped and why."""
    counts: Counter = Counter()
    seen: dict[str, str] = {}
    pairs: dict[str, list[Pair]] = {"train": [], "val": [], "test": []}
    for source in config.sources:
        path = resolve_shared(source.path)
        if not path.is_file():
            raise FileNotFoundError(f"pair source {source.path} not found at {path}")
        label = path.name
        for number, row in _rows(path):
            counts[f"{label}:read"] += 1
            name, informal, formal = (
                row.get(source.name_field),
                row.get(source.informal_field),
                row.get(source.formal_field),
            )
            if not isinstance(name, str) or not isinstance(formal, str):
                raise ValueError(
                    f"{path}:{number}: needs text fields `{source.name_field}` and "
                    f"`{source.formal_field}` (set name_field / formal_field of this source)"
                )
            informal = clean_informal(informal) if isinstance(informal, str) else ""
            if not informal:
                counts[f"{label}:no_informal"] += 1
                continue
            target = formal_target(formal)
            if target is None or not well_formed(target).ok:
                counts[f"{label}:target_not_well_formed"] += 1  # e.g. ProofNet's `def`/`instance` exercises
                continue
            if name in seen:
                counts[f"{label}:duplicate_of:{seen[name]}"] += 1
                continue
            upstream = str(row.get(source.split_field)) if source.split_field else "train"
            if upstream in config.test_splits:
                split = "test"
            elif upstream in config.train_splits:
                split = "val" if _in_val(name, config.val_fraction) else "train"
            else:
                counts[f"{label}:other_split:{upstream}"] += 1
                continue
            seen[name] = label
            header = row.get(source.header_field) if source.header_field else None
            header = header if isinstance(header, str) and header.strip() else header_of(formal)
            goal = row.get(source.goal_field) if source.goal_field else None
            pairs[split].append(
                Pair(
                    name,
                    informal,
                    target,
                    header,
                    split,
                    label,
                    goal if isinstance(goal, str) and goal.strip() else None,
                )
            )
    test_statements = {canonicalize(p.formal) for p in pairs["test"]}
    for split in ("train", "val"):
        kept = [p for p in pairs[split] if canonicalize(p.formal) not in test_statements]
        counts[f"{split}_same_statement_as_test"] += len(pairs[split]) - len(kept)
        pairs[split] = kept
    if config.max_train_pairs is not None and len(pairs["train"]) > config.max_train_pairs:
        counts["train_over_max_train_pairs"] += len(pairs["train"]) - config.max_train_pairs
        pairs["train"] = random.Random(config.seed).sample(pairs["train"], config.max_train_pairs)
    for split, items in pairs.items():
        counts[f"{split}_pairs"] = len(items)
    return pairs, Counter({k: v for k, v in counts.items() if v})


def theorem_names(pairs: dict[str, list[Pair]], split: str) -> list[str]:
    return sorted(p.name for p in pairs[split])


def sft_example(tokenizer: Any, pair: Pair, max_length: int | None) -> dict:
    """Chat prompt (fixed system prompt + informal statement) -> the formal statement and the end
    of turn; labels -100 on the prompt. Over-long pairs raise :class:`TooLongError`."""
    return completion_example(tokenizer, pair.prompt, pair.formal + END_OF_TURN, max_length, add_eos=False)


class AutoformalizerSFTData(L.LightningDataModule):
    def __init__(
        self,
        pairs: PairsConfig | None = None,
        max_length: int = 1024,
        packing: bool = True,
        batch_size: int = 2,
        max_examples: int | None = None,
        num_workers: int = 0,
        seed: int = 0,
        policy: Any = None,
    ) -> None:
        """``pairs``: the sources and the theorem-disjoint splits (train -> SFT, val -> validation loss;
        test is left for evaluation). ``max_length``: the cap on prompt + target tokens (the paper:
        1,024; longer pairs are counted and dropped) and the packed row length. ``packing``: several
        pairs per row (exact: each attends only to itself) or one per row. ``batch_size``: rows per
        micro-batch. ``max_examples``: cap per split (debug runs). ``policy`` is linked from
        ``model.policy`` so the tokenizer is the policy's."""
        super().__init__()
        self.pairs_config = pairs or PairsConfig()
        self.max_length = max_length
        self.packing = packing
        self.batch_size = batch_size
        self.max_examples = max_examples
        self.num_workers = num_workers
        self.seed = seed
        self.policy = policy
        self.counts: dict[str, Any] = {}
        self.train_rows: list = []
        self.val_rows: list = []

    def _tokenizer(self):
        from autoformalizer.policy import load_policy_tokenizer

        return load_policy_tokenizer(self.policy or PolicyConfig())

    def examples(self, pairs: list[Pair], counts: Counter, prefix: str) -> list[dict]:
        out = []
        for index, pair in enumerate(pairs):
            if self.max_examples is not None and len(out) >= self.max_examples:
                counts[f"{prefix}_over_max_examples"] += len(pairs) - index
                break
            try:
                out.append({**sft_example(self.tokenizer, pair, self.max_length), "name": pair.name})
            except TooLongError:
                counts[f"{prefix}_too_long"] += 1
        return out

    def setup(self, stage: str | None = None) -> None:
        if self.train_rows:
            return
        self.tokenizer = self._tokenizer()
        pairs, counts = load_pairs(self.pairs_config)
        train = self.examples(pairs["train"], counts, "train")
        val = self.examples(pairs["val"], counts, "val")
        if not train:
            raise ValueError(f"no SFT examples: {dict(counts)} (check data.pairs and data.max_length)")
        self.train_rows = self._rows(train)
        self.val_rows = self._rows(val) if val else []
        tokens = sum(len(e["input_ids"]) for e in train)
        self.counts = {
            **dict(counts),
            "train_examples": len(train),
            "val_examples": len(val),
            "train_tokens": tokens,
            "train_target_tokens": sum(sum(x != -100 for x in e["labels"]) for e in train),
            "train_rows": len(self.train_rows),
            "val_rows": len(self.val_rows),
            "train_row_fill": round(tokens / (len(self.train_rows) * self.max_length), 4),
            "train_theorems": sorted({e["name"] for e in train}),
            "test_theorems": theorem_names(pairs, "test"),
        }

    def _rows(self, examples: list[dict]) -> list:
        plain = [{"input_ids": e["input_ids"], "labels": e["labels"]} for e in examples]
        rows = pack_examples(plain, self.max_length) if self.packing else [[e] for e in plain]
        random.Random(self.seed).shuffle(rows)  # best-fit order puts all long rows first
        return rows

    def _loader(self, rows: list, shuffle: bool) -> DataLoader:
        return DataLoader(
            rows,
            batch_size=self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            collate_fn=collator_for(self.tokenizer),
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_rows, shuffle=True)

    def val_dataloader(self) -> DataLoader | list:
        return self._loader(self.val_rows, shuffle=False) if self.val_rows else []

    def manifest_inputs(self) -> dict[str, Path]:
        return {f"pairs:{s.path}": resolve_shared(s.path) for s in self.pairs_config.sources}

    def manifest_counts(self) -> dict[str, Any]:
        return self.counts


class ProblemStream(StepStream):
    """Endless per-step lists of train pairs: a seeded shuffle, epoch after epoch (``max_steps``
    ends training); a resumed run continues it."""

    def __init__(self, pairs: list[Pair], per_step: int, seed: int):
        self.pairs, self.per_step, self.seed = pairs, per_step, seed

    def items(self) -> Iterator[list[Pair]]:
        rng = random.Random(self.seed)
        order: list[Pair] = []
        while True:
            while len(order) < self.per_step:
                epoch = list(self.pairs)
                rng.shuffle(epoch)
                order += epoch
            yield order[: self.per_step]
            order = order[self.per_step :]


class AutoformalizerGRPOData(L.LightningDataModule):
    def __init__(self, pairs: PairsConfig | None = None, problems_per_step: int = 1, seed: int = 0) -> None:
        """``pairs``: as in Stage 1 (GRPO draws its problems from the train split; the reference
        statements give faithfulness); ``problems_per_step``: informal statements per GRPO step, each
        sampled G times."""
        super().__init__()
        if problems_per_step < 1:
            raise ValueError(f"problems_per_step must be >= 1, got {problems_per_step}")
        self.pairs_config = pairs or PairsConfig()
        self.problems_per_step = problems_per_step
        self.seed = seed
        self.problems: list[Pair] = []
        self.counts: dict[str, Any] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.problems:
            return
        pairs, counts = load_pairs(self.pairs_config)
        self.problems = pairs["train"]
        if not self.problems:
            raise ValueError(f"no GRPO problems in the train split: {dict(counts)}")
        self.counts = {
            **dict(counts),
            "train_theorems": theorem_names(pairs, "train"),
            "test_theorems": theorem_names(pairs, "test"),
        }

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        return batch  # a list of pairs (text); the module puts rollouts on the device it generates on

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            ProblemStream(self.problems, self.problems_per_step, self.seed),
            batch_size=None,
            collate_fn=lambda problems: problems,
            num_workers=0,
        )

    def manifest_inputs(self) -> dict[str, Path]:
        return {f"pairs:{s.path}": resolve_shared(s.path) for s in self.pairs_config.sources}

    def manifest_counts(self) -> dict[str, Any]:
        return self.counts
