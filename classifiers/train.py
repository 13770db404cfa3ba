"""``python -m classifiers.train --config configs/classifiers/X.yaml [--model.init_args.optim.lr 1e-4 ...]``

Trains one verdict classifier (the config's ``model.class_path``: ``classifiers.module.EncoderClassifier``
or ``classifiers.module.OneTokenClassifier``) on the labelled corpus with the shared stage machinery
(:func:`leanloop.training.cli.run_stage`: run folder, resolved config, export to ``final/``,
manifest). The stage always tests after fit: validation scores choose the threshold, test scores
are reported at it. Then the run's report: this classifier beside the majority-class and TF-IDF +
logistic-regression baselines on the same theorem-disjoint test split, with grouped bootstrap
intervals (``artifacts/classifiers/<run>/report.md``, ``predictions.jsonl``, PNG plots).
"""

from __future__ import annotations

import sys

from classifiers.data import ClassifierData


STAGE = "classifiers"


def run(args: list[str] | None = None):
    """Parse, train, test, export, report; returns run_stage's StageResult (tests call this)."""
    from leanloop.training.cli import run_stage

    args = list(sys.argv[1:] if args is None else args)
    # The threshold and the test metrics come from trainer.test; a classifier run without them
    # would export an uncalibrated model, so the stage always runs it (a later flag still wins).
    args = ["--test_after_fit", "true", *args]
    # model_class None: the config picks the classifier by class_path (subclass mode).
    result = run_stage(STAGE, None, ClassifierData, args=args)
    if result.skipped:
        print(f"[classifiers] skipped: {result.run_dir} already finished with this config")
        return result
    if result.trainer is not None and result.trainer.is_global_zero:
        report = write_run_report(result)
        print(f"[classifiers] done: {result.run_dir}" + (f" (report: {report})" if report else ""))
    return result


def write_run_report(result):
    from classifiers.stacker import STACKER_FILE, Stacker
    from classifiers.run_report import baseline_rows, rows_for, stack_rows, write_report
    from leanloop.corpus import VALID

    module, corpus = result.model, result.datamodule.corpus
    if module.scored.get(VALID) and not corpus.splits["test"]:
        # a cross-validation fold (classifiers.crossval): the test split is left out on purpose
        print("[classifiers] the corpus has no test split: no report written (validation AUROC is in the manifest)")
        return None
    if not module.scored.get(VALID) or not module.scored.get("test"):
        print("[classifiers] no validation/test scores (trainer.test did not run): no report written", file=sys.stderr)
        return None
    rows = rows_for(f"{module.kind}:{result.run_dir.name}", corpus, module.scored, module.threshold)
    if module.evaluation.baselines:
        rows += baseline_rows(corpus, module.evaluation, rows=module.scored)
    stacker_path = result.run_dir / "final" / STACKER_FILE
    if stacker_path.is_file():
        rows += stack_rows(f"history:{result.run_dir.name}", corpus, module.scored, Stacker.load(stacker_path))
    fast = bool(result.manifest and result.manifest.get("fast_dev_run"))
    # fast_dev_run scores one batch per split: the report still runs end to end, on few resamples.
    resamples = 50 if fast else module.evaluation.n_resamples
    return write_report(
        rows,
        result.run_dir,
        resamples,
        title=f"classifiers/{result.run_dir.name}: {module.kind} classifier vs baselines",
    )


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(run, prog="python -m classifiers.train"))
