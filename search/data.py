"""Training data of the actor-critic: one example per tree edge (goal -> tactic, with the node's
distance to the proof's end as the value target), from ``make search-data`` trees and, for
self-improvement, from replay buffers of simplified found proofs; packed rows."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader

from leanloop.artifacts import resolve_run
from leanloop.corpus import VALID
from leanloop.jsonl import read_jsonl
from leanloop.paths import resolve_shared
from leanloop.training.models import ModelSpec, load_tokenizer
from leanloop.training.packing import PackedCollator, needs_flattening, pack_examples
from search.goals import node_text
from search.model import encode_step
from search.simplify import augment
from search.trees import TreeNode, tree_steps


def steps_of_split(run: Path, split: str) -> list[dict[str, Any]]:
    """(state, tactic, depth) of every edge of a split's trees."""
    import pandas as pd

    frame = pd.read_parquet(run / "final" / f"{split}.parquet", columns=["name", "tree"])
    rows = []
    for name, text in zip(frame["name"], frame["tree"]):
        for node, tactic in tree_steps(TreeNode.from_dict(json.loads(text))):
            rows.append(
                {"theorem": name, "state": node.state, "tactic": tactic, "depth": node.depth, "goals": node.goals}
            )
    return rows


class SearchData(L.LightningDataModule):
    def __init__(
        self,
        trees: str = "artifacts://search_data/default",
        replay_buffers: list[str] | None = None,
        replay_repeats: int = 1,
        augment_fraction: float = 0.0,
        max_length: int = 512,
        batch_size: int = 8,
        max_train_examples: int | None = None,
        max_val_examples: int | None = 256,
        seed: int = 0,
        num_workers: int = 0,
        base: ModelSpec | None = None,
    ) -> None:
        """``trees``: a ``make search-data`` run (its train split is the supervised data, its
        validation split the validation loss). ``replay_buffers``: JSONL files of found proofs'
        steps (``make search-expert-iteration`` writes them), each repeated ``replay_repeats`` times in the mix.
        ``augment_fraction``: share of extra training examples that are augmented copies (renamed /
        shuffled hypotheses, Section 3.5). ``max_length``: tokens per packed row (an edge longer
        than that is dropped and counted). ``base`` is linked from the model section."""
        super().__init__()
        self.trees = trees
        self.replay_buffers = list(replay_buffers or [])
        self.replay_repeats = replay_repeats
        self.augment_fraction = augment_fraction
        self.max_length = max_length
        self.batch_size = batch_size
        self.max_train_examples = max_train_examples
        self.max_val_examples = max_val_examples
        self.seed = seed
        self.num_workers = num_workers
        self.base = base or ModelSpec("qwen3-tiny")
        self.counts: dict[str, Any] = {}
        self.train_rows: list = []
        self.val_rows: list = []

    def _encode(self, tokenizer: Any, rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
        examples, too_long = [], 0
        for row in rows:
            example = encode_step(tokenizer, row["state"], row["tactic"], int(row["depth"]), self.max_length)
            if example is None:
                too_long += 1
            else:
                examples.append({"input_ids": example["input_ids"], "labels": example["labels"]})
        self.counts[f"{key}_examples"] = len(examples)
        self.counts[f"{key}_too_long"] = too_long
        return examples

    def setup(self, stage: str | None = None) -> None:
        if self.train_rows:
            return
        tokenizer = load_tokenizer(self.base)
        run = resolve_run(self.trees, "search_data")
        rng = random.Random(self.seed)
        train = steps_of_split(run, "train")
        rng.shuffle(train)
        if self.max_train_examples is not None:
            train = train[: self.max_train_examples]
        self.counts["supervised_steps"] = len(train)
        replay = []
        for path in self.replay_buffers:
            replay += [r for r in read_jsonl(resolve_shared(path))]
        self.counts["replay_steps"] = len(replay)
        augmented = []
        for row in rng.sample(train, int(self.augment_fraction * len(train))) if self.augment_fraction else []:
            goals, tactic = augment(row["goals"], row["tactic"], rng)
            augmented.append({**row, "state": node_text(goals), "tactic": tactic})
        self.counts["augmented_steps"] = len(augmented)
        rows = train + replay * self.replay_repeats + augmented
        rng.shuffle(rows)
        val = steps_of_split(run, VALID)[: self.max_val_examples]
        self.train_rows = pack_examples(self._encode(tokenizer, rows, "train"), self.max_length)
        self.val_rows = pack_examples(self._encode(tokenizer, val, "val"), self.max_length)
        self.tokenizer = tokenizer
        self.inputs = {
            "trees": run,
            **{f"replay_buffer_{i}": resolve_shared(p) for i, p in enumerate(self.replay_buffers)},
        }

    def _loader(self, rows: list, shuffle: bool) -> DataLoader:
        collator = PackedCollator(self.tokenizer.eos_token_id, flatten=needs_flattening(self.base.attn_implementation))
        return DataLoader(
            rows, batch_size=self.batch_size, shuffle=shuffle, collate_fn=collator, num_workers=self.num_workers
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_rows, True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_rows, False)

    def manifest_inputs(self) -> dict[str, Path]:
        return dict(getattr(self, "inputs", {}))

    def manifest_counts(self) -> dict[str, Any]:
        return dict(self.counts)
