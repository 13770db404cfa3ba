"""``report.md`` and plots of an RL run: where the rewards came from, how the judges agreed, pass@k."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from leanloop.jsonl import read_jsonl


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def plot_steps(history: list[dict], path: Path) -> Path | None:
    from leanloop.plots import Lines, Stacked, step_panels

    return step_panels(
        history,
        path,
        [
            Lines(
                "reward and Lean share",
                [("train/reward", "mean reward"), ("reward/lean_share", "Lean share")],
                ylim=(-0.05, 1.05),
            ),
            Stacked(
                "rollouts by reward source",
                "reward/{}/count",
                ["extraction", "precheck", "lean", "evaluator", "replay", "none"],
            ),
            Lines(
                "step time",
                [
                    ("time/generation_s", "generation"),
                    ("time/scoring_s", "scoring"),
                    ("time/update_s", "update"),
                    ("reward/cutoff_s", "hybrid cutoff"),
                ],
                ylabel="seconds",
            ),
        ],
    )


def judge_section(summary: dict, share: float) -> list[str]:
    """The judge audit's lines: how often comparator agreed with the rewards the fast path paid."""
    rate = summary.get("agreement_rate")
    mode = summary.get("mode", "async")
    lines = [
        "## Judge audit (comparator)",
        "",
        f"Mode **{mode}**. Accepted rewards re-checked by the judge ({share:.0%} of them): agreement rate "
        f"**{_fmt(rate)}** ({summary['agreed']} agreed, {summary['disagreed']} disagreed, of which "
        f"{summary.get('timeouts', 0)} judge timeouts on fast-path-valid candidates; "
        f"{summary['undecided']} undecided (no judge verdict), {summary['pending']} unfinished). "
        + (
            "Only proofs the judge confirmed within the step's deadline were paid "
            f"({summary.get('gate_withheld', 0)} withheld, {summary.get('gate_s', 0.0):.1f} s waiting)."
            if mode == "gate"
            else "A judged proof earned its replay-buffer entry and curriculum credit only once the judge agreed; "
            "undecided ones never did (judge_audit.jsonl)."
        ),
        "",
    ]
    if summary["disagreed"]:
        lines += [f"**ALARM: the judge rejected {summary['disagreed']} proof(s) the fast path paid 1.0.**", ""]
    return lines


def write_report(module: Any, datamodule: Any) -> Path:
    run = module.run_dir
    history = module.history
    lines = [f"# RL run `{run.name}`", ""]
    lines += ["## Where the rewards came from", "", f"**{module.provenance}.**", ""]
    totals = Counter({k.split(":", 1)[1]: v for k, v in module.totals.items() if k.startswith("source:")})
    total = sum(totals.values())
    if total:
        lines += ["| reward source | rollouts | share |", "|---|---|---|"]
        lines += [f"| {source} | {n} | {n / total:.1%} |" for source, n in totals.most_common()]
        lines += [
            "",
            "Lean outcome of each rollout (not_run: decided before Lean, or evaluator-only; cancelled: "
            "still running at the hybrid cutoff):",
            "",
        ]
        outcomes = Counter({k.split(":", 1)[1]: v for k, v in module.totals.items() if k.startswith("lean:")})
        lines += ["| outcome | rollouts |", "|---|---|"] + [f"| {k} | {v} |" for k, v in outcomes.most_common()]
    lines += [
        "",
        f"Starting checkpoint: `{module.base.name}`"
        + (
            f" (the configured fallback: the primary one did not exist: `{module.policy_config.base.name}`)"
            if module.used_fallback
            else ""
        )
        + f"; adapter: {module.policy_config.adapter.kind}; GRPO: G={module.grpo.num_generations}, "
        f"loss {module.grpo.loss_type}, beta={module.grpo.beta}.",
        "",
    ]
    if history:
        lines += [
            "## Steps",
            "",
            "| step | reward | Lean share | cutoff s | scoring s | step s | lean | evaluator | precheck | "
            "no code | unscored |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for h in history:
            lines.append(
                "| "
                + " | ".join(
                    _fmt(x)
                    for x in (
                        h["step"],
                        h.get("train/reward"),
                        h.get("reward/lean_share"),
                        h.get("reward/cutoff_s"),
                        h.get("reward/scoring_s"),
                        h.get("time/step_s"),
                        h.get("reward/lean/count"),
                        h.get("reward/evaluator/count"),
                        h.get("reward/precheck/count"),
                        h.get("reward/extraction/count"),
                        h.get("reward/unscored"),
                    )
                )
                + " |"
            )
        plot = plot_steps(history, run / "rewards.png")
        if plot:
            lines += ["", f"![rewards]({plot.name})", ""]
    drift = list(read_jsonl(run / "drift.jsonl")) if (run / "drift.jsonl").is_file() else []
    if drift:
        lines += [
            "## Drift monitor (evaluator vs Lean labels)",
            "",
            "| step | pairs | Lean valid | Lean invalid | accuracy | FPR | FNR | Lean share | alarm |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            "| "
            + " | ".join(
                _fmt(d.get(k))
                for k in (
                    "step",
                    "pairs",
                    "lean_valid",
                    "lean_invalid",
                    "accuracy",
                    "fpr",
                    "fnr",
                    "lean_share",
                    "alarm",
                )
            )
            + " |"
            for d in drift
        ]
        lines.append("")
    if module.audits:
        keys = (
            "unfinished",
            "rechecked",
            "valid",
            "evaluator_accepted",
            "evaluator_accepted_valid",
            "evaluator_accepted_invalid",
            "evaluator_rejected_valid",
        )
        summed = {k: sum(a[k] for a in module.audits) for k in keys}
        lines += [
            "## Timeout audit",
            "",
            f"Proofs whose Lean check did not finish in the step, rechecked with {module.audit_config.timeout:g} s:",
            "",
            "| " + " | ".join(keys) + " |",
            "|" + "---|" * len(keys),
            "| " + " | ".join(str(summed[k]) for k in keys) + " |",
            "",
        ]
    judge_audit = getattr(module, "judge_audit", None)
    if judge_audit is not None:
        lines += judge_section(judge_audit.summary(), judge_audit.config.share)
    if module.refreshes:
        lines += [
            "## Evaluator refresh",
            "",
            "| step | train | held out | accuracy before | after | FPR before | after | skipped |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            "| "
            + " | ".join(
                _fmt(r.get(k))
                for k in (
                    "step",
                    "train",
                    "holdout",
                    "before_accuracy",
                    "after_accuracy",
                    "before_fpr",
                    "after_fpr",
                    "skipped",
                )
            )
            + " |"
            for r in module.refreshes
        ]
        lines.append("")
    if datamodule.filter_records:
        from rl.filters import summarize

        summary = summarize(datamodule.filter_records)
        lines += [
            "## Statement filters",
            "",
            f"{summary['statements']} statements; decisions {summary['decision']}; flags raised {summary['flags']}.",
            "",
            "| check | results |",
            "|---|---|",
        ]
        lines += [f"| {check} | {results} |" for check, results in summary["checks"].items()]
        lines += ["", "Per-statement results: `filters.jsonl`.", ""]
    lines += [
        "## Curriculum",
        "",
        f"{datamodule.curriculum.counts()}; transitions: {len(datamodule.curriculum.transitions)} (`curriculum.json`).",
        "",
    ]
    evaluation = module.results.get("evaluation")
    if evaluation:
        lines += [
            "## pass@k (unbiased estimator, hardened harness, Lean verdicts only)",
            "",
            f"{evaluation['statements']} statements; categories {evaluation['categories']}; "
            f"{evaluation['verified']} of {evaluation['attempts']} attempts verified (valid / invalid / "
            "precheck_rejected / no_program). Unverified attempts (timeouts included) count as failures "
            "(LLF Eq. 10), never as guessed passes.",
            "",
            "| protocol | k | pass@k (mean over runs) | std across runs (runs) | statements | "
            "verified only (statements) | if unverified had passed |",
            "|---|---|---|---|---|---|---|",
        ]
        for protocol, table in evaluation["lean_pass_at_k"].items():
            for k, row in table.items():
                lines.append(
                    f"| {protocol} | {k} | {_fmt(row['pass_at_k'])} | {_fmt(row.get('std_over_runs'))} "
                    f"({row.get('runs', 1)}) | {row['statements']} | "
                    f"{_fmt(row['verified_only_pass_at_k'])} ({row['statements_estimated']}) | "
                    f"{_fmt(row['upper_bound'])} |"
                )
        judged = evaluation.get("judge")
        if judged is not None:
            lines += [
                "",
                f"Every attempt the REPL fast path accepted was re-checked by the judge (comparator), whose "
                f"verdict is the one counted above: {judged.get('agreed', 0)} agreed, {judged.get('disagreed', 0)} "
                f"disagreed, {judged.get('undecided', 0)} without a judge verdict (counted as failures).",
                "",
            ]
        estimate = evaluation.get("evaluator_estimate_pass_at_k")
        if estimate:
            lines += [
                "",
                "Evaluator-judged estimate (what the reward saw; NOT a Lean result): "
                + ", ".join(f"pass@{k} {_fmt(v)}" for k, v in estimate.items()),
                "",
            ]
    path = run / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
