"""``python -m search.build_data --config configs/search/data/default.yaml`` (``make search-data``):
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tqdm import tqdm

from leanloop.artifacts import FINAL, Manifest
from leanloop.corpus import SPLITS, VALID
from leanloop.jsonl import numbered_jsonl
from leanloop.lean.session import SessionConfig
from leanloop.paths import resolve_shared
from leanloop.tool import run_tool
from search.trees import TREE_SCHEMA_VERSION, build_tree


@dataclass
class SearchDataConfig:
    """Build proof trees from traced (state, tactic, state) steps."""

    RENAMED_KEYS: ClassVar[dict[str, str]] = {"lean": "repl"}

    steps: str | None = "shared://tactic_states/steps.derived.jsonl"
    """LeanDojo-traced steps: one JSON row per step (full_name, file_path, tactic_idx, tactic,
    state_before, state_after, url, commit, thm_start, thm_end)."""
    valid_fraction: float = 0.05
    test_fraction: float = 0.10
    """Theorems go to a split by a hash of (file, name): stable across runs and machines."""
    lean_files: list[str] = field(default_factory=list)
    """Lean files whose tactic proofs are re-executed with ``repl`` (the REPL in proof-state mode,
    ``search.extract``): those trees are ``verified: true``. Needs a Lean toolchain."""
    repl: SessionConfig = field(default_factory=SessionConfig)
    """The Lean REPL session that re-executes ``lean_files`` (toolchain / project, limits)."""
    lean_header: str = ""
    """Import lines the files' theorems need (e.g. ``import Mathlib``)."""
    run: str = "default"
    """Output: artifacts/search_data/<run>/."""


def theorem_split(file_path: str, name: str, valid: float, test: float) -> str:
    digest = hashlib.sha256(f"{file_path}\0{name}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64
    return "test" if point < test else VALID if point < test + valid else "train"


def read_steps(path: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    source = resolve_shared(path)
    if not source.is_file():
        raise FileNotFoundError(f"traced steps not found: {source} (config `steps`)")
    by_theorem: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for number, row in numbered_jsonl(source):  # a line that is not JSON: JsonlError naming file:line
        try:
            by_theorem[(row["file_path"], row["full_name"])].append(row)
        except (TypeError, KeyError) as error:
            raise ValueError(f"{source}:{number}: not a traced step ({error})") from error
    return by_theorem


def build(config: SearchDataConfig, out: Path) -> Manifest:
    import pandas as pd

    by_theorem = read_steps(config.steps) if config.steps else {}
    rows: list[dict[str, Any]] = []
    transitions: dict[tuple[str, str], dict[str, Any]] = {}
    drops: Counter = Counter()
    nested = 0
    for (file_path, name), steps in tqdm(sorted(by_theorem.items()), desc="trees", unit="theorem"):
        result = build_tree(steps)
        split = theorem_split(file_path, name, config.valid_fraction, config.test_fraction)
        nested += result.nested_steps
        for t in result.transitions:
            transitions.setdefault(
                t.key, {"state": t.state, "tactic": t.tactic, "result": list(t.result), "theorem": name, "split": split}
            )
        if result.tree is None:
            drops[result.drop.value] += 1
            continue
        first = steps[0]
        rows.append(
            {
                # App. H: one sample per Lean file; LeanDojo gives no imports / open namespaces and
                # positions as [line, column] (not char offsets), recorded as such
                "split": split,
                "file_path": file_path,
                "url": first.get("url"),
                "commit": first.get("commit"),
                "imports": None,
                "open_namespaces": None,
                "name": name,
                "start": list(first.get("thm_start") or []),
                "end": list(first.get("thm_end") or []),
                "tree": json.dumps(result.tree.to_dict(), ensure_ascii=False),
                "statement_goal": result.tree.state,
                "size": result.tree.size,
                "depth": result.tree.depth,
                "verified": False,
            }
        )
    if config.lean_files:
        rows += extract_lean_files(config, transitions, drops)
    frame = pd.DataFrame(rows)
    counts: dict[str, Any] = {
        "theorems": len(by_theorem),
        "trees": len(rows),
        "dropped": dict(drops),
        "nested_by_steps_skipped": nested,
        "transitions": len(transitions),
        "steps": sum(len(s) for s in by_theorem.values()),
    }
    final = out / FINAL  # the datasets are the run's outputs (the artifact contract's final/)
    final.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        part = frame[frame["split"] == split] if len(frame) else frame
        part.to_parquet(final / f"{split}.parquet", index=False)
        counts[f"trees_{split}"] = int(len(part))
        counts[f"steps_{split}"] = int(part["size"].sum()) if len(part) else 0
    pd.DataFrame(list(transitions.values())).to_parquet(final / "transitions.parquet", index=False)
    manifest = Manifest(
        stage="search_data",
        run=config.run,
        counts=counts,
        extra={
            "tree_schema_version": TREE_SCHEMA_VERSION,
            "verified": bool(config.lean_files) and not config.steps,
            "verified_note": _verified_note(counts["trees"], sum(bool(r["verified"]) for r in rows)),
            "files": {s: f"{FINAL}/{s}.parquet" for s in SPLITS} | {"transitions": f"{FINAL}/transitions.parquet"},
            "config": vars(config),
        },
    )
    if config.steps:
        manifest.add_input("steps", resolve_shared(config.steps))
    for index, path in enumerate(config.lean_files):
        manifest.add_input(f"lean_file_{index}", resolve_shared(path))
    print(
        f"[search-data] {len(rows)} trees of {len(by_theorem)} theorems "
        f"({', '.join(s + ' ' + str(counts['trees_' + s]) for s in SPLITS)}); dropped {dict(drops)}; "
        f"{len(transitions)} transitions -> {final}"
    )
    return manifest


def _verified_note(trees: int, verified: int) -> str:
    """Which trees Lean re-executed (per tree: the ``verified`` column)."""
    if verified == 0:
        return "trees rebuilt from traced steps without Lean; not re-executed"
    if verified == trees:
        return "trees re-executed in Lean's proof-state mode (lean_files)"
    return (
        f"{verified} of {trees} trees re-executed in Lean's proof-state mode (lean_files); the other "
        f"{trees - verified} rebuilt from traced steps without Lean, not re-executed (per tree: `verified`)"
    )


def extract_lean_files(config: SearchDataConfig, transitions: dict, drops: Counter) -> list[dict[str, Any]]:
    """Verified trees from Lean files (re-executed in proof-state mode)."""
    from search.extract import extract_file
    from search.repl_env import ReplEnv
    from search.trees import Transition

    env = ReplEnv(config.repl)
    rows = []
    try:
        for path in config.lean_files:
            source = resolve_shared(path)
            for item in tqdm(
                extract_file(env, source.read_text(encoding="utf-8"), config.lean_header),
                desc=source.name,
                unit="theorem",
            ):
                if item.tree is None:
                    drops["lean_extraction_failed"] += 1
                    continue
                split = theorem_split(str(path), item.name, config.valid_fraction, config.test_fraction)
                for node in item.tree.nodes():
                    if node.tactic is not None:
                        t = Transition(node.state, node.tactic, tuple(c.state for c in node.children))
                        transitions.setdefault(
                            t.key,
                            {
                                "state": t.state,
                                "tactic": t.tactic,
                                "result": list(t.result),
                                "theorem": item.name,
                                "split": split,
                            },
                        )
                rows.append(
                    {
                        "split": split,
                        "file_path": str(path),
                        "url": None,
                        "commit": None,
                        "imports": config.lean_header or None,
                        "open_namespaces": None,
                        "name": item.name,
                        "start": [],
                        "end": [],
                        "tree": json.dumps(item.tree.to_dict(), ensure_ascii=False),
                        "statement_goal": item.tree.state,
                        "size": item.tree.size,
                        "depth": item.tree.depth,
                        "verified": True,
                    }
                )
    finally:
        env.close()
    return rows


def main(argv: list[str] | None = None) -> Path:
    return run_tool(
        "search_data",
        SearchDataConfig,
        build,
        argv,
        prog="python -m search.build_data",
        description=__doc__.splitlines()[0],
    ).run_dir


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m search.build_data"))
