"""``python -m autoformalizer.evaluate_retrieval --config configs/autoformalizer/eval/default.yaml``:
System B's recall@k on the shipped statements (``make autoformalizer-retrieval``).

Problems: the miniF2F-test statements with an accepted Kimina-Prover proof; query: the informal
statement; targets: the Mathlib names (from the *full* index) that the accepted proof and the
reference statement use. A subset index can only find the targets it holds, so the output gives
``reachable`` (the share of targets in the configured index) beside ``recall@k``.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from autoformalizer.config import parse_config
from autoformalizer.mathlib_index import IndexConfig, MathlibIndex
from autoformalizer.retrieval import MathlibRetriever, RetrievalConfig, recall_at_k, recall_problems


def evaluate(config: RetrievalConfig) -> dict:
    full = MathlibIndex.load(IndexConfig(path=config.index.path))
    problems = recall_problems(full)
    started = time.perf_counter()
    retriever = MathlibRetriever.from_config(config)
    embed_s = time.perf_counter() - started
    retrieved = [[d.name for d in r] for r in retriever.retrieve_many([p.query for p in problems])]
    targets = [p.targets for p in problems]
    dense = [
        [retriever.index.declarations[i].name for i in row]
        for row in retriever.dense([p.query for p in problems], k=config.rerank_k)
    ]
    return {
        "problems": len(problems),
        "targets": int(sum(len(t) for t in targets)),
        "index_declarations": len(retriever.index),
        "embeddings_from_cache": retriever.from_cache,
        "embed_s": round(embed_s, 1),
        "reachable": float(np.mean([len(t & set(retriever.index.by_name)) / len(t) for t in targets])),
        f"recall@{config.rerank_k}": recall_at_k(retrieved, targets),
        f"dense_only_recall@{config.rerank_k}": recall_at_k(dense, targets),
        "chance": config.rerank_k / len(retriever.index),
    }


def main(argv: list[str] | None = None) -> int:
    config = parse_config(argv, prog="python -m autoformalizer.evaluate_retrieval")
    print(json.dumps(evaluate(config.retrieval), indent=2))
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m autoformalizer.evaluate_retrieval"))
