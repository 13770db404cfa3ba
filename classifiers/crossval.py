"""``python -m classifiers.crossval --config configs/classifiers/X.yaml [--folds 5]`` (``make classifiers-cv``)

Theorem-grouped K-fold cross-validation of one classifier config against the TF-IDF baseline, over
train + validation (the test split is never read).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from classifiers.examples import corpus_files, load_labelled
from leanloop.artifacts import (
    MANIFEST,
    Manifest,
    ManifestError,
    default_run_name,
    describe_input,
    read_manifest,
    resolve_model,
    resolve_path,
    resolve_run,
)
from leanloop.corpus import VALID, canonical_split
from leanloop.paths import REPO_ROOT, artifacts_root, repo_file

POOLED = ("train", VALID)
METRIC = "val/auroc"


class CrossValError(ValueError):
    """Cross-validation that cannot be set up as asked."""


def fold_runs(corpus: str, folds: int) -> list[str]:
    """The fold corpora of ``corpus`` (``artifacts://data/<run>``), built unless already there."""
    if folds < 2:
        raise CrossValError(f"--folds must be at least 2, got {folds}")
    if not corpus.startswith("artifacts://data/"):
        raise CrossValError(f"cross-validation folds a data-stage run (artifacts://data/<run>); got {corpus!r}")
    source = resolve_run(corpus, "data")
    source_hash = describe_input(source)["hash"]
    names = [f"{source.name}_cv{folds}_fold{i}" for i in range(folds)]
    targets = [source.parent / name for name in names]
    if not all(_built_from(t, source_hash) for t in targets):
        _write_folds(source, targets, folds)
    return [f"artifacts://data/{name}" for name in names]


def _built_from(target: Path, source_hash: str) -> bool:
    if not (target / MANIFEST).is_file():
        return False
    return read_manifest(target, stage="data").get("inputs", {}).get("corpus", {}).get("hash") == source_hash


def _write_folds(source: Path, targets: list[Path], folds: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from sklearn.model_selection import GroupKFold

    table = pa.concat_tables([pq.read_table(f) for f in corpus_files(source)])
    splits = [canonical_split(s) for s in table.column("split").to_pylist()]
    names = [name or "" for name in table.column("name").to_pylist()]  # as classifiers.examples reads them
    # Every train/validation row takes part (unlabelled ones too: they stay counted, as in the
    # data run); the folds balance rows per theorem group.
    pool = [i for i, split in enumerate(splits) if split in POOLED]
    theorems = {names[i] for i in pool}
    if len(theorems) < folds:
        raise CrossValError(f"{source} has {len(theorems)} train/validation theorem(s), fewer than {folds} folds")
    pooled = table.take(pa.array(pool, type=pa.int64()))
    for fold, (_, held_out) in enumerate(GroupKFold(folds).split(pool, groups=[names[i] for i in pool])):
        held = {pool[j] for j in held_out}
        new_split = pa.array([VALID if i in held else "train" for i in pool])
        fold_table = pooled.set_column(table.schema.get_field_index("split"), "split", new_split)
        target = targets[fold]
        (target / MANIFEST).unlink(missing_ok=True)  # a fold half rewritten never passes as finished
        (target / "final").mkdir(parents=True, exist_ok=True)
        pq.write_table(fold_table, target / "final" / "corpus.parquet")
        record = Manifest(
            stage="data",
            run=target.name,
            counts={
                "rows": fold_table.num_rows,
                "validation_rows": len(held),
                "validation_theorems": len({names[i] for i in held}),
            },
            extra={"cross_validation": {"fold": fold, "folds": folds, "group": "theorem", "test_rows": "left out"}},
        )
        record.add_input("corpus", source)
        record.write(target)


@dataclass
class HeldOut:
    """One fold's held-out (validation) programs and the TF-IDF baseline's scores of them."""

    programs: list[str]
    names: list[str]
    labels: list[bool]
    tfidf: np.ndarray

    @property
    def tfidf_auroc(self) -> float:
        from leanloop.metrics import auroc

        return float(auroc(np.asarray(self.labels, dtype=int), self.tfidf))


def held_out(fold_corpora: list[str]) -> list[HeldOut]:
    """Each fold's validation rows, with TF-IDF fitted on that fold's train split."""
    from classifiers.baselines import TfidfBaseline

    out = []
    for path in fold_corpora:
        corpus = load_labelled(path)
        train, held = corpus.splits["train"], corpus.splits[VALID]
        scores = TfidfBaseline().fit(train.programs, train.labels).scores(held.programs)
        out.append(HeldOut(list(held.programs), list(held.names), [bool(y) for y in held.labels], scores))
    return out


def pooled_difference(held: list[HeldOut], runs: list[str | None], resamples: int = 1000) -> dict[str, Any] | None:
    """Every finished fold's model scores its own held-out programs; pooled over the folds, the
    classifier's AUROC minus TF-IDF's with a paired bootstrap interval grouped by theorem (each
    theorem is held out once, so the pool has every train + validation theorem once). Five fold means
    say who wins more folds; this says by how much, with an interval."""
    from classifiers.evaluator import ClassifierEvaluator
    from leanloop.metrics import auroc, paired_bootstrap

    labels: list[bool] = []
    names: list[str] = []
    mine: list[float] = []
    baseline: list[float] = []
    for fold, run in zip(held, runs):
        if run is None:
            continue
        evaluator = ClassifierEvaluator.load(resolve_model(f"artifacts://classifiers/{run}", "classifiers"))
        mine += [float(p.score) for p in evaluator.score(fold.programs)]
        baseline += fold.tfidf.tolist()
        labels += fold.labels
        names += fold.names
    if not labels:
        return None
    y = np.asarray(labels, dtype=int)
    gap = paired_bootstrap(y, names, np.asarray(mine), np.asarray(baseline), metrics=("auroc",), n_resamples=resamples)[
        "auroc"
    ]
    return {
        "rows": len(labels),
        "theorems": len(set(names)),
        "classifier": float(auroc(y, mine)),
        "tfidf": float(auroc(y, baseline)),
        "difference": float(gap.point),
        "low": float(gap.low),
        "high": float(gap.high),
        "share_positive": float(gap.share_positive),
        "resamples": resamples,
    }


def config_corpus(configs: list[str], overrides: dict[str, Any]) -> str:
    """``data.corpus`` as the layered configs and overrides set it (later wins)."""
    import yaml

    corpus = None
    for config in configs:
        data = (yaml.safe_load(repo_file(config, "config file").read_text()) or {}).get("data") or {}
        corpus = data.get("corpus", corpus)
    corpus = overrides.get("data.corpus", corpus)
    if not corpus:
        raise CrossValError(
            "the configs name no data.corpus (a data-stage run) to cross-validate on; "
            "pass --corpus artifacts://data/<run>"
        )
    return str(corpus)


def check_request(folder: Path, configs: list[str], overrides: dict[str, Any], folds: list[str]) -> None:
    """Fold runs are reused by name, so a name must always mean the same experiment: the config
    files' contents, the overrides and the fold corpora (by manifest hash: rebuilt folds differ)
    are recorded on the first call and must match on every later one (an edited config or a
    rebuilt corpus under an old name would otherwise silently reuse the old fold runs)."""
    import hashlib

    request = {
        "configs": {c: hashlib.sha256(repo_file(c, "config file").read_bytes()).hexdigest() for c in configs},
        "overrides": overrides,
        "folds": {f: describe_input(resolve_path(f))["hash"] for f in folds},
    }
    path = folder / "request.json"
    if path.is_file():
        previous = json.loads(path.read_text())
        if previous != json.loads(json.dumps(request)):
            raise CrossValError(
                f"{folder.name} already ran with other configs, overrides or folds ({path}); "
                "pass --name for this experiment, or delete that folder and its fold runs to redo it"
            )
        return
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(request, indent=2) + "\n")


@dataclass
class FoldResult:
    fold: int
    run: str
    classifier: float | None
    tfidf: float


def summarize(
    folder: Path, name: str, results: list[FoldResult], pooled: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``crossval.{json,md,png}`` in ``folder``: per-fold AUROCs, means, who wins each fold, and the
    pooled difference (:func:`pooled_difference`)."""
    done = [r for r in results if r.classifier is not None]
    summary: dict[str, Any] = {
        "name": name,
        "metric": "validation AUROC",
        "folds": [asdict(r) for r in results],
        "finished": len(done),
        "classifier_mean": float(np.mean([r.classifier for r in done])) if done else None,
        "tfidf_mean": float(np.mean([r.tfidf for r in done])) if done else None,
        "classifier_wins": sum(r.classifier > r.tfidf for r in done),
        "pooled": pooled,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "crossval.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        f"# {name}: theorem-grouped {len(results)}-fold cross-validation (validation AUROC)",
        "",
        "| fold | classifier | TF-IDF | difference |",
        "|---|---|---|---|",
    ]
    for r in results:
        if r.classifier is None:
            lines.append(f"| {r.fold} | (not finished) | {r.tfidf:.3f} | |")
        else:
            lines.append(f"| {r.fold} | {r.classifier:.3f} | {r.tfidf:.3f} | {r.classifier - r.tfidf:+.3f} |")
    if done:
        lines.append(
            f"| mean | {summary['classifier_mean']:.3f} | {summary['tfidf_mean']:.3f} | "
            f"{summary['classifier_mean'] - summary['tfidf_mean']:+.3f} |"
        )
        lines += ["", f"The classifier beats TF-IDF in {summary['classifier_wins']} of {len(done)} folds."]
    if pooled:
        lines += [
            "",
            f"Pooled over the finished folds' held-out programs ({pooled['rows']} programs of "
            f"{pooled['theorems']} theorems, each scored by its own fold's model): classifier "
            f"{pooled['classifier']:.3f}, TF-IDF {pooled['tfidf']:.3f}, difference {pooled['difference']:+.3f} "
            f"[{pooled['low']:+.3f}, {pooled['high']:+.3f}] (bootstrap over theorems, {pooled['resamples']} "
            f"resamples; the classifier ahead in {pooled['share_positive']:.0%} of them).",
        ]
    (folder / "crossval.md").write_text("\n".join(lines) + "\n")
    summary["table"] = "\n".join(lines)
    if done:
        _plot(folder / "crossval.png", name, done)
    return summary


def _plot(path: Path, name: str, done: list[FoldResult]) -> None:
    from leanloop.plots import pyplot, save

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4))
    folds = [r.fold for r in done]
    ax.plot(folds, [r.classifier for r in done], marker="o", label="classifier")
    ax.plot(folds, [r.tfidf for r in done], marker="s", linestyle="--", label="TF-IDF + logistic regression")
    ax.set_xticks(folds)
    ax.set_xlabel("fold (held-out theorems)")
    ax.set_ylabel("validation AUROC")
    ax.set_title(f"{name}: cross-validation")
    ax.legend()
    fig.tight_layout()
    save(fig, path, dpi=100)


@dataclass
class CrossValConfig:
    """``python -m classifiers.crossval`` options; each ``--config`` is a classifier config file (repeat
    to layer several, in order)."""

    folds: int = 5
    """How many theorem-grouped folds."""
    corpus: str | None = None
    """Data run to fold (default: the configs' data.corpus)."""
    name: str | None = None
    """Sweep and run-name prefix (default: cv<K>_<config stems>)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """Dotted options for every fold, e.g. '{model.init_args.optim.lr: 1e-4}'."""
    executor: Literal["local", "submit"] = "local"
    """Run the folds here, one after another, or through cluster.submit."""
    profile: str | None = None
    """Cluster profile for --executor submit."""


def sweep_file(folder: Path, name: str, args: CrossValConfig, configs: list[str], folds: list[str]) -> Path:
    """The folds as a sweep file of the cluster stage (its typed ``SweepConfig`` fields)."""
    import yaml

    sweep = {
        "name": name,
        "stage": "classifiers",
        "config": list(configs),
        "metric": METRIC,
        "mode": "max",
        "overrides": {k: v for k, v in args.overrides.items() if k not in ("data.corpus", "data.jsonl")},
        "runs": [
            {"name": f"fold{i}", "overrides": {"data.corpus": path, "data.jsonl": None}} for i, path in enumerate(folds)
        ],
        "executor": args.executor,
        "profile": args.profile,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    return path


def run_sweep(path: Path) -> int:
    """``python -m cluster.sweep --sweep path``, its output passed through; its exit status."""
    process = subprocess.Popen(
        [sys.executable, "-m", "cluster.sweep", "--sweep", str(path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    assert process.stdout is not None
    for line in process.stdout:
        print(line, end="", flush=True)
    return process.wait()


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def main(argv: list[str] | None = None) -> int:
    from leanloop.tool import parse_stage_tool

    args, configs, _ = parse_stage_tool(
        CrossValConfig, argv, prog="python -m classifiers.crossval", description=__doc__.splitlines()[0], forward=False
    )
    try:
        if not configs:
            raise CrossValError("no --config: name the classifier config file(s) to cross-validate")
        corpus = args.corpus or config_corpus(configs, args.overrides)
        folds = fold_runs(corpus, args.folds)
        name = args.name or f"cv{args.folds}_{default_run_name(configs)}"
        folder = artifacts_root() / "sweeps" / name  # where cluster.sweep writes the summary
        check_request(folder, configs, args.overrides, folds)
    except (CrossValError, ValueError, ManifestError, FileNotFoundError) as error:
        print(f"crossval: {error}", file=sys.stderr)
        return 2
    print(f"[crossval] {len(folds)} theorem-grouped folds of {corpus}: {', '.join(folds)}", flush=True)
    status = run_sweep(sweep_file(folder, name, args, configs, folds))
    summary_csv = folder / "sweep_summary.csv"
    if not summary_csv.is_file():
        print(f"crossval: the sweep wrote no {summary_csv} (exit status {status})", file=sys.stderr)
        return status or 1
    # the sweep summary has read every fold run's manifest: its rows carry val/auroc ("" if unfinished)
    with open(summary_csv, newline="") as handle:
        rows = list(csv.DictReader(handle))
    held = held_out(folds)
    results = [FoldResult(i, row["run"], _number(row.get(METRIC)), held[i].tfidf_auroc) for i, row in enumerate(rows)]
    pooled = pooled_difference(held, [r.run if r.classifier is not None else None for r in results])
    summary = summarize(folder, name, results, pooled)
    print(summary["table"])
    print(f"[crossval] {folder}/crossval.md, crossval.json, crossval.png")
    if status:
        print(f"crossval: the fold sweep exited with status {status}", file=sys.stderr)
    return status


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m classifiers.crossval"))
