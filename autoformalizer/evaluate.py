"""``python -m autoformalizer.evaluate --config configs/autoformalizer/eval/default.yaml``: the nine metrics."""

from __future__ import annotations

import random
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from autoformalizer.config import AutoformalizerConfig, PolicyConfig
from autoformalizer.data import END_OF_TURN, Pair, load_pairs
from autoformalizer.metrics import (
    ERROR_CATEGORIES,
    FAILURES_APART,
    VERDICT,
    AutoformalizerReport,
    ResourceMonitor,
    compile_at_k,
    error_breakdown,
    failure_modes,
    faithfulness_code,
    goal_exact_match,
    mean_iters_solved,
    pass_at_n,
    write_report,
)
from autoformalizer.prompts import extract_statement, formalize_prompt
from autoformalizer.repair import repair_loop
from autoformalizer.statements import well_formed
from autoformalizer.typecheck import StatementCheck

STAGE = "autoformalizer_eval"
ATTEMPTS_FILE = "attempts.jsonl"


class LeanClock:
    """A statement checker that adds up the time spent in it: tokens/s counts generation time only,
    so the Lean checks inside the repair loop are taken out of the measured interval."""

    def __init__(self, checker: Any) -> None:
        self.checker = checker
        self.seconds = 0.0

    def check_many(self, statements: Sequence[str], headers: Sequence[str | None]) -> list[StatementCheck]:
        began = time.perf_counter()
        try:
            return self.checker.check_many(statements, headers)
        finally:
            self.seconds += time.perf_counter() - began


def trained_theorems(policy: PolicyConfig) -> set[str]:
    """Every theorem the policy's runs trained on: the run's manifest, then its ``base_model`` input's,
    down the chain (GRPO -> SFT). Empty for a checkpoint that is not a run of this project."""
    from leanloop.artifacts import read_manifest

    from autoformalizer.policy import policy_spec

    names: set[str] = set()
    run = policy_spec(policy).run_dir()
    while run is not None:
        manifest = read_manifest(run)
        names |= set(manifest.get("counts", {}).get("train_theorems", []))
        base = manifest.get("inputs", {}).get("base_model")
        run = Path(base["path"]) if base else None
    return names


def select_problems(config: AutoformalizerConfig) -> tuple[list[Pair], Counter]:
    pairs, counts = load_pairs(config.pairs)
    split = config.evaluation.split
    if split not in pairs:
        raise ValueError(f"evaluation.split must be one of {sorted(pairs)}, got {split!r}")
    problems = list(pairs[split])
    random.Random(config.evaluation.seed).shuffle(problems)
    if config.evaluation.limit is not None:
        problems = problems[: config.evaluation.limit]
    overlap = sorted(trained_theorems(config.policy) & {p.name for p in problems})
    if overlap:
        raise ValueError(
            f"{len(overlap)} evaluation theorems were trained on by {config.policy.name} (e.g. "
            f"{overlap[:3]}); evaluate a theorem-disjoint split"
        )
    if not problems:
        raise ValueError(f"no problems in the {split} split: {dict(counts)}")
    return problems, counts


def _status(check: StatementCheck | None) -> str:
    return "malformed" if check is None else check.status.value


def _why_no_verdict(statuses: Counter, backend: str) -> str:
    unanswered = {s: n for s, n in statuses.items() if s not in VERDICT}
    parts = [f"{n} {s}" for s, n in sorted(unanswered.items())]
    text = f"Lean gave no verdict on any checked statement ({', '.join(parts) or 'none checked'})"
    if backend == "replay" and unanswered.get("unavailable"):
        text += (
            "; the replay backend answers only programs that were recorded with real Lean, and these "
            "generated statements were not (no Lean toolchain here: run with lean.backend.kind local or "
            "kimina to measure it)"
        )
    return text


def evaluate(config: AutoformalizerConfig, run_dir: Path) -> AutoformalizerReport:
    import torch
    from tqdm.auto import tqdm

    from autoformalizer.policy import build_policy, make_generate
    from leanloop.grpo.rollout import RolloutGenerationConfig, TransformersRollout

    ev = config.evaluation
    if ev.threads is not None:
        torch.set_num_threads(ev.threads)
    torch.manual_seed(ev.seed)
    problems, pair_counts = select_problems(config)
    model, tokenizer = build_policy(config.policy, adapters=False, packed_cpu_kernel=True)  # inference only
    model.eval()
    index = retriever = None
    if config.repair.did_you_mean or config.repair.retrieval:
        from autoformalizer.mathlib_index import MathlibIndex

        index = MathlibIndex.load(config.retrieval.index)
    if config.repair.retrieval:
        from autoformalizer.retrieval import MathlibRetriever, format_premises

        retriever = MathlibRetriever(index, config.retrieval)
    checker = config.typecheck.checker(config.lean)
    generate = make_generate(model, tokenizer, max_new_tokens=config.repair.max_new_tokens)
    sampler = (
        TransformersRollout(
            tokenizer,
            RolloutGenerationConfig(max_new_tokens=config.repair.max_new_tokens, temperature=ev.temperature),
            [END_OF_TURN, tokenizer.eos_token],
        )
        if ev.samples
        else None
    )
    results, samples, attempts = [], [], []
    statuses: Counter = Counter()
    messages, goals = [], []
    generation_s, sampled_tokens = 0.0, 0
    lean = LeanClock(checker)
    with ResourceMonitor() as monitor:
        for problem in tqdm(problems, desc="evaluate", unit="problem"):
            header = problem.header if config.typecheck.problem_header else None

            def check(statement: str, header=header) -> StatementCheck:
                return lean.check_many([statement], [header])[0]

            premises = format_premises(retriever.retrieve(problem.informal)) if retriever else ""
            began, checking = time.perf_counter(), lean.seconds
            result = repair_loop(
                problem.informal,
                generate,
                check,
                index=index if config.repair.did_you_mean else None,
                premises=premises,
                max_turns=config.repair.max_turns,
                error_chars=config.repair.error_chars,
            )
            # the loop's Lean checks are timed apart and taken out: tokens/s counts generation only
            generation_s += time.perf_counter() - began - (lean.seconds - checking)
            results.append(result)
            for turn_number, turn in enumerate(result.turns, 1):
                statuses[_status(turn.check)] += 1
                messages += turn.check.messages if turn.check else []
                attempts.append(
                    {
                        "problem": problem.name,
                        "kind": "repair",
                        "turn": turn_number,
                        "statement": turn.statement,
                        "status": _status(turn.check),
                        "feedback": turn.feedback[:800],
                    }
                )
            passed = [t.check for t in result.turns if t.check is not None and t.check.passed]
            goals.append((passed[-1].goal if passed else None, problem.goal))
            verdicts: list[bool | None] = []
            if sampler is not None:
                began = time.perf_counter()
                rollouts = sampler.generate(model, [formalize_prompt(problem.informal, premises)], ev.samples)
                generation_s += time.perf_counter() - began
                sampled_tokens += int(rollouts.completion_mask.sum())
                statements = [extract_statement(t) for t in rollouts.texts]
                formed = [s for s in statements if well_formed(s).ok]
                checked = iter(lean.check_many(formed, [header] * len(formed)) if formed else [])
                for statement in statements:
                    check_ = next(checked) if well_formed(statement).ok else None
                    status = _status(check_)
                    statuses[status] += 1
                    messages += check_.messages if check_ else []
                    verdicts.append(VERDICT.get(status))
                    attempts.append(
                        {"problem": problem.name, "kind": "sample", "turn": 1, "statement": statement, "status": status}
                    )
            samples.append(verdicts)
    report = AutoformalizerReport()
    first = [r.turns[0].statement for r in results]
    report.well_formed = float(np.mean([well_formed(s).ok for s in first]))
    curve = compile_at_k([r.statuses() for r in results], range(1, config.repair.max_turns + 1))
    report.compile_at_k = curve.values
    if ev.samples:
        for n in sorted({1, ev.samples}):
            report.pass_at_n[n] = pass_at_n(samples, n)[0]
    report.mean_iters_solved = mean_iters_solved([r.iterations for r in results], [r.solved for r in results])
    report.faithfulness_code = faithfulness_code([r.final or "" for r in results], [p.formal for p in problems])
    report.goal_exact_match, goal_pairs = goal_exact_match([c for c, _ in goals], [r for _, r in goals])
    report.pass_at_cap = curve.values.get(config.repair.max_turns)
    modes = failure_modes([r.turns[-1].check for r in results if r.solved is False and r.turns])
    report.error_breakdown = {c: modes[c] for c in ERROR_CATEGORIES}
    report.failures_apart = {c: modes[c] for c in FAILURES_APART}
    tokens = generate.tokens + sampled_tokens
    report.tokens_per_sec = tokens / generation_s if generation_s > 0 else None
    report.resources = monitor.result
    verdict_count = sum(n for s, n in statuses.items() if s in VERDICT and s != "malformed")
    report.counts = {
        "problems": len(problems),
        "split": ev.split,
        "policy": config.policy.name,
        "lean_backend": config.lean.backend.kind,
        "statuses": dict(statuses),
        "lean_verdicts": verdict_count,
        "solved": sum(bool(r.solved) for r in results),
        "stop_reasons": dict(Counter(r.stop_reason.split(" (")[0] for r in results)),
        "generated_tokens": tokens,
        "generation_s": round(generation_s, 2),
        "lean_s": round(lean.seconds, 2),
        "iteration_cap": config.repair.max_turns,
        "no_verdict_within_k": curve.undetermined,  # counted as not passed in compile@k
        "error_messages_all_turns": error_breakdown(messages),
        "goal_pairs": goal_pairs,
        "reference_goals": sum(p.goal is not None for p in problems),
        "retrieval": bool(retriever),
        "did_you_mean": config.repair.did_you_mean,
    }
    report.missing = missing_reasons(report, statuses, config, goals)
    _write_attempts(run_dir, attempts)
    return report


def missing_reasons(
    report: AutoformalizerReport,
    statuses: Counter,
    config: AutoformalizerConfig,
    goals: list[tuple[str | None, str | None]],
) -> dict[str, str]:
    """Why each metric that is None could not be computed."""
    backend = config.lean.backend.kind
    checked = sum(n for s, n in statuses.items() if s != "malformed")
    no_verdict = (
        _why_no_verdict(statuses, backend)
        if checked
        else "No generated statement was well-formed, so none reached Lean"
    )
    missing: dict[str, str] = {}
    undetermined = [k for k, v in report.compile_at_k.items() if v is None]
    if undetermined:
        missing["compile@k"] = (
            f"k = {', '.join(map(str, undetermined))}: no problem has a Lean verdict within its "
            f"first k attempts. {no_verdict}"
        )
    if config.evaluation.samples == 0:
        missing["pass@N"] = "evaluation.samples is 0 (no sampled statements)"
    elif any(v is None for v in report.pass_at_n.values()):
        missing["pass@N"] = f"no sampled statement has a Lean verdict. {no_verdict}"
    if report.mean_iters_solved is None:
        missing["mean_iters_solved"] = f"no problem was solved (no statement type-checked). {no_verdict}"
    if report.goal_exact_match is None:
        if not any(r for _, r in goals):
            missing["goal_exact_match"] = "no evaluated problem has a recorded reference goal"
        else:
            missing["goal_exact_match"] = (
                "needs the elaborated goal of a candidate that type-checks (Lean's tactic "
                "records at its `sorry`); no candidate type-checked with goals reported. " + no_verdict
            )
    if sum(report.error_breakdown.values()) == 0:
        missing["error_breakdown"] = (
            "no Lean error message: every checked statement passed"
            if statuses.get("passed") and not statuses.get("failed")
            else f"no Lean error message to classify. {no_verdict}"
        )
    if report.tokens_per_sec is None:
        missing["tokens_per_sec"] = "nothing was generated"
    if report.resources.get("utilization") is None:
        missing["utilization"] = "GPU utilisation needs pynvml (memory is measured)"
    return missing


def _write_attempts(run_dir: Path, attempts: list[dict]) -> None:
    from leanloop.jsonl import write_jsonl

    write_jsonl(run_dir / ATTEMPTS_FILE, attempts)


def run(
    config: AutoformalizerConfig, *, resolved: str | None = None, overwrite: bool = True
) -> tuple[Path, AutoformalizerReport | None]:
    """Evaluate into ``artifacts/autoformalizer_eval/<run>/`` and write the report and manifest
    (leanloop.tool's contract; with ``overwrite`` off a run finished with this config is skipped,
    its report then None, and one with another config refused)."""
    import yaml

    from leanloop.tool import run_parsed_tool

    resolved = resolved or yaml.safe_dump(asdict(config), sort_keys=False, allow_unicode=True)
    result = run_parsed_tool(STAGE, config, resolved, _run, run=config.run, overwrite=overwrite)
    return result.run_dir, result.value


def _run(config: AutoformalizerConfig, run_dir: Path):
    from leanloop.artifacts import Manifest
    from leanloop.paths import resolve_shared

    from autoformalizer.policy import policy_spec

    report = evaluate(config, run_dir)
    write_report(report, run_dir)
    manifest = Manifest(
        stage=STAGE,
        run=config.run,
        seed=config.evaluation.seed,
        counts=report.counts,
        metrics={k: v for k, v in report.to_dict().items() if k not in ("counts", "missing")},
        extra={"missing": report.missing, "config_file": "config.yaml"},
    )
    policy_run = policy_spec(config.policy).run_dir()
    if policy_run is not None:
        manifest.add_input("policy", policy_run)
    for source in config.pairs.sources:
        manifest.add_input(f"pairs:{source.path}", resolve_shared(source.path))
    return manifest, report


def main(argv: list[str] | None = None) -> int:
    from leanloop.tool import parse_config as parse_tool_config

    config, resolved = parse_tool_config(
        AutoformalizerConfig, argv, prog="python -m autoformalizer.evaluate", overwrite=True
    )
    run_dir, report = run(config, resolved=resolved, overwrite=config.overwrite)
    print(f"[{STAGE}] {run_dir / 'report.md'}")
    for name, reason in (report.missing if report is not None else {}).items():
        print(f"[{STAGE}] not computed: {name}: {reason}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m autoformalizer.evaluate"))
