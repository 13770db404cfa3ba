"""``make prm-label``: step labels from Lean -> artifacts/prm_label/<run>/.

    python -m prm.label --config configs/prm/label/default.yaml [--recorded.limit 100 ...]

Sources: the embedded default (recorded whole programs labelled from their recorded first error,
:mod:`prm.recorded_steps`) and/or a prm-generate run's paired proofs (parsed, checked in order by the
incremental or prefix checker, reviewed, judged: :mod:`prm.labels_from_lean`). Outputs: final/<split>.parquet
(:mod:`prm.labelled_proofs`), report.md + first_error.png, config.yaml, manifest.json.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from leanloop.artifacts import Manifest, resolve_run
from leanloop.jsonl import read_jsonl
from leanloop.tool import run_parsed_tool, run_tool
from prm.config import LabelConfig
from prm.labelled_proofs import LABEL_STAGE, SPLITS, ProofRecord, theorem_split, write_splits
from prm.labels_from_lean import IncrementalChecker, PrefixChecker, as_dicts, label_paired_proof, training_prefix
from prm.review import ModelJudge, ModelReviewer, RuleReviewer
from prm.paired import PairedFormatError, assemble_program, parse_paired

GENERATE_STAGE = "prm_generate"
SAMPLES_FILE = "samples.jsonl"


def _reviewer(config: LabelConfig):
    r = config.reviewer
    if r.kind == "rules":
        return RuleReviewer(r.rules, r.otherwise)
    if r.kind == "model":
        if r.model is None:
            raise ValueError("reviewer.kind model needs reviewer.model (a ModelSpec)")
        return ModelReviewer(r.model, r.max_new_tokens)
    return None


def _checker(config: LabelConfig, backend):
    kind = config.checker
    if kind == "auto":
        kind = "incremental" if config.lean.backend.kind == "local" else "prefix"
    if kind == "incremental":
        if config.lean.backend.kind != "local":
            raise ValueError("checker incremental needs lean.backend.kind local (REPL proof states); use prefix")
        from leanloop.lean.session import LeanSession

        return IncrementalChecker(LeanSession(backend.config, backend.repl_config), config.lean.timeout)
    return PrefixChecker(backend, config.lean.timeout)


def label_generated(config: LabelConfig, counts: Counter, progress: bool = True) -> list[ProofRecord]:
    folder = resolve_run(config.generated, GENERATE_STAGE)
    rows = list(read_jsonl(folder / "final" / SAMPLES_FILE))
    backend = config.lean.backend_instance()
    verifier = config.lean.verifier(backend)
    checker = _checker(config, backend)
    reviewer = _reviewer(config)
    judge = ModelJudge(config.judge.model) if config.judge.kind == "model" and config.judge.model else None
    records = []
    from tqdm import tqdm

    for row in tqdm(rows, desc="[prm-label] generated proofs", disable=not progress):
        try:
            steps = parse_paired(row["completion"])
        except PairedFormatError as error:
            counts[f"rejected:{error.reason}"] += 1
            continue
        labels = label_paired_proof(
            steps,
            header=row["header"],
            statement=row["statement"],
            name=row.get("theorem"),
            checker=checker,
            whole_program=lambda r: verifier.check_sync([r])[0],
            reviewer=reviewer,
            judge=judge,
        )
        counts[f"status:{labels.status}"] += 1
        counts["correspondence_rejected"] += labels.correspondence_rejected
        counts["repaired"] += labels.repaired
        program = assemble_program(row["header"], row["statement"], [s.tactic for s in labels.steps])
        records.append(
            ProofRecord(
                proof_id=f"{row['name']}#{row['attempt']}",
                name=row["name"],
                statement=row["statement"],
                header=row["header"],
                program=program,
                steps=as_dicts(labels.steps),
                proof_label=labels.proof_label,
                first_error=labels.first_error,
                category=labels.status,
                lean_version=labels.lean_version,
                generator=str(row.get("generator")),
                source=config.generated,
                labeller=checker.name,
                reason=labels.reason,
                reviewer=labels.reviewer,
                correspondence_rejected=labels.correspondence_rejected,
                split=theorem_split(row["name"], config.splits.valid, config.splits.test, config.splits.seed),
            )
        )
    if hasattr(checker, "close"):
        checker.close()
    return records


def summary(records: list[ProofRecord]) -> dict[str, float]:
    steps = [s for r in records for s in r.steps]
    labelled = [s for s in steps if s["label"] is not None]
    trainable = [r for r in records if training_prefix(r.labels)]
    return {
        "proofs": len(records),
        "steps": len(steps),
        "labelled_steps": len(labelled),
        "incorrect_steps": sum(s["label"] is False for s in labelled),
        "correct_proofs": sum(r.proof_label is True for r in records),
        "proofs_without_labels": sum(not any(l is not None for l in r.labels) for r in records),
        "trainable_proofs": len(trainable),
    }


def write_report(folder: Path, config: LabelConfig, records: list[ProofRecord], counts: Counter) -> None:
    from leanloop.plots import pyplot, save

    plt = pyplot()

    stats = summary(records)
    lines = [f"# prm-label `{config.run}`", ""]
    if config.recorded is not None:
        lines += [
            "**Embedded default: these are tactic-level labels from recorded Lean output** "
            f"(`{config.recorded.path}`): each recorded program's proof is cut into top-level tactic steps "
            "and labelled from Lean's recorded first error (steps before it correct, from it on incorrect; "
            "passing programs all correct; timeouts and infrastructure errors: no labels). The prose of a "
            f"step is the prover's own comment above it, else the tactic text: the recordings carry no prose, so the "
            f"verifier reads tactics ({counts['steps_from_comment']} of {counts['steps']} steps had a "
            "comment).",
            "",
        ]
    if config.reviewer.kind == "none":
        lines += [
            "**No reviewer** (`reviewer.kind: none`, the CPU default): every Lean failure counts as a "
            "mathematical error; LeanPRM's reviewer would keep only failures it judges mathematical.",
            "",
        ]
    else:
        sorted_counts = (
            ", ".join(f"{k.split(':', 1)[1]} {v}" for k, v in sorted(counts.items()) if k.startswith("reviewer:"))
            or "no failure reviewed"
        )
        lines += [
            f"Reviewer: `{config.reviewer.kind}`"
            + (
                " (scripted rules on the compiler output: "
                + "; ".join(f"`{r.pattern}` -> {r.verdict}" for r in config.reviewer.rules)
                + f"; otherwise {config.reviewer.otherwise})"
                if config.reviewer.kind == "rules"
                else ""
            )
            + f". First failures sorted: {sorted_counts}. A failure not judged mathematical keeps no negative "
            "labels; decisions are stored per proof (`reviewer` column).",
            "",
        ]
    lines += ["| | count |", "|---|---:|"] + [f"| {k} | {v} |" for k, v in stats.items()]
    lines += [f"| {k} | {v} |" for k, v in sorted(counts.items()) if k not in stats]
    by_split = Counter(r.split for r in records)
    lines += [
        "",
        "Splits by theorem: " + ", ".join(f"{s} {by_split[s]}" for s in SPLITS),
        "",
        "![first failing step](first_error.png)",
        "",
    ]
    (folder / "report.md").write_text("\n".join(lines), encoding="utf-8")
    firsts = [r.first_error + 1 for r in records if r.first_error is not None]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    if firsts:
        ax.hist(firsts, bins=range(1, max(firsts) + 2), color="#c44e52")
    ax.set_xlabel("first failing step (1-based)")
    ax.set_ylabel("proofs")
    ax.set_title(f"{len(firsts)} failing proofs, {stats['correct_proofs']} correct")
    fig.tight_layout()
    save(fig, folder / "first_error.png", dpi=110)


def work(config: LabelConfig, folder: Path, progress: bool = True) -> Manifest:
    """Label into ``folder`` (run_tool has written config.yaml); returns the manifest."""
    if config.recorded is None and config.generated is None:
        raise ValueError("nothing to label: set recorded (the embedded default) and/or generated")
    counts: Counter = Counter()
    records: list[ProofRecord] = []
    manifest = Manifest(stage=LABEL_STAGE, run=config.run, seed=config.splits.seed)
    if config.recorded is not None:
        from leanloop.paths import resolve_shared
        from prm.recorded_steps import build_recorded

        recorded, recorded_counts = build_recorded(
            config.recorded, config.splits, config.lean.policy(), progress, reviewer=_reviewer(config)
        )
        records += recorded
        counts.update(recorded_counts)
        manifest.add_input("recorded", resolve_shared(config.recorded.path))
    if config.generated is not None:
        records += label_generated(config, counts, progress)
        manifest.add_input("generated", resolve_run(config.generated, GENERATE_STAGE))
    split_counts = write_splits(records, folder / "final")
    write_report(folder, config, records, counts)
    manifest.counts = {**summary(records), **dict(counts), **{f"split:{k}": v for k, v in split_counts.items()}}
    manifest.extra = {
        "reviewer": config.reviewer.kind,
        "judge": config.judge.kind,
        "profile": config.lean.profile,
        "label_kind": "tactic-level labels from recorded Lean output"
        if config.generated is None
        else "step labels from Lean on generated paired proofs",
    }
    print(f"[prm-label] {summary(records)} -> {folder}")
    return manifest


def run(config: LabelConfig, resolved_yaml: str = "", progress: bool = True) -> Path:
    """Label from code (tests, drivers): the same run folder rules as the command line."""
    return run_parsed_tool(
        LABEL_STAGE, config, resolved_yaml, lambda c, f: work(c, f, progress), run=config.run
    ).run_dir


def main(argv: list[str] | None = None) -> None:
    run_tool(LABEL_STAGE, LabelConfig, work, argv, prog="python -m prm.label")


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m prm.label"))
