"""``python -m bench.search [--smoke]`` (``make bench-search``): search throughput against the
replay environment.

1. Environment alone: replay ``apply`` calls per second (the oracle policy, no model).
2. The search with the actor-critic (a randomly initialised tiny Qwen3, real vocabulary; its
   tactics are mostly unrecorded, which costs the same environment call as a recorded one):
   expansions/s and environment calls/s, the share of time in the model vs the environment,
   one search at a time vs N searches advanced together (one model call per round for all their
   leaves). Target: batched >= 2x expansions/s. Wall and CPU time both reported (CPU time is robust
   to other load on a shared machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _trees() -> Path:
    from leanloop.paths import artifacts_root

    run = artifacts_root() / "search_data" / "default"
    if (run / "manifest.json").is_file():
        return run
    from search.build_data import main

    os.environ["LEANLOOP_ARTIFACTS"] = tempfile.mkdtemp(prefix="bench-search-")
    return main(["--config", "configs/search_data/default.yaml"])


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few seconds: tiny sizes (tests)")
    parser.add_argument("--theorems", type=int, default=16)
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--max_new_tokens", type=int, default=16)
    args = parser.parse_args(argv)
    if args.smoke:
        args.theorems, args.budget, args.samples, args.max_new_tokens = 4, 2, 2, 4

    import pandas as pd
    import torch

    from leanloop.training.models import ModelSpec, load_model, load_tokenizer
    from search.config import SearchConfig
    from search.env import ReplayEnv
    from search.mcts import SearchBatch, start_searches
    from search.model import ModelPolicy
    from search.policy import OraclePolicy

    torch.set_num_threads(1)
    trees = _trees()
    env = ReplayEnv.from_run(trees)
    names = list(pd.read_parquet(trees / "final" / "test.parquet")["name"][: args.theorems])
    config = SearchConfig(simulations=args.budget, samples_per_expansion=args.samples)

    env.calls = 0
    searches, _ = start_searches(names, env, SearchConfig(simulations=200))
    _, wall, cpu = _timed(lambda: SearchBatch(searches, OraclePolicy(env), SearchConfig(simulations=200)).run())
    print(f"replay environment alone (oracle policy): {env.calls} calls, {env.calls / wall:,.0f} calls/s wall, "
          f"{env.calls / max(cpu, 1e-9):,.0f} calls/s CPU; solved {sum(s.solved for s in searches)}/{len(searches)}")

    spec = ModelSpec("qwen3-tiny")
    tokenizer = load_tokenizer(spec)
    torch.manual_seed(0)
    policy = ModelPolicy(load_model(spec, tokenizer=tokenizer), tokenizer, max_new_tokens=args.max_new_tokens)
    policy.propose(["⊢ True"], 1)  # warm-up

    def one_at_a_time():
        searches, _ = start_searches(names, env, config)
        for search in searches:
            SearchBatch([search], policy, config).run()
        return searches

    def together():
        searches, _ = start_searches(names, env, config)
        SearchBatch(searches, policy, config).run()
        return searches

    rows = []
    for label, fn in (("one search at a time", one_at_a_time), (f"{len(names)} searches batched", together)):
        searches, wall, cpu = _timed(fn)
        expansions = sum(s.stats.expansions for s in searches)
        calls = sum(s.stats.env_calls for s in searches)
        model_s = sum(s.stats.model_s for s in searches)
        env_s = sum(s.stats.env_s for s in searches)
        rows.append((label, expansions, calls, wall, cpu, model_s / max(model_s + env_s, 1e-9)))
    print(f"\n{'mode':<24} {'expansions':>10} {'env calls':>10} {'exp/s wall':>11} {'exp/s CPU':>10} "
          f"{'calls/s wall':>13} {'model share':>12}")
    for label, expansions, calls, wall, cpu, share in rows:
        print(f"{label:<24} {expansions:>10} {calls:>10} {expansions / wall:>11.2f} {expansions / max(cpu, 1e-9):>10.2f} "
              f"{calls / wall:>13.1f} {share:>11.1%}")
    (_, e1, _, w1, c1, _), (_, e2, _, w2, c2, _) = rows
    ratio_wall, ratio_cpu = (e2 / w2) / (e1 / w1), (e2 / max(c2, 1e-9)) / (e1 / max(c1, 1e-9))
    print(f"\nbatched vs one at a time: {ratio_wall:.2f}x expansions/s wall, {ratio_cpu:.2f}x CPU "
          f"(target >= 2x) -> {'met' if ratio_cpu >= 2 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
