"""pass@k of a sample run, verified through the Verifier under the hardened ``rl`` policy profile.

python -m sft.evaluate --config configs/sft/eval/default.yaml [--samples artifacts/sft_sample/x]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from leanloop.lean.types import Category, Outcome, VerifyRequest
from leanloop.artifacts import Manifest, read_manifest
from leanloop.tool import parse_config, run_parsed_tool
from sft.config import EvaluateConfig
from leanloop.artifacts import MANIFEST, locate_run, resolve_artifact, resolve_run
from leanloop.jsonl import read_jsonl, write_jsonl
from leanloop.prover.passk import (
    FAILURE,
    NO_PROGRAM,
    SUCCESS,
    StatementResult,
    pass_at_k_report,
    per_statement,
    mean_pass_at_k,
)

STAGE = "sft_eval"


def read_samples(folder: Path) -> tuple[dict, list[dict]]:
    manifest = read_manifest(folder, stage="sft_sample")
    path = folder / manifest.get("candidates", "final/candidates.jsonl")
    return manifest, list(read_jsonl(path))


def verify_rows(rows: list[dict], verifier) -> list[dict]:
    """One outcome record per attempt (rows without a program are not sent to Lean)."""
    import asyncio

    from tqdm import tqdm

    indices = [i for i, row in enumerate(rows) if row.get("program")]
    requests = [
        VerifyRequest(
            program=rows[i]["program"],
            name=rows[i].get("theorem") or rows[i]["name"],
            statement=rows[i].get("statement"),
            header=rows[i].get("header"),
            id=f"{rows[i]['name']}#{rows[i]['attempt']}",
        )
        for i in indices
    ]
    with tqdm(total=len(requests), desc="verify", unit="program") as bar:
        outcomes: list[Outcome] = asyncio.run(verifier.check(requests, on_result=lambda _i, _o: bar.update(1)))
    by_row = dict(zip(indices, outcomes))
    records = []
    for i, row in enumerate(rows):
        outcome = by_row.get(i)
        record = {"name": row["name"], "attempt": row["attempt"]}
        if outcome is None:
            record.update(category=NO_PROGRAM, reasons=[row.get("extraction_reason") or "no program"], first_error=None)
        else:
            record.update(
                category=outcome.category.value, reasons=list(outcome.reasons), first_error=outcome.first_error
            )
        records.append(record)
    return records


def _markdown(
    config: EvaluateConfig,
    sample_manifest: dict,
    records: list[dict],
    results: list[StatementResult],
    table: dict,
    caveats: list[str],
) -> str:
    categories = Counter(r["category"] for r in records)
    unverified = {c: n for c, n in categories.items() if c not in SUCCESS | FAILURE}
    fully = sum(r.unverified == 0 for r in results)
    none = sum(r.verified == 0 for r in results)
    reasons = Counter(
        reason.split(":")[0] for r in records if r["category"] not in SUCCESS for reason in r["reasons"][:1]
    )
    lines = [
        f"# Prover evaluation: {config.run}",
        "",
        f"- samples: `{config.samples}` (prover `{sample_manifest.get('prover', {}).get('path')}`, "
        f"sampling {json.dumps(sample_manifest.get('sampling'))})",
        f"- verifier: backend `{config.lean.backend.kind}`, policy profile "
        f"`{config.lean.profile}`, timeout {config.lean.timeout:g}s",
        f"- statements: {len(results)}; attempts: {len(records)}",
        *[f"- **caveat**: {caveat}" for caveat in caveats],
        "",
        "## What was verified",
        "",
        "| category | attempts | counts as |",
        "|---|---|---|",
    ]
    for category, count in sorted(categories.items(), key=lambda item: -item[1]):
        role = (
            "success"
            if category in SUCCESS
            else "failure"
            if category in FAILURE
            else "not verified (a failure in pass@k)"
        )
        lines.append(f"| {category} | {count} | {role} |")
    lines += [
        "",
        f"**{sum(unverified.values())} of {len(records)} attempts have no Lean verdict** "
        f"({', '.join(f'{n} {c}' for c, n in sorted(unverified.items())) or 'none'}); they count as "
        "failures in pass@k (LLF Eq. 10), never as guessed passes. "
        f"Statements fully verified: {fully}; with no verified attempt: {none}.",
        "",
        "## pass@k (unbiased estimator, every statement, unverified attempts are failures)",
        "",
        "| k | pass@k | statements | diagnostic: over verified attempts only (statements) "
        "| diagnostic: if unverified had all passed |",
        "|---|---|---|---|---|",
    ]

    def cell(value) -> str:
        return "n/a" if value is None else f"{value:.4f}"

    for k, row in table.items():
        lines.append(
            f"| {k} | {cell(row['pass_at_k'])} | {row['statements']} | "
            f"{cell(row['verified_only_pass_at_k'])} ({row['statements_estimated']}) | "
            f"{cell(row['upper_bound'])} |"
        )
    short = {k: row["statements_fewer_than_k"] for k, row in table.items() if row["statements_fewer_than_k"]}
    if short:
        lines += [
            "",
            "Statements with fewer than k attempts stay in the denominator, their missing attempts "
            "counted as failed up to k (fewer_than_k: fail): "
            + ", ".join(f"k = {k}: {n}" for k, n in short.items())
            + ".",
        ]
    lines += [
        "",
        "The diagnostics are not the metric: the verified-only estimate averages over a possibly "
        "biased subset (e.g. replay recordings exist mostly for some programs).",
    ]
    if reasons:
        lines += ["", "## Most common reasons (first reason per unsuccessful attempt)", ""]
        lines += [f"- {reason}: {count}" for reason, count in reasons.most_common(10)]
    return "\n".join(lines) + "\n"


def _plot(table: dict, path: Path) -> None:
    from leanloop.plots import pyplot, save

    plt = pyplot()

    ks = [int(k) for k in table]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for key, style, label in (
        ("pass_at_k", "o-", "pass@k (unverified = failure)"),
        ("verified_only_pass_at_k", "x:", "diagnostic: verified attempts only"),
    ):
        known = [(k, table[str(k)][key]) for k in ks if table[str(k)][key] is not None]
        if known:
            ax.plot([k for k, _ in known], [v for _, v in known], style, label=label)
    low = [table[str(k)]["pass_at_k"] for k in ks]
    high = [table[str(k)]["upper_bound"] for k in ks]
    if all(v is not None for v in low + high):
        ax.fill_between(ks, low, high, alpha=0.2, label="up to: unverified all pass")
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k")
    ax.set_ylim(0, 1)
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, path, dpi=120)


def check_theorem_disjoint(sft_run: str, names: set[str]) -> list[str]:
    """Refuse to evaluate a prover on theorems it was fine-tuned on; return caveats about what the
    SFT run's base model saw (a pretrain run without a holdout may have read the proofs)."""
    manifest = resolve_artifact(sft_run, "sft").manifest
    trained = set(manifest.get("counts", {}).get("train_theorems", []))
    overlap = sorted(names & trained)
    if overlap:
        raise ValueError(
            f"{len(overlap)} evaluated statements were in the SFT run's training set "
            f"(e.g. {overlap[:3]}); evaluate on the corpus's held-out split "
            "(statements.corpus_splits: [test]) instead"
        )
    caveats = []
    base = manifest.get("inputs", {}).get("base_model", {}).get("path")
    base_run = locate_run(base) if base else None
    if base_run is not None and (base_run / MANIFEST).is_file():
        pretrain = read_manifest(base_run)
        if pretrain.get("stage") == "pretrain" and "holdout" not in pretrain.get("inputs", {}):
            caveats.append(
                f"the SFT run's base model ({base}) was pretrained without a holdout "
                "corpus (data.corpus.holdout): its pretraining text may include proofs "
                "of the evaluated theorems"
            )
    return caveats


def evaluate(config: EvaluateConfig, *, resolved: str | None = None, overwrite: bool = True) -> Path:
    """Verify a sample run's attempts and write pass@k to ``artifacts/sft_eval/<run>/`` (leanloop.tool's
    contract: the old manifest goes first, the new one is written last; with ``overwrite`` off a run
    finished with this config is skipped and one with another config refused)."""
    import yaml

    resolved = resolved or yaml.safe_dump(asdict(config), sort_keys=False)
    return run_parsed_tool(STAGE, config, resolved, _evaluate, run=config.run, overwrite=overwrite).run_dir


def _evaluate(config: EvaluateConfig, out: Path) -> Manifest:
    folder = resolve_run(config.samples, "sft_sample")
    sample_manifest, rows = read_samples(folder)
    k_sampled = int(sample_manifest.get("sampling", {}).get("k", 0))
    too_big = [k for k in config.ks if k > k_sampled or k < 1]
    if too_big:
        raise ValueError(
            f"ks {too_big} are not in [1, {k_sampled}]: the sample run drew {k_sampled} attempts per statement"
        )
    caveats = check_theorem_disjoint(config.sft, {row["name"] for row in rows}) if config.sft else []
    records = verify_rows(rows, config.lean.verifier())
    results = per_statement(records)
    table = pass_at_k_report(results, sorted(set(config.ks)), fewer_than_k=config.fewer_than_k)

    write_jsonl(out / "outcomes.jsonl", records)
    (out / "results.json").write_text(
        json.dumps({"pass_at_k": table, "statements": [asdict(r) for r in results]}, indent=1)
    )
    (out / "report.md").write_text(_markdown(config, sample_manifest, records, results, table, caveats))
    _plot(table, out / "passk.png")
    categories = Counter(r["category"] for r in records)
    manifest = Manifest(stage=STAGE, run=config.run)
    manifest.add_input("samples", folder)
    if config.sft is not None:
        manifest.add_input("sft", resolve_run(config.sft, "sft"))
    manifest.counts = {
        "statements": len(results),
        "attempts": len(records),
        "by_category": dict(categories),
        "verified": sum(r.verified for r in results),
        "unverified": sum(r.unverified for r in results),
    }
    manifest.metrics = {f"pass@{k}": row["pass_at_k"] for k, row in table.items()}
    manifest.extra = {"pass_at_k": table, "lean": asdict(config.lean), "caveats": caveats}
    return manifest


def main(argv: list[str] | None = None) -> int:
    config, resolved = parse_config(
        EvaluateConfig, argv, prog="sft.evaluate", description=__doc__.splitlines()[0], overwrite=True
    )
    out = evaluate(config, resolved=resolved, overwrite=config.overwrite)
    print((out / "report.md").read_text())
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m sft.evaluate"))
