"""Search throughput, or search against sampling with a synthetic policy."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from leanloop.tool import cli_entry, parse_config
from search.config import SearchConfig

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _trees() -> Path:
    from leanloop.paths import artifacts_root

    run = artifacts_root() / "search_data" / "default"
    if (run / "manifest.json").is_file():
        return run
    from search.build_data import main

    os.environ["LEANLOOP_ARTIFACTS"] = tempfile.mkdtemp(prefix="bench-search-")
    return main(["--config", "configs/search/data/default.yaml"])


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - wall, time.process_time() - cpu


# (p, q, dead-end rate): every reliability of the policy's candidates (p) and first choice (q),
# with and without dead ends
SETTINGS = tuple((p, q, dead) for dead in (0.0, 0.3) for p in (1.0, 0.6, 0.4) for q in (1.0, 0.5, 0.125))
REPEATS = (0.0, 0.5)  # share of wrong candidates from the goal's pool of automation tactics (0: none)
BUDGETS = (32, 128, 256)  # environment calls per theorem: 4, 16 and 32 expansions of 8 tactics


@dataclass
class BenchConfig:
    smoke: bool = False
    """A few seconds: tiny sizes (tests)."""
    policy: Literal["model", "noisy"] = "model"
    """model: throughput with the actor-critic; noisy: search vs sampling with the synthetic policy."""
    theorems: int | None = None
    """Held-out theorems (model: 16; noisy: all of the test split)."""
    train_theorems: int = 169
    """noisy: train theorems also reported (the tuning set)."""
    settings: list[tuple[float, float, float]] = field(default_factory=lambda: list(SETTINGS))
    """noisy: (p, q, dead-end rate) triples, e.g. ``--settings '[[0.4,0.5,0.3]]'``."""
    budgets: list[int] = field(default_factory=lambda: list(BUDGETS))
    """noisy: environment calls per theorem, e.g. ``--budgets '[32,256]'``."""
    repeats: list[float] = field(default_factory=lambda: list(REPEATS))
    """noisy: rates of wrong candidates drawn from the goal's own skewed pool of automation tactics
    (``search.synthetic.NoisyPolicy``; 0: every wrong candidate from all recorded tactics, the
    benchmark before repeats, drawn identically)."""
    search: SearchConfig = field(default_factory=SearchConfig)
    """noisy: the search measured (defaults: ``SearchConfig()``), e.g. ``--search.widening_c 2``."""
    seeds: int = 3
    """noisy: seeds averaged."""
    k: int = 8
    """noisy: candidates per goal."""
    budget: int = 4
    """model: search iterations per theorem."""
    samples: int = 4
    """model: tactics sampled per expansion."""
    max_new_tokens: int = 16
    """model: tokens per sampled tactic."""

    def __post_init__(self) -> None:
        if not self.smoke:
            return
        if self.policy == "noisy":
            self.theorems, self.train_theorems, self.seeds, self.budgets = 12, 0, 1, [32]
            self.settings, self.repeats = [(0.6, 1.0, 0.0), (0.4, 0.5, 0.3)], [0.0, 0.5]
        else:
            self.theorems, self.budget, self.samples, self.max_new_tokens = 4, 2, 2, 4


def noisy_table(
    replay,
    names: list[str],
    settings,
    budgets,
    seeds: int,
    k: int = 8,
    config: SearchConfig | None = None,
    repeats=(0.0,),
    on_row=None,
) -> list[dict]:
    """Solved counts (mean over seeds) of search and sampling per (p, q, rate, repeats, call budget);
    ``on_row`` is called with each row as it is done (a long grid shows its progress)."""
    from dataclasses import replace

    from search.evaluate import sample_without_search
    from search.mcts import SearchBatch, start_searches
    from search.synthetic import DeadEndEnv, NoisyPolicy

    base = config or SearchConfig()
    rows = []
    for repeat in repeats:
        for p, q, rate in settings:
            for budget in budgets:
                totals = {"search": 0, "sampling_fixed": 0, "sampling_equal": 0, "search_calls": 0}
                for seed in range(seeds):
                    env = DeadEndEnv(replay, rate, seed=seed)

                    def policy(stream: int) -> NoisyPolicy:  # one pool per goal and seed, a stream per side
                        return NoisyPolicy(env, p, q, k, seed=seed, repeats=repeat, stream=stream)

                    cfg = replace(base, simulations=budget)  # the call budget binds first
                    searches, _ = start_searches(names, env, cfg)
                    SearchBatch(searches, policy(seed), cfg).run(budget, calls=budget)
                    roots = [s.root.goal for s in searches]
                    fixed = sample_without_search(
                        policy(1000 + seed), env, roots, [budget] * len(roots), cfg.tactic_timeout
                    )
                    equal = sample_without_search(
                        policy(2000 + seed),
                        env,
                        roots,
                        [max(s.stats.env_calls, 1) for s in searches],
                        cfg.tactic_timeout,
                    )
                    totals["search"] += sum(s.solved for s in searches)
                    totals["sampling_fixed"] += sum(solved for solved, _ in fixed)
                    totals["sampling_equal"] += sum(solved for solved, _ in equal)
                    totals["search_calls"] += sum(s.stats.env_calls for s in searches) / max(len(searches), 1)
                rows.append(
                    {
                        "p": p,
                        "q": q,
                        "dead_end_rate": rate,
                        "repeats": repeat,
                        "budget": budget,
                        "theorems": len(names),
                        **{key: value / seeds for key, value in totals.items()},
                    }
                )
                if on_row:
                    on_row(rows[-1])
    return rows


def target_met(row: dict) -> bool:
    """The benchmark's target for one row: the search solves at least as many as sampling at the
    same fixed call budget."""
    return row["search"] >= row["sampling_fixed"]


def print_header(title: str) -> None:
    print(f"\n{title}")
    print(
        f"{'p':>5} {'q':>6} {'dead':>5} {'rep':>4} {'calls':>5} {'search':>8} {'sample@fixed':>13} "
        f"{'sample@equal':>13} {'calls/thm':>10} {'margin':>7} {'target':>7}"
    )


def print_row(r: dict) -> None:
    print(
        f"{r['p']:>5.2f} {r['q']:>6.3f} {r['dead_end_rate']:>5.2f} {r['repeats']:>4.2f} {r['budget']:>5} "
        f"{r['search']:>8.1f} {r['sampling_fixed']:>13.1f} {r['sampling_equal']:>13.1f} "
        f"{r['search_calls']:>10.1f} {r['search'] - r['sampling_fixed']:>+7.1f} "
        f"{'met' if target_met(r) else 'MISSED':>7}",
        flush=True,
    )


def noisy(args) -> int:
    import pandas as pd

    from search.env import ReplayEnv

    trees = _trees()
    replay = ReplayEnv.from_run(trees)
    held_out = sorted(pd.read_parquet(trees / "final" / "test.parquet")["name"])[: args.theorems]
    train = sorted(pd.read_parquet(trees / "final" / "train.parquet")["name"])[: args.train_theorems]
    config = args.search
    print(
        f"synthetic policy (k={args.k} candidates, constant critic) over {len(held_out)} held-out and "
        f"{len(train)} train theorems, {args.seeds} seed(s); budgets in environment calls per theorem; search: "
        f"{config.samples_per_expansion} tactics proposed per expansion, "
        f"{config.first_expansion_samples or config.samples_per_expansion} run at a goal's first expansion "
        f"(growth x{config.expansion_growth} per re-expansion), widening c "
        f"{config.widening_c} alpha {config.widening_alpha}, first-play urgency {config.first_play_urgency}, "
        f"dead-end decay {config.dead_end_decay}, candidate order {config.candidate_order}, edge prior {config.edge_prior}, "
        f"widening {config.widening}, evidence scope {config.evidence_scope} sharpness {config.evidence_sharpness}, "
        f"AND siblings {config.and_sibling}, proposals counted at {config.path_proposals}"
    )
    results = {}
    for title, names in (("train theorems (tuning)", train), ("held-out theorems", held_out)):
        if not names:
            continue
        print_header(title)
        results[title] = noisy_table(
            replay, names, args.settings, args.budgets, args.seeds, args.k, config, args.repeats, on_row=print_row
        )
    rows = results.get("held-out theorems", [])
    print(f"\nheld-out targets met: {sum(map(target_met, rows))}/{len(rows)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args, _ = parse_config(BenchConfig, argv, prog="python -m bench.search", description=__doc__.splitlines()[0])
    if args.policy == "noisy":
        return noisy(args)
    args.theorems = args.theorems or 16

    import pandas as pd
    import torch

    from leanloop.training.models import ModelSpec, load_model, load_tokenizer
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
    print(
        f"replay environment alone (oracle policy): {env.calls} calls, {env.calls / wall:,.0f} calls/s wall, "
        f"{env.calls / max(cpu, 1e-9):,.0f} calls/s CPU; solved {sum(s.solved for s in searches)}/{len(searches)}"
    )

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
    print(
        f"\n{'mode':<24} {'expansions':>10} {'env calls':>10} {'exp/s wall':>11} {'exp/s CPU':>10} "
        f"{'calls/s wall':>13} {'model share':>12}"
    )
    for label, expansions, calls, wall, cpu, share in rows:
        print(
            f"{label:<24} {expansions:>10} {calls:>10} {expansions / wall:>11.2f} {expansions / max(cpu, 1e-9):>10.2f} "
            f"{calls / wall:>13.1f} {share:>11.1%}"
        )
    (_, e1, _, w1, c1, _), (_, e2, _, w2, c2, _) = rows
    ratio_wall, ratio_cpu = (e2 / w2) / (e1 / w1), (e2 / max(c2, 1e-9)) / (e1 / max(c1, 1e-9))
    print(
        f"\nbatched vs one at a time: {ratio_wall:.2f}x expansions/s wall, {ratio_cpu:.2f}x CPU "
        f"(target >= 2x) -> {'met' if ratio_cpu >= 2 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(cli_entry(main, prog="python -m bench.search"))
