"""``python -m search.build_data --config configs/search_data/default.yaml`` (``make search-data``):
LeanTree-format proof trees from LeanDojo-traced steps, split by theorem, as parquet + manifest.

Without Lean the trees cannot be re-executed, so every tree is ``verified: false``; theorems whose
steps cannot be placed in a tree are counted by ``DropReason``. The recorded transitions (also those
of dropped theorems, up to where they failed) are written too: the replay environment answers them.
With a Lean backend, ``search.extract`` builds verified trees from Lean files instead.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from leanloop.artifacts import Manifest
from leanloop.paths import resolve_shared
from leanloop.tool import run_tool
from search.trees import TREE_SCHEMA_VERSION, build_tree

SPLITS = ("train", "validation", "test")


@dataclass
class SearchDataConfig:
    """Build proof trees from traced (state, tactic, state) steps."""

    steps: str = "shared://tactic_states/steps.derived.jsonl"
    """LeanDojo-traced steps: one JSON row per step (full_name, file_path, tactic_idx, tactic,
    state_before, state_after, url, commit, thm_start, thm_end)."""
    validation_fraction: float = 0.05
    test_fraction: float = 0.10
    """Theorems go to a split by a hash of (file, name): stable across runs and machines."""
    run: str = "default"
    """Output: artifacts/search_data/<run>/."""


def theorem_split(file_path: str, name: str, validation: float, test: float) -> str:
    digest = hashlib.sha256(f"{file_path}\0{name}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64
    return "test" if point < test else "validation" if point < test + validation else "train"


def read_steps(path: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    source = resolve_shared(path)
    if not source.is_file():
        raise FileNotFoundError(f"traced steps not found: {source} (config `steps`)")
    by_theorem: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    with open(source, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                by_theorem[(row["file_path"], row["full_name"])].append(row)
            except (ValueError, KeyError) as error:
                raise ValueError(f"{source}:{number}: not a traced step ({error})") from error
    return by_theorem


def build(config: SearchDataConfig, out: Path) -> Manifest:
    import pandas as pd

    by_theorem = read_steps(config.steps)
    rows: list[dict[str, Any]] = []
    transitions: dict[tuple[str, str], dict[str, Any]] = {}
    drops: Counter = Counter()
    nested = 0
    for (file_path, name), steps in tqdm(sorted(by_theorem.items()), desc="trees", unit="theorem"):
        result = build_tree(steps)
        split = theorem_split(file_path, name, config.validation_fraction, config.test_fraction)
        nested += result.nested_steps
        for t in result.transitions:
            transitions.setdefault(t.key, {"state": t.state, "tactic": t.tactic, "result": list(t.result),
                                           "theorem": name, "split": split})
        if result.tree is None:
            drops[result.drop.value] += 1
            continue
        first = steps[0]
        rows.append({
            # App. H: one sample per Lean file; LeanDojo gives no imports / open namespaces and
            # positions as [line, column] (not char offsets), recorded as such
            "split": split, "file_path": file_path, "url": first.get("url"), "commit": first.get("commit"),
            "imports": None, "open_namespaces": None, "name": name,
            "start": list(first.get("thm_start") or []), "end": list(first.get("thm_end") or []),
            "tree": json.dumps(result.tree.to_dict(), ensure_ascii=False),
            "statement_goal": result.tree.state, "size": result.tree.size, "depth": result.tree.depth,
            "verified": False,
        })
    frame = pd.DataFrame(rows)
    counts: dict[str, Any] = {"theorems": len(by_theorem), "trees": len(rows), "dropped": dict(drops),
                              "nested_by_steps_skipped": nested, "transitions": len(transitions),
                              "steps": sum(len(s) for s in by_theorem.values())}
    for split in SPLITS:
        part = frame[frame["split"] == split] if len(frame) else frame
        part.to_parquet(out / f"{split}.parquet", index=False)
        counts[f"trees_{split}"] = int(len(part))
        counts[f"steps_{split}"] = int(part["size"].sum()) if len(part) else 0
    pd.DataFrame(list(transitions.values())).to_parquet(out / "transitions.parquet", index=False)
    manifest = Manifest(stage="search_data", run=config.run, counts=counts, extra={
        "tree_schema_version": TREE_SCHEMA_VERSION, "verified": False,
        "verified_note": "trees rebuilt from traced steps without Lean; not re-executed",
        "files": {s: f"{s}.parquet" for s in SPLITS} | {"transitions": "transitions.parquet"},
        "config": vars(config),
    })
    manifest.add_input("steps", resolve_shared(config.steps))
    print(f"[search-data] {len(rows)} trees of {len(by_theorem)} theorems "
          f"({', '.join(s + ' ' + str(counts['trees_' + s]) for s in SPLITS)}); dropped {dict(drops)}; "
          f"{len(transitions)} transitions -> {out}")
    return manifest


def main(argv: list[str] | None = None) -> Path:
    return run_tool("search_data", SearchDataConfig, build, argv, prog="python -m search.build_data",
                    description=__doc__.splitlines()[0]).run_dir


if __name__ == "__main__":
    main()
