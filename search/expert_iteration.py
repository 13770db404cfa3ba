"""``python -m search.expert_iteration --config configs/search/expert_iteration/default.yaml``
(``make search-expert-iteration``): expert iteration, the self-improvement loop (NanoProof Section 3.4).

Each round: search on a sample of training theorems with the current model (replay environment
without Lean), simplify every found proof (Section 3.5: only simplified proofs enter the buffer),
add its steps (goal, tactic, distance to the end) to the replay buffer, then train the next model
on the buffer mixed with the supervised tree steps, starting from the current model. Every round is
a search-stage training run (``artifacts/search/<run>-round<k>/``) whose manifest names the round
before it as its base model and the buffers it read, so the chain is recorded end to end; this
tool's own manifest (``artifacts/search_expert_iteration/<run>/``) lists the rounds and their search
results.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from tqdm import tqdm

from leanloop.artifacts import ARTIFACTS_SCHEME, Manifest, resolve_model, resolve_run
from leanloop.jsonl import append_jsonl, write_jsonl
from leanloop.lean.session import SessionConfig
from leanloop.tool import run_tool
from search.config import SearchConfig
from search.env import ProofEnv, ReplayEnv
from search.mcts import SearchBatch, start_searches
from search.simplify import SimplifyStats, simplify
from search.trees import tree_steps


@dataclass
class ExpertIterationConfig:
    """Self-improvement: search -> simplified proofs -> replay buffer -> train, for some rounds."""

    RENAMED_KEYS: ClassVar[dict[str, str]] = {"lean": "repl"}

    model: str = "artifacts://search/default"
    """The model of round 0 (a search-stage run)."""
    trees: str = "artifacts://search_data/default"
    rounds: int = 2
    theorems_per_round: int = 32
    """Training theorems searched per round (a fresh random sample each round)."""
    budget: int = 8
    statements: str | None = None
    """A statement set to search with Lean (``environment: repl``) instead of the trees' training
    theorems: NanoProof's RL runs on "96,967 NuminaMath-LEAN theorems" (its parquet shards: a folder)."""
    environment: Literal["replay", "repl"] = "replay"
    """``replay``: the trees' recorded transitions (no Lean); ``repl``: lean-interact on this machine."""
    repl: SessionConfig = field(default_factory=SessionConfig)
    """``repl``: the Lean REPL session (tactics get ``search.tactic_timeout``)."""
    search: SearchConfig = field(default_factory=SearchConfig)
    parallel: int = 16
    max_new_tokens: int = 32
    train_config: str = "configs/search/expert_iteration_round.yaml"
    """The search-stage training config of each round (its model.base and replay buffers are set here)."""
    train_args: list[str] = field(default_factory=list)
    """Extra overrides for each round's training run (``["--trainer.max_steps", "20"]``)."""
    threads: int | None = 1
    seed: int = 0
    run: str = "default"

    def __post_init__(self) -> None:
        if self.environment == "repl" and not self.statements:
            raise ValueError("environment repl searches `statements`: name a statement set")


def proof_steps(tree) -> list[dict[str, Any]]:
    return [{"state": node.state, "tactic": tactic, "depth": node.depth} for node, tactic in tree_steps(tree)]


def rl_statements(config: ExpertIterationConfig) -> list[str]:
    """The roots Lean searches from: header + statement of every readable row of ``statements``."""
    from leanloop.prover.statements import read_statements

    return [s.header + s.statement for s in read_statements(config.statements).statements]


ROUNDS_FILE = "rounds.jsonl"
"""The loop's progress: its config, then per round a row when its training starts and one when the
round is done (a rerun continues from it)."""


def finished_rounds(config: ExpertIterationConfig, out: Path) -> tuple[list[dict[str, Any]], bool]:
    """``(rounds, started)`` of an unfinished loop of this same config in ``out``: the rounds it
    finished before it was killed (each with its training run finished), and whether it had started
    the next round's training (that run is this loop's to resume). A fresh start (``--overwrite
    true``, another config, nothing there) continues nothing."""
    from leanloop.jsonl import read_appended

    path = out / ROUNDS_FILE
    rows = read_appended(path)[0] if path.is_file() and not getattr(config, "overwrite", False) else []
    if not rows or rows[0] != {"config": _comparable(config)}:
        return [], False
    done: list[dict[str, Any]] = []
    started = False
    for row in rows[1:]:
        k = len(done) + 1
        if row == {"started": k}:
            started = True
            continue
        if row.get("round") != k or not (out / f"replay_round{k}.jsonl").is_file() or not _finished(row["trained"]):
            break
        done.append(row)
        started = False
    return done, started


def _progress(out: Path, row: dict[str, Any]) -> None:
    with open(out / ROUNDS_FILE, "a", encoding="utf-8") as handle:
        append_jsonl(handle, row)


def _finished(ref: str) -> bool:
    """A round's training run is there, finished and sound."""
    from leanloop.artifacts import ArtifactNotFoundError, ManifestError

    try:
        resolve_run(ref, "search")
    except (ArtifactNotFoundError, ManifestError, FileNotFoundError):
        return False
    return True


def _comparable(config: ExpertIterationConfig) -> dict[str, Any]:
    """The config as the progress file records it (plain JSON types)."""
    return json.loads(json.dumps(asdict(config), default=str))


def self_improve(config: ExpertIterationConfig, out: Path) -> Manifest:
    import pandas as pd

    from leanloop.training.module import set_torch_threads
    from search.model import ModelPolicy
    from search.train import run as train_round

    set_torch_threads(config.threads)
    trees_run = resolve_run(config.trees, "search_data")
    if config.environment == "repl":
        from search.repl_env import ReplEnv

        env: ProofEnv = ReplEnv(config.repl)
        names = rl_statements(config)  # the program texts a live Lean session elaborates
    else:
        env = ReplayEnv.from_run(trees_run)
        names = sorted(pd.read_parquet(trees_run / "final" / "train.parquet", columns=["name"])["name"])
    rng = random.Random(config.seed)
    current = config.model
    buffers: list[str] = []
    rounds: list[dict[str, Any]] = []
    manifest = Manifest(stage="search_expert_iteration", run=config.run, seed=config.seed)
    manifest.add_input("trees", trees_run)
    manifest.add_input("model_round_0", resolve_model(current).parent)
    done, started = finished_rounds(config, out)
    kept = [{"config": _comparable(config)}, *done] + ([{"started": len(done) + 1}] if started else [])
    write_jsonl(out / ROUNDS_FILE, kept)  # a torn or stale tail goes
    for round_index in range(1, config.rounds + 1):
        sample = rng.sample(names, min(config.theorems_per_round, len(names)))  # drawn in every round, kept or not
        if round_index <= len(done):
            row = done[round_index - 1]
            buffers.append(str(out / f"replay_round{round_index}.jsonl"))
            rounds.append(row)
            manifest.add_input(f"model_round_{round_index}", resolve_run(row["trained"], "search"))
            print(f"[search-expert-iteration] round {round_index}: finished before the restart ({row['trained']})")
            current = row["trained"]
            continue
        policy = ModelPolicy.from_pretrained(
            str(resolve_model(current)),
            max_new_tokens=config.max_new_tokens,
            first_token_cap=config.search.first_token_cap,
            seed=config.seed + round_index,
        )
        searches, failed = start_searches(sample, env, config.search)
        for start in tqdm(range(0, len(searches), config.parallel), desc=f"round {round_index} search", unit="batch"):
            SearchBatch(searches[start : start + config.parallel], policy, config.search).run(config.budget)
        stats = SimplifyStats()
        steps: list[dict[str, Any]] = []
        for search in searches:
            if search.solved:
                simple = simplify(search.proof(), env, stats, live={k: n.goal for k, n in search.table.items()})
                steps += [{**step, "theorem": search.name, "round": round_index} for step in proof_steps(simple)]
        buffer = out / f"replay_round{round_index}.jsonl"
        write_jsonl(buffer, steps)
        buffers.append(str(buffer))
        run_name = f"{config.run}-round{round_index}"
        # the round a rerun continues resumes its training run (or keeps it, finished) if this loop
        # had started it; any other run of this name is another loop's and starts over
        resume = started and round_index == len(done) + 1
        if not resume:
            _progress(out, {"started": round_index})
        result = train_round(
            [
                "--config",
                config.train_config,
                "--model.base.name",
                current,
                "--data.trees",
                config.trees,
                "--data.replay_buffers",
                json.dumps(buffers),
                "--run",
                run_name,
                *([] if resume else ["--overwrite", "true"]),
                *config.train_args,
            ]
        )
        rounds.append(
            {
                "round": round_index,
                "searched": len(searches),
                "not_started": len(failed),
                "solved": sum(s.solved for s in searches),
                "replay_steps": len(steps),
                "simplified": stats.simplified,
                "edges_removed": stats.edges_removed,
                "cycles": sum(s.stats.cycles for s in searches),
                "model": current,
                "trained": f"{ARTIFACTS_SCHEME}search/{run_name}",
            }
        )
        manifest.add_input(f"model_round_{round_index}", result.run_dir)
        _progress(out, rounds[-1])
        print(
            f"[search-expert-iteration] round {round_index}: solved {rounds[-1]['solved']}/{len(searches)}, "
            f"{len(steps)} replay steps -> {result.run_dir}"
        )
        current = f"{ARTIFACTS_SCHEME}search/{run_name}"
    manifest.counts = {"rounds": len(rounds), "replay_steps": sum(r["replay_steps"] for r in rounds)}
    manifest.metrics = {"rounds": rounds, "final_model": current}
    return manifest


def main(argv: list[str] | None = None):
    return run_tool(
        "search_expert_iteration",
        ExpertIterationConfig,
        self_improve,
        argv,
        prog="python -m search.expert_iteration",
        description=__doc__.splitlines()[0],
    )


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m search.expert_iteration"))
