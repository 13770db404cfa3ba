"""``python -m search.evaluate --config configs/search/eval/default.yaml`` (``make search-eval``):
pass@k of the search at a budget of iterations, against sampling tactics without search.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch
from tqdm import tqdm

from leanloop.artifacts import Manifest, resolve_model, resolve_run
from leanloop.jsonl import write_jsonl
from leanloop.paths import resolve_shared
from leanloop.lean.check import LeanConfig
from leanloop.lean.session import SessionConfig
from leanloop.tool import run_tool
from search.config import SearchConfig
from search.env import EnvGoal, ProofEnv, ReplayEnv
from search.http_env import HttpEnvConfig
from search.mcts import Search, SearchBatch, start_searches
from search.program import FoundProof, verify_found
from search.recorded import REPL_SOURCES
from search.simplify import SimplifyStats, simplify


@dataclass
class SearchEvalConfig:
    """Evaluate the actor-critic search (pass@k at a budget) against sampling without search."""

    RENAMED_KEYS: ClassVar[dict[str, str]] = {
        "verifier": "lean.backend",
        "verifier_profile": "lean.profile",
        # the REPL session was ``lean:``; its ``timeout`` now names the whole-program checks' own
        **{
            f"lean.{f.name}": f"repl.{f.name}"
            for f in fields(SessionConfig)
            if f.name not in {g.name for g in fields(LeanConfig)}
        },
    }

    model: str = "artifacts://search/default"
    """A search-stage run (or any HF causal LM folder)."""
    trees: str = "artifacts://search_data/default"
    """Replay environment: the search-data run whose recorded transitions answer, and whose
    ``split`` theorems are searched."""
    environment: Literal["replay", "recorded", "repl", "http"] = "replay"
    """``repl`` (lean-interact on this machine, options ``repl``) or ``http`` (a pool started with
    ``python -m search.http_env``, options ``http``) search ``statements`` with Lean instead;
    ``recorded`` searches the replayable theorems of ``recordings`` (no Lean)."""
    recordings: list[str] = field(default_factory=lambda: list(REPL_SOURCES))
    """``recorded``: REPL recordings (aliases or paths, as the replay backend takes them) whose accepted
    programs carry the goals before each tactic."""
    statements: str | None = None
    """With Lean: a statement JSONL (``shared://statements/minif2f_goedel_prover_v2_repaired.jsonl``);
    found proofs are then checked as whole programs against these trusted statements."""
    statement_splits: list[str] = field(default_factory=list)
    repl: SessionConfig = field(default_factory=SessionConfig)
    """``repl``: the Lean REPL session (toolchain / project, ``timeout`` for elaborating a statement,
    memory limits, crash retries); tactics get ``search.tactic_timeout``."""
    http: HttpEnvConfig = field(default_factory=HttpEnvConfig)
    split: str = "test"
    limit: int | None = None
    """Evaluate the first N theorems of the split (by name order); None: all."""
    attempts: int = 1
    """k of pass@k: independent searches per theorem (different sampling seeds)."""
    budgets: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    """Iteration budgets reported (the search runs to the largest)."""
    search: SearchConfig = field(default_factory=SearchConfig)
    parallel: int = 8
    """Searches advanced together (one model call for all their leaves per round)."""
    max_new_tokens: int = 48
    baseline: bool = True
    baseline_calls: int | None = None
    """The no-search baseline's fixed environment calls per theorem (None: max(budgets) x
    search.samples_per_expansion)."""
    lean: LeanConfig = field(default_factory=lambda: LeanConfig(profile="rl"))
    """How found proofs are checked as whole programs. Under the ``rl`` profile the harness adds
    lines that no recording holds, so on replay a clean recorded program is ``unavailable``
    (``no_trailer_reply``); ``collection`` compiles the program verbatim, so a recorded verdict answers it."""
    policy: Literal["model", "oracle"] = "model"
    """``oracle``: the tactics recorded at each goal (``replay`` / ``recorded`` only; ``model`` is
    unused): what the environment can confirm, and the verification path exercised without a
    trained model."""
    threads: int | None = 1
    """torch intra-op threads: 1 suits a tiny model on a shared CPU (more threads spin against each
    other: measured 100x slower forwards under load); raise it for a real model."""
    seed: int = 0
    run: str = "default"


@dataclass
class _Rollout:
    root: EnvGoal
    calls: int
    used: int = 0
    stack: list = field(default_factory=list)
    solved: bool = False

    @property
    def active(self) -> bool:
        return not self.solved and self.used < self.calls


def sample_without_search(
    policy: Any, env: ProofEnv, roots: list[EnvGoal], calls: list[int], timeout: float
) -> list[tuple[bool, int]]:
    """Depth-first rollouts: one sampled tactic per open goal; a failed tactic restarts from the
    root; a theorem is solved when a rollout closes every goal within its ``calls`` environment
    calls. All theorems advance together: one model call per round for all their current goals."""
    rollouts = [_Rollout(root, budget, stack=[root]) for root, budget in zip(roots, calls)]
    while True:
        active = [r for r in rollouts if r.active]
        if not active:
            return [(r.solved, r.used) for r in rollouts]
        goals = [r.stack.pop() for r in active]
        proposals = policy.propose([g.text for g in goals], 1)
        items = [(g, p.tactics[0][0]) for g, p in zip(goals, proposals) if p.tactics]
        results = iter(env.apply_many(items, timeout) if items else [])
        for rollout, goal, proposal in zip(active, goals, proposals):
            result = next(results) if proposal.tactics else None
            rollout.used += 1
            if result is None or not result.ok:
                rollout.stack = [rollout.root]  # restart
                continue
            rollout.stack.extend(reversed(result.goals))
            if not rollout.stack:
                rollout.solved = True


def evaluate(config: SearchEvalConfig, out: Path) -> tuple[Manifest, dict[str, Any]]:
    import pandas as pd

    torch.manual_seed(config.seed)
    if config.policy == "oracle" and config.environment not in ("replay", "recorded"):
        raise SystemExit(
            f"search-eval: policy 'oracle' proposes recorded tactics; environment "
            f"{config.environment!r} has none (use replay or recorded)"
        )
    model_dir = None
    if config.policy == "model":  # the oracle runs no model: no threads to set, no Lightning to import
        from leanloop.training.module import set_torch_threads
        from search.model import ModelPolicy

        set_torch_threads(config.threads)
        model_dir = resolve_model(config.model)
    trees_run = None
    statements: dict[str, Any] = {}  # theorem text started in the environment -> its Statement
    if config.environment == "replay":
        trees_run = resolve_run(config.trees, "search_data")
        env: ProofEnv = ReplayEnv.from_run(trees_run)
        frame = pd.read_parquet(trees_run / "final" / f"{config.split}.parquet").sort_values("name")
        if config.limit is not None:
            frame = frame.head(config.limit)
        names = list(frame["name"])
    elif config.environment == "recorded":
        env, names, statements = _recorded_environment(config)
    else:
        env, names, statements = _lean_environment(config)
    budget = max(config.budgets)
    rows: list[dict[str, Any]] = []
    simplify_stats = SimplifyStats()
    found: list[FoundProof] = []
    for attempt in range(config.attempts):
        if model_dir is None:
            from search.policy import OraclePolicy

            policy: Any = OraclePolicy(env)  # type: ignore[arg-type]
        else:
            policy = ModelPolicy.from_pretrained(
                str(model_dir),
                max_new_tokens=config.max_new_tokens,
                first_token_cap=config.search.first_token_cap,
                seed=config.seed + attempt,
            )
        searches, failed = start_searches(names, env, config.search)
        for name, why in failed.items():
            shown = statements[name].name if name in statements else name
            rows.append({"theorem": shown, "attempt": attempt, "started": False, "why": why})
        progress = tqdm(total=len(searches), desc=f"search attempt {attempt + 1}/{config.attempts}", unit="theorem")
        for start in range(0, len(searches), config.parallel):
            chunk = searches[start : start + config.parallel]
            SearchBatch(chunk, policy, config.search).run(budget)
            chunk_rows = [
                _row(search, attempt, env, simplify_stats, found, statements.get(search.name)) for search in chunk
            ]
            if config.baseline:  # the same model, no search: a fixed call budget, and the search's own calls
                fixed = config.baseline_calls or budget * config.search.samples_per_expansion
                roots = [s.root.goal for s in chunk]
                outcomes = sample_without_search(policy, env, roots, [fixed] * len(chunk), config.search.tactic_timeout)
                equal = sample_without_search(
                    policy, env, roots, [max(s.stats.env_calls, 1) for s in chunk], config.search.tactic_timeout
                )
                for row, (solved, used), (solved_eq, used_eq) in zip(chunk_rows, outcomes, equal):
                    row.update(
                        baseline_solved=solved,
                        baseline_env_calls=used,
                        baseline_solved_equal_calls=solved_eq,
                        baseline_env_calls_equal=used_eq,
                    )
            rows += chunk_rows
            progress.update(len(chunk))
        progress.close()
    verifier = config.lean.verifier()
    outcomes = verify_found(verifier, found)
    for proof, outcome in zip(found, outcomes):
        for row in rows:
            if row.get("theorem") == proof.name and row.get("proof") is not None and "verdict" not in row:
                row["verdict"] = outcome.category.value
                row["verdict_reason"] = outcome.reasons[0] if outcome.reasons else ""
                break
    oracle_solved = None
    if isinstance(env, ReplayEnv):  # the ceiling of this environment: the recorded tactics, same budget
        from search.policy import OraclePolicy

        reference, _ = start_searches(names, env, config.search)
        SearchBatch(reference, OraclePolicy(env), config.search).run(budget)
        oracle_solved = sum(s.solved for s in reference)
    env.close()
    write_jsonl(out / "results.jsonl", rows)
    metrics = summarize(rows, config, simplify_stats)
    metrics["oracle_solved"] = oracle_solved
    report_path = write_report(out, metrics, config)
    environment = {
        "replay": "replay of recorded LeanDojo steps (no Lean)",
        "recorded": f"replay of recorded REPL replies (no Lean): {', '.join(config.recordings)}",
    }.get(config.environment, f"Lean ({config.environment}) on {config.statements}")
    manifest = Manifest(
        stage="search_eval",
        run=config.run,
        seed=config.seed,
        counts={"theorems": len(names)},
        metrics=metrics,
        extra={"environment": environment, "report": report_path.name},
    )
    if trees_run is not None:
        manifest.add_input("trees", trees_run)
    if config.statements:
        manifest.add_input("statements", resolve_shared(config.statements))
    if config.environment == "recorded":
        from leanloop.lean.recordings import resolve_source

        for source in config.recordings:
            manifest.add_input(f"recordings:{source}", resolve_source(source))
    if model_dir is not None:
        manifest.add_input("model", model_dir.parent if (model_dir.parent / "manifest.json").is_file() else model_dir)
    print(
        f"[search-eval] solved {metrics['solved']}/{metrics['theorems']} at budget {budget} "
        f"(no search: {metrics.get('baseline_solved')}) -> {report_path}"
    )
    return manifest, metrics


def _lean_environment(config: SearchEvalConfig) -> tuple[ProofEnv, list[str], dict[str, Any]]:
    from leanloop.prover.statements import read_statements

    if not config.statements:
        raise SystemExit(f"search-eval: environment {config.environment!r} needs `statements` (a statement JSONL)")
    chosen = read_statements(config.statements).select(splits=config.statement_splits or None, limit=config.limit)
    by_text = {s.header + s.statement: s for s in chosen.statements}
    if config.environment == "repl":
        from search.repl_env import ReplEnv

        env: ProofEnv = ReplEnv(config.repl)
    else:
        from search.http_env import HttpEnv

        env = HttpEnv(config.http)
    return env, list(by_text), by_text


def _recorded_environment(config: SearchEvalConfig) -> tuple[ProofEnv, list[str], dict[str, Any]]:
    from search.recorded import recorded_env, recorded_problems

    problems, _ = recorded_problems(config.recordings)
    problems = sorted(problems, key=lambda p: p.statement.name)[: config.limit]
    if not problems:
        raise SystemExit(f"search-eval: no replayable theorem in the recordings {config.recordings}")
    return (
        recorded_env(problems),
        [p.statement.name for p in problems],
        {p.statement.name: p.statement for p in problems},
    )


def _row(
    search: Search,
    attempt: int,
    env: ProofEnv,
    simplify_stats: SimplifyStats,
    found: list[FoundProof],
    statement: Any = None,
) -> dict[str, Any]:
    stats = search.stats
    row: dict[str, Any] = {
        "theorem": statement.name if statement else search.name,
        "attempt": attempt,
        "started": True,
        "solved": search.solved,
        **asdict(stats),
        "proof": None,
    }
    if search.solved:
        proof = search.proof()
        simple = simplify(proof, env, simplify_stats, live={k: n.goal for k, n in search.table.items()})
        row.update(
            proof=simple.to_dict(), proof_depth=simple.depth, proof_size_before=proof.size, proof_size=simple.size
        )
        if statement is not None:  # a trusted statement: the proof is checked as a whole program
            found.append(
                FoundProof(
                    statement.name,
                    simple,
                    statement.statement,
                    statement.header,
                    statement.context,
                    theorem=statement.theorem,
                )
            )
        else:  # traced steps: no statement text
            found.append(FoundProof(search.name, simple))
    return row


def summarize(rows: list[dict[str, Any]], config: SearchEvalConfig, simplify_stats: SimplifyStats) -> dict[str, Any]:
    started = [r for r in rows if r.get("started")]
    theorems = sorted({r["theorem"] for r in rows})
    by_theorem: dict[str, list[dict]] = {}
    for r in started:
        by_theorem.setdefault(r["theorem"], []).append(r)
    closed_rows = [r for r in started if r["solved"]]
    # only the whole program's verdict proves a theorem, except on traced steps: no program to check
    solved_rows = [r for r in closed_rows if config.environment == "replay" or r.get("verdict") == "valid"]
    proved = {id(r) for r in solved_rows}
    curve = {}
    for b in sorted(config.budgets):
        curve[str(b)] = sum(any(id(r) in proved and _solved_at(r) <= b for r in rs) for rs in by_theorem.values())
    verdicts: dict[str, int] = {}
    for r in closed_rows:
        verdicts[r.get("verdict", "unchecked")] = verdicts.get(r.get("verdict", "unchecked"), 0) + 1
    n = max(len(theorems), 1)
    metrics: dict[str, Any] = {
        "theorems": len(theorems),
        "attempts": config.attempts,
        "budget": max(config.budgets),
        "solved": curve[str(max(config.budgets))],
        f"pass@{config.attempts}": curve[str(max(config.budgets))] / n,
        "solved_vs_budget": curve,
        "search_closed": sum(any(r["solved"] for r in rs) for rs in by_theorem.values()),
        "iterations_per_solved": _mean([r["solved_at_iteration"] for r in solved_rows]),
        "env_calls_per_solved": _mean([r["env_calls_to_solve"] for r in solved_rows]),
        "env_calls_per_theorem": _mean([r["env_calls"] for r in started]),
        "cycle_rejections": sum(r["cycles"] for r in started),
        "unavailable_tactics": sum(r["unavailable"] for r in started),
        "duplicate_tactics": sum(r["duplicates"] for r in started),
        "simplification_rate": simplify_stats.simplified / simplify_stats.proofs if simplify_stats.proofs else None,
        "edges_removed_by_simplification": simplify_stats.edges_removed,
        "verdicts": verdicts,
        "verified_valid": verdicts.get("valid", 0),
        "model_time_share": _share([r["model_s"] for r in started], [r["env_s"] for r in started]),
        "not_started": len([r for r in rows if not r.get("started")]),
    }
    if config.baseline:
        metrics["baseline_solved"] = sum(any(r.get("baseline_solved") for r in rs) for rs in by_theorem.values())
        metrics["baseline_env_calls_per_theorem"] = _mean([r.get("baseline_env_calls", 0) for r in started])
        metrics["baseline_calls_budget"] = (
            config.baseline_calls or max(config.budgets) * config.search.samples_per_expansion
        )
        metrics["baseline_solved_equal_calls"] = sum(
            any(r.get("baseline_solved_equal_calls") for r in rs) for rs in by_theorem.values()
        )
    return metrics


def _solved_at(row: dict[str, Any]) -> int:
    """The iteration a solved row was solved at (rows written before it was always recorded: the
    iterations it ran, an upper bound)."""
    return row["solved_at_iteration"] if row.get("solved_at_iteration") is not None else row["iterations"]


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _share(model: list[float], env: list[float]) -> float | None:
    total = sum(model) + sum(env)
    return sum(model) / total if total else None


def write_report(out: Path, metrics: dict[str, Any], config: SearchEvalConfig) -> Path:
    from leanloop.plots import pyplot, save

    plt = pyplot()

    budgets = sorted(int(b) for b in metrics["solved_vs_budget"])
    solved = [metrics["solved_vs_budget"][str(b)] for b in budgets]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(budgets, solved, marker="o", label="AND-OR MCTS")
    if metrics.get("oracle_solved") is not None:
        ax.axhline(metrics["oracle_solved"], color="green", linestyle=":", label="recorded tactics (ceiling)")
    if config.baseline:
        ax.axhline(
            metrics["baseline_solved"],
            color="gray",
            linestyle="--",
            label=f"sampling without search ({metrics['baseline_calls_budget']} env calls each)",
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("search budget (iterations)")
    ax.set_ylabel(f"theorems solved (of {metrics['theorems']})")
    shown = {"replay": config.split + " split, replay", "recorded": "recorded programs"}
    ax.set_title(f"pass@{config.attempts}, {shown.get(config.environment, 'Lean')} environment")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, out / "solved_vs_budget.png", dpi=120)

    def fmt(value: Any) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    environment = {
        "replay": f"Environment: **replay of recorded LeanDojo steps, no Lean** ({config.split} split of "
        f"`{config.trees}`). A tactic nobody recorded at a goal is `unavailable`, so these numbers count "
        "proofs made of recorded steps only: a lower bound on what the model would prove with Lean.",
        "recorded": "Environment: **replay of recorded REPL replies, no Lean** "
        f"({', '.join(f'`{s}`' for s in config.recordings)}): the theorems of programs Lean accepted, "
        "with the goals Lean recorded before each tactic. A tactic nobody recorded at a goal is "
        "`unavailable`; a found proof is `valid` only where its program is a recorded program.",
    }.get(config.environment, f"Environment: **Lean** ({config.environment}) on `{config.statements}`.")
    policy = (
        f"Model: `{config.model}`" if config.policy == "model" else "Policy: the recorded tactics at each goal (oracle)"
    )
    lines = [
        f"# Search evaluation: {config.run}",
        "",
        environment,
        "",
        f"{policy}; {config.attempts} attempt(s) per theorem; budget {metrics['budget']} iterations, "
        f"{config.search.samples_per_expansion} tactics sampled per expansion.",
        "",
        "| metric | value |",
        "|---|---|",
    ]
    for key in (
        "theorems",
        "solved",
        "search_closed",
        f"pass@{config.attempts}",
        "baseline_solved",
        "baseline_calls_budget",
        "baseline_solved_equal_calls",
        "oracle_solved",
        "iterations_per_solved",
        "env_calls_per_solved",
        "env_calls_per_theorem",
        "baseline_env_calls_per_theorem",
        "cycle_rejections",
        "unavailable_tactics",
        "duplicate_tactics",
        "simplification_rate",
        "edges_removed_by_simplification",
        "verified_valid",
        "model_time_share",
        "not_started",
    ):
        if key in metrics:
            lines.append(f"| {key} | {fmt(metrics[key])} |")
    if metrics.get("oracle_solved") is not None:
        lines += [
            "",
            "`oracle_solved`: the recorded tactics offered as the policy at the same budget: the most this "
            "environment can confirm.",
        ]
    lines += [
        "",
        "Solved vs budget: " + ", ".join(f"{b}: {s}" for b, s in zip(budgets, solved)),
        "",
        f"Whole-program verdicts of the found proofs (Verifier, `{config.lean.profile}` profile): "
        + (", ".join(f"{k} {v}" for k, v in metrics["verdicts"].items()) or "none found")
        + ". "
        + (
            "The traced steps carry no program text, so a found proof cannot be written as a program here: "
            "its verdict is `unavailable` and `verified_valid` stays 0. `solved`, pass@k and solved vs budget "
            "count proofs whose every step the replay answered from recorded Lean steps; no whole program "
            "was checked."
            if config.environment == "replay"
            else "`solved`, pass@k and solved vs budget count a theorem only when a found proof's whole program is "
            "`valid`; `search_closed` counts those where the search closed every goal. The no-search "
            "baseline counts rollouts that closed every goal (not checked as whole programs)."
        ),
        "",
        "![solved vs budget](solved_vs_budget.png)",
        "",
    ]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def main(argv: list[str] | None = None):
    return run_tool(
        "search_eval",
        SearchEvalConfig,
        evaluate,
        argv,
        prog="python -m search.evaluate",
        description=__doc__.splitlines()[0],
    )


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m search.evaluate"))
