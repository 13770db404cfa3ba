"""One report over several finished classifier runs (``make classifiers`` ends with it).

    python -m classifiers.combined_report --runs '[artifacts://classifiers/encoder_default, artifacts://classifiers/onetoken_default]' \\
        --out artifacts://classifiers/default_report

Reads each run's ``predictions.jsonl`` (written when it trained; validation and test scores with
thresholds chosen on validation), keeps the baselines once, and writes ``report.md``, the plots,
``predictions.jsonl`` and ``manifest.json`` (inputs: the runs) to ``--out``. The runs must have
been evaluated on the same corpus, so that every row is the same program with the same label.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from classifiers.run_report import BASELINES, PREDICTIONS, read_predictions, write_report
from leanloop.artifacts import Manifest, read_manifest, resolve_path, resolve_run


@dataclass
class ReportConfig:
    runs: list[str] = field(default_factory=list)
    """Finished classifier runs: ``artifacts://classifiers/<run>`` or their folders."""
    out: str = "artifacts://classifiers/default_report"
    """Where the combined report goes (a folder under artifacts/classifiers/)."""
    n_resamples: int = 5000
    """Grouped bootstrap resamples (group = theorem name)."""


def _corpus_input(manifest: dict[str, Any]) -> dict[str, str] | None:
    inputs = manifest.get("inputs", {})
    return inputs.get("corpus") or inputs.get("labelled_programs")


def combine(runs: list[Path]) -> list[dict[str, Any]]:
    """Rows of every run; a baseline present in several runs is kept once (it must agree)."""
    if not runs:
        raise ValueError("name at least one classifier run (--runs)")
    corpora = {}
    rows: list[dict[str, Any]] = []
    owners: dict[str, str] = {}  # evaluator -> the run whose rows are kept
    scores: dict[str, dict[str, float]] = {}  # evaluator -> row id -> score
    for run in runs:
        manifest = read_manifest(run, stage="classifiers")
        corpora[str(run)] = (_corpus_input(manifest) or {}).get("hash")
        path = run / PREDICTIONS
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: {run} finished without its evaluation; retrain it with --overwrite true"
            )
        for row in read_predictions(path):
            name = row["evaluator"]
            owner = owners.setdefault(name, str(run))
            if owner != str(run):
                if name not in BASELINES:
                    raise ValueError(f"evaluator {name} appears in both {owner} and {run}")
                known = scores[name].get(row["id"])
                if known is not None and abs(known - row["score"]) > 1e-9:
                    raise ValueError(
                        f"baseline {name} differs between runs at {row['id']}: the runs were "
                        "evaluated on different corpora or baseline settings"
                    )
                continue
            scores.setdefault(name, {})[row["id"]] = row["score"]
            rows.append(row)
    # Paired comparisons need every evaluator on the same programs: full runs score every
    # validation/test row, so this keeps everything; debug runs (one batch) keep their overlap.
    common = set.intersection(*(set(ids) for ids in scores.values()))
    if not common:
        raise ValueError(f"the runs {[str(r) for r in runs]} scored no program in common")
    dropped = sum(1 for row in rows if row["id"] not in common)
    if dropped:
        print(f"[classifiers] report: {dropped} rows scored by only some evaluators left out", file=sys.stderr)
    rows = [row for row in rows if row["id"] in common]
    if len(set(corpora.values())) > 1:
        raise ValueError(f"the runs read different corpora ({corpora}); combine runs of one corpus only")
    return rows


def main(config: ReportConfig) -> Path:
    runs = [resolve_run(r, "classifiers") for r in config.runs]
    out = resolve_path(config.out)
    rows = combine(runs)
    report = write_report(rows, out, config.n_resamples, title="Verdict classifiers vs baselines")
    manifest = Manifest(stage="classifiers", run=out.name, counts={"rows": len(rows)}, extra={"kind": "report"})
    for run in runs:
        manifest.add_input(f"run:{run.name}", run)
    manifest.write(out)
    print(f"[classifiers] report: {report}")
    return report


if __name__ == "__main__":
    from leanloop.tool import cli_entry, parse_config

    prog = "python -m classifiers.combined_report"
    raise SystemExit(
        cli_entry(
            lambda: main(parse_config(ReportConfig, prog=prog, description=__doc__.splitlines()[0])[0]), prog=prog
        )
    )
