"""``python -m bench.rl`` (``make bench-rl``): the RL stage's two speed questions, in one run."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from leanloop.jsonl import read_jsonl
from leanloop.paths import REPO_ROOT, artifacts_root, shared_data_dir
from leanloop.tool import cli_entry, parse_config

SEED_LEAN_S, SEED_HYBRID_S, SEED_STEP_REDUCTION = 420.0, 90.0, 0.31


@dataclass
class BenchConfig:
    batch: int = 1024
    """Proofs per step (paper: 128 problems x 8 rollouts)."""
    workers: int = 64
    """Lean workers of the simulated pool (paper: 64)."""
    timeout: float = 60.0
    """Seconds per Lean check in the simulation (paper: 60)."""
    draws: int = 20
    """Batches sampled (with replacement) from the recorded Lean times per scenario."""
    evaluator: str | None = "artifacts://classifiers/onetoken_default"
    """Classifier run whose latency is measured; an untrained tiny one-token classifier if it does not exist."""
    latency_programs: int = 64
    """Real programs the evaluator's latency is measured on."""
    steps: int = 3
    """Measured GRPO steps per implementation (after ``warmup``)."""
    warmup: int = 1
    """GRPO steps per implementation run before measuring."""
    num_generations: int = 4
    """Rollouts per problem (G)."""
    problems: int = 2
    """Problems per GRPO step."""
    completion_tokens: int = 32
    """Tokens per rollout (fixed: minimum and maximum)."""
    threads: int = 1
    """Torch threads of the GRPO step comparison."""
    skip_step: bool = False
    """Leave out the GRPO step comparison with TRL."""
    skip_scheduler: bool = False
    """Leave out the scheduler simulation."""
    skip_gate: bool = False
    """Leave out the judge gate measurement."""
    gate_rounds: int = 3
    """Times every recorded comparator project is judged through the gate."""
    smoke: bool = False
    """Tiny sizes (2 draws, 4 latency programs, 2 steps of 2 rollouts x 4 tokens): checks the bench runs."""

    def __post_init__(self) -> None:
        if self.smoke:
            self.draws, self.latency_programs, self.steps, self.warmup = 2, 4, 1, 1
            self.num_generations, self.problems, self.completion_tokens = 2, 1, 4


def measure_evaluator(config: BenchConfig) -> dict:
    """Seconds per program of the evaluator on real RL-Lean programs (CPU time of this process)."""
    import gzip

    from rl.config import EvaluatorConfig
    from leanloop.artifacts import ManifestError, resolve_artifact
    from rl.reward_evaluator import build_evaluator

    kind = "untrained_onetoken"
    if config.evaluator:
        try:
            resolve_artifact(config.evaluator, "classifiers")
            kind = "classifier"
        except (FileNotFoundError, ManifestError):
            print(
                f"[bench-rl] {config.evaluator} not found: timing an untrained tiny one-token classifier of the "
                "same architecture instead",
                file=sys.stderr,
            )
    evaluator, info = build_evaluator(
        EvaluatorConfig(kind=kind, path=config.evaluator if kind == "classifier" else None, device="cpu")
    )
    programs = [
        row["code"]
        for row in read_jsonl(
            shared_data_dir() / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz",
            limit=config.latency_programs,
        )
    ]
    evaluator.score(programs[:4])  # warm-up
    wall, cpu = time.perf_counter(), time.process_time()
    evaluator.score(programs)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "evaluator": info,
        "programs": len(programs),
        "s_per_program_cpu": cpu / len(programs),
        "s_per_program_wall": wall / len(programs),
    }


def bench_scheduler(config: BenchConfig) -> dict:
    from rl.simulate import Scenario, compare, recorded_checks, scale_to

    checks = recorded_checks(shared_data_dir() / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz")
    latency = measure_evaluator(config)
    measured = latency["s_per_program_cpu"] * config.batch
    other = (SEED_LEAN_S - SEED_HYBRID_S) / SEED_STEP_REDUCTION - SEED_LEAN_S
    scale = scale_to(checks, config.batch, config.workers, config.timeout, SEED_LEAN_S)
    scenarios = [
        Scenario("recorded Lean times, seed evaluator latency", SEED_HYBRID_S, other),
        Scenario("recorded Lean times, evaluator latency measured here", measured, other),
        Scenario(
            f"recorded Lean times x{scale:.1f} (lean-only = the seed's 420 s), seed latency",
            SEED_HYBRID_S,
            other,
            scale,
        ),
    ]
    finite = [c.duration for c in checks if c.duration != float("inf")]
    out = {
        "checks": len(checks),
        "no_recorded_time": sum(c.duration == float("inf") for c in checks),
        "median_lean_s": statistics.median(finite),
        "mean_lean_s": statistics.fmean(finite),
        "evaluator_latency": latency,
        "other_step_s": other,
        "scenarios": [],
    }
    for scenario in scenarios:
        out["scenarios"].append(compare(checks, config.batch, config.workers, config.timeout, scenario, config.draws))
    return out


def _bench_problems(config: BenchConfig):
    from leanloop.prover.statements import read_statements

    statements = read_statements("shared://statements/minif2f_deepseek_prover_v1.5.jsonl").select(splits=["valid"])
    return statements.statements[: config.problems]


def ours_step(config: BenchConfig, root: Path) -> dict:
    from rl.train import run

    G, n = config.num_generations, config.warmup + config.steps
    args = [
        "--config",
        str(REPO_ROOT / "configs/rl/debug.yaml"),
        "--run",
        "bench",
        "--model.policy.adapter.kind",
        "none",
        "--model.optim.lr",
        "1e-5",
        "--model.threads",
        str(config.threads),
        "--model.grpo.num_generations",
        str(G),
        "--model.grpo.micro_batch_size",
        str(G * config.problems),
        "--model.grpo.loss_type",
        "dapo",
        "--model.grpo.beta",
        "0.0",
        "--model.generation.max_new_tokens",
        str(config.completion_tokens),
        "--model.generation.min_new_tokens",
        str(config.completion_tokens),
        "--model.reward.protocol",
        "evaluator",
        "--model.reward.evaluator_reward",
        "score",
        "--model.drift.enabled",
        "false",
        "--model.audit.enabled",
        "false",
        "--model.evaluation.enabled",
        "false",
        "--data.filters.enabled",
        "false",
        "--data.curriculum.enabled",
        "false",
        "--data.statements.limit",
        str(config.problems),
        "--data.problems_per_step",
        str(config.problems),
        "--trainer.max_steps",
        str(n),
        "--trainer.enable_progress_bar",
        "false",
        "--log.csv",
        "false",
    ]
    os.environ["LEANLOOP_ARTIFACTS"] = str(root)
    result = run(args)
    steps = list(read_jsonl(result.run_dir / "steps.jsonl"))[config.warmup :]
    return {
        "wall_s": [s["time/step_s"] for s in steps],
        "cpu_s": [s["time/step_cpu_s"] for s in steps],
        "rollouts": G * config.problems,
        "reward_mean": statistics.fmean(s["train/reward"] for s in steps),
    }


def trl_step(config: BenchConfig, root: Path) -> dict:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from leanloop.training.models import ModelSpec, load_model, load_tokenizer
    from rl.config import EvaluatorConfig
    from rl.reward_evaluator import build_evaluator
    from rl.reward_harness import RewardHarness, Stage
    from leanloop.prover.prompt import PromptConfig, render_prompt

    spec = ModelSpec("qwen3-tiny")
    tokenizer = load_tokenizer(spec)
    torch.manual_seed(42)
    model = load_model(spec, tokenizer=tokenizer)
    evaluator, _ = build_evaluator(EvaluatorConfig(kind="untrained_onetoken", max_length=256, device="cpu"))
    harness = RewardHarness("rl")
    problems = _bench_problems(config)
    by_prompt = {render_prompt(p.prompt, PromptConfig(), tokenizer): p for p in problems}

    def reward(prompts, completions, **_):  # the same rewards as ours: harness, then evaluator scores
        candidates = [harness.build(by_prompt[p], c) for p, c in zip(prompts, completions)]
        ready = [c for c in candidates if c.stage is Stage.READY]
        scores = iter(evaluator.score([c.program for c in ready]))
        return [next(scores).score if c.stage is Stage.READY else 0.0 for c in candidates]

    times: dict[str, list[float]] = {"wall_s": [], "cpu_s": []}

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.wall, self.cpu = time.perf_counter(), time.process_time()

        def on_step_end(self, *a, **k):
            times["wall_s"].append(time.perf_counter() - self.wall)
            times["cpu_s"].append(time.process_time() - self.cpu)

    G, n = config.num_generations, config.warmup + config.steps
    args = GRPOConfig(
        output_dir=str(root / "trl"),
        per_device_train_batch_size=G * config.problems,
        num_generations=G,
        max_completion_length=config.completion_tokens,
        generation_kwargs={"min_new_tokens": config.completion_tokens},
        temperature=1.0,
        top_p=1.0,
        learning_rate=1e-5,
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_grad_norm=1.0,
        loss_type="dapo",
        beta=0.0,
        bf16=False,
        use_cpu=True,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        max_steps=n,
        seed=42,
        disable_tqdm=True,
        log_completions=False,
    )
    dataset = Dataset.from_list([{"prompt": p} for p in by_prompt] * (n * G))
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[Clock()],
    )
    trainer.train()
    return {key: values[config.warmup :] for key, values in times.items()} | {"rollouts": G * config.problems}


def bench_step(config: BenchConfig) -> dict:
    import torch

    torch.set_num_threads(config.threads)
    with tempfile.TemporaryDirectory(prefix="bench-rl-") as tmp:
        ours = ours_step(config, Path(tmp))
        theirs = trl_step(config, Path(tmp))
    out = {"ours": ours, "trl": theirs}
    for key in ("cpu_s", "wall_s"):
        out[f"ratio_{key}"] = statistics.median(ours[key]) / statistics.median(theirs[key])
    return out


def bench_gate(config: BenchConfig) -> dict:
    """The gate's wall time per judged proof with the stand-in judge (see the module docstring)."""
    from leanloop.lean.judge import ComparatorJudge, JudgeConfig
    from leanloop.lean.standins.comparator import prepare_comparator_dir
    from leanloop.lean.types import VerifyRequest
    from rl.audit import JudgeAudit, JudgeAuditConfig, JudgeItem
    from rl.simulate import recorded_checks

    projects = sorted(
        p
        for p in (shared_data_dir() / "comparator" / "projects").iterdir()
        if (p / "Solution.lean").is_file() and (p / "Challenge.lean").is_file()
    )
    items = []
    for folder in projects:
        solution = (folder / "Solution.lean").read_text(encoding="utf-8")
        statement = (folder / "Challenge.lean").read_text(encoding="utf-8").replace("sorry", "").rstrip()
        items.append(
            JudgeItem(
                0,
                folder.name,
                solution,
                VerifyRequest(program=solution, name="comm", statement=statement, header=""),
                "lean",
            )
        )
    with tempfile.TemporaryDirectory() as tmp:
        tools = prepare_comparator_dir(Path(tmp) / "tools", shared_data_dir() / "comparator")
        judge = ComparatorJudge(
            JudgeConfig(comparator=str(tools / "comparator"), lake_path=str(tools / "lake"), concurrency=1)
        )
        audit = JudgeAudit(judge, JudgeAuditConfig(enabled=True, mode="gate", gate_deadline_s=600))
        began = time.perf_counter()
        rounds = 1 if config.smoke else config.gate_rounds
        for _ in range(rounds):
            audit.gate(items)
        wall = time.perf_counter() - began
        audit.close()
    checks = recorded_checks(shared_data_dir() / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz")
    fast = statistics.median([c.duration for c in checks if c.duration != float("inf")])
    per_proof = wall / (rounds * len(items))
    summary = audit.summary()
    return {
        "judged": rounds * len(items),
        "projects": len(items),
        "gate_s_per_proof": per_proof,
        "fast_path_median_s": fast,
        "ratio_to_fast_path": per_proof / fast,
        "agreed": summary["agreed"],
        "withheld": summary["gate_withheld"],
    }


def report(config: BenchConfig, scheduler: dict | None, step: dict | None, gate: dict | None = None) -> None:
    p = "[bench-rl]"
    if gate:
        print(
            f"{p} judge gate (stand-in comparator, {gate['judged']} judged proofs over {gate['projects']} recorded "
            f"projects, one at a time): {gate['gate_s_per_proof'] * 1e3:.0f} ms per proof = "
            f"{gate['ratio_to_fast_path']:.2f}x the fast path's recorded median {gate['fast_path_median_s']:.2f} s "
            f"Lean time per proof ({gate['agreed']} agreed, {gate['withheld']} withheld). Not included: comparator's "
            "own Lean time (builds, exports, kernel replay), which a real judge adds per proof"
        )
    if scheduler:
        lat = scheduler["evaluator_latency"]
        print(
            f"{p} Lean times: {scheduler['checks']} recorded RL-Lean checks (median {scheduler['median_lean_s']:.2f} s, "
            f"mean {scheduler['mean_lean_s']:.2f} s; {scheduler['no_recorded_time']} system errors/timeouts run to the "
            f"timeout); pool {config.workers} workers, timeout {config.timeout:g} s, batch {config.batch}"
        )
        print(
            f"{p} evaluator latency measured here: {lat['s_per_program_cpu'] * 1e3:.1f} ms/program CPU "
            f"({lat['evaluator']['kind']}{'' if lat['evaluator'].get('trained', True) else ', untrained'}) -> "
            f"{lat['s_per_program_cpu'] * config.batch:.1f} s per batch; rest of step {scheduler['other_step_s']:.1f} s "
            "(derived from the seed's 420 s -> 90 s, 31%)"
        )
        for s in scheduler["scenarios"]:
            print(
                f"{p} -- {s['scenario']['name']} (evaluator {s['scenario']['evaluator_s']:.1f} s; matched timeout "
                f"{s['matched_timeout']:.2f} s)"
            )
            for name in ("lean", "hybrid", "lean_matched"):
                r = s[name]
                extra = f", step {100 * r['step_reduction_vs_lean']:+.1f}% vs lean" if name != "lean" else ""
                print(
                    f"{p}    {name:<12} scoring {r['scoring_s']:7.1f} s  step {r['step_s']:7.1f} s{extra}; Lean share "
                    f"{r['lean_share']:.2f}, timed out {r['timed_out']:.1f}, cancelled {r['cancelled']:.1f}, valid "
                    f"proofs without a Lean verdict {r['valid_without_lean_verdict']:.1f}"
                )
        print(f"{p} seed: lean-only 420 s -> hybrid 90 s scoring, ~31% shorter steps")
    if step:
        for name in ("ours", "trl"):
            r = step[name]
            print(
                f"{p} GRPO step ({r['rollouts']} rollouts x {config.completion_tokens} tokens, tiny Qwen3, fp32 CPU, "
                f"{config.threads} thread) {name:<4}: median {statistics.median(r['cpu_s']):.2f} s CPU, "
                f"{statistics.median(r['wall_s']):.2f} s wall over {len(r['cpu_s'])} steps"
            )
        print(
            f"{p} this stage / TRL GRPOTrainer: {step['ratio_cpu_s']:.2f}x CPU time, {step['ratio_wall_s']:.2f}x wall "
            f"(target <= 1.0x). Same objective (tests/rl/test_rl_trl_equivalence.py); the difference is mostly "
            "where log-probabilities are computed: TRL's fused head projects every position, prompt included, "
            "through the vocabulary on CPU (only CUDA gets its compact mode), this stage only the completion"
        )


def main(argv: list[str] | None = None) -> dict:
    config, _ = parse_config(BenchConfig, argv, prog="python -m bench.rl", description=__doc__.splitlines()[0])
    os.environ.setdefault("WANDB_MODE", "disabled")
    scheduler = None if config.skip_scheduler else bench_scheduler(config)
    saved_root = os.environ.get("LEANLOOP_ARTIFACTS")
    step = None if config.skip_step else bench_step(config)  # runs the stage in a temporary artifacts root
    if saved_root is None:
        os.environ.pop("LEANLOOP_ARTIFACTS", None)
    else:
        os.environ["LEANLOOP_ARTIFACTS"] = saved_root
    gate = None if config.skip_gate else bench_gate(config)
    report(config, scheduler, step, gate)
    out = artifacts_root() / "bench" / "rl.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {"config": asdict(config), "scheduler": scheduler, "step": step, "gate": gate}, indent=1, default=str
        )
    )
    print(f"[bench-rl] details: {out}")
    return {"scheduler": scheduler, "step": step, "gate": gate}


if __name__ == "__main__":
    raise SystemExit(cli_entry(main, prog="python -m bench.rl"))
