"""``python -m bench.prm_curve`` (``make bench-prm-curve``): learning curve of the step verifier
against TF-IDF on the prm-label run's test split, beside prm-eval's trivial baselines
(``always_correct`` and ``first_error_at_random``, both on each point's test proofs).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.classifier_curve import crossing, describe_crossing, parse_list
from leanloop.paths import REPO_ROOT


@dataclass
class PRMCurveConfig:
    """``python -m bench.prm_curve`` options."""

    recipe: str = str(REPO_ROOT / "configs/prm/default.yaml")
    """The verifier's SFT config (``--config`` of ``python -m prm.train``), trained at every point."""
    base: str | None = None
    """The verifier's starting model (``model.base.name``) instead of the recipe's, e.g.
    ``artifacts://pretrain/default`` (make pretrain's Lean-pretrained tiny Qwen3)."""
    dataset: str = "artifacts://prm_label/default"
    evaluation: str = str(REPO_ROOT / "configs/prm/eval/default.yaml")
    """prm-eval's config: its ``limit``, ``max_steps``, ``batch_size`` and ``threads`` are used."""
    sizes: str = "200,600,all"
    """Labelled training proofs per point, comma-separated (all: every one)."""
    seeds: str = "0"
    epochs: float = 2.0
    """Passes over each point's proofs (trainer.max_steps = epochs x proofs / batch size)."""
    smoke: bool = False
    """configs/prm/debug.yaml, 2 sizes, 1 seed, one batch, 8 proofs per split, on labels of the first
    150 recorded programs (made as ``artifacts/prm_label/curve_smoke``)."""
    json: str | None = None
    plot: str | None = None
    """Also draw the curve (test F1 on wrong steps and exact against training proofs) to this PNG."""


def run_one(options: PRMCurveConfig, proofs: int | None, seed: int) -> dict[str, Any]:
    """Test metrics of the verifier and of TF-IDF trained on the same ``proofs`` drawn with ``seed``."""
    import yaml

    from leanloop.artifacts import resolve_run
    from leanloop.tool import parse_config
    from leanloop.training.models import ModelSpec, load_model, load_tokenizer
    from prm.baselines import TfidfStepClassifier
    from prm.config import EvalConfig
    from prm.data import draw
    from prm.labelled_proofs import LABEL_STAGE, read_split
    from prm.evaluate import (
        RULES,
        decision_rules,
        prepared_proofs,
        random_first_error,
        rule_predictions,
        verifier_scores,
    )
    from prm.labels_from_lean import training_prefix
    from prm.metrics import labels_at, ranking, step_metrics
    from prm.train import run as train

    data = resolve_run(options.dataset, LABEL_STAGE)
    labelled = [r for r in read_split(data, "train") if training_prefix(r.labels)]
    chosen = draw(labelled, proofs, seed)
    batch = yaml.safe_load(Path(options.recipe).read_text())["data"]["batch_size"]
    steps = max(1, math.ceil(options.epochs * len(chosen) / batch))
    start = "init" if options.base is None else "-".join(Path(options.base.replace("artifacts://", "")).parts[-2:])
    name = f"curve_{start}_e{options.epochs:g}_n{proofs or 'all'}_s{seed}"
    args = [
        "--config",
        options.recipe,
        "--run",
        name,
        "--data.dataset",
        options.dataset,
        "--data.max_examples",
        str(proofs) if proofs else "null",
        "--data.splits.seed",
        str(seed),
        "--seed_everything",
        str(seed),
        "--log.wandb",
        "false",
    ]
    if options.base is not None:
        args += ["--model.base.name", options.base]
    args += (
        ["--trainer.fast_dev_run", "true"]
        if options.smoke
        else ["--trainer.max_steps", str(steps), "--trainer.val_check_interval", str(steps)]
    )
    result = train(args)
    config = parse_config(EvalConfig, ["--config", options.evaluation])[0]
    if options.smoke:
        config.limit = 8
    config.model = ModelSpec(name=str(result.run_dir / "final"))
    tokenizer = load_tokenizer(config.model)
    model = load_model(config.model, tokenizer=tokenizer).eval()
    tfidf = TfidfStepClassifier(seed).fit(chosen, config.max_steps)
    rules = decision_rules(read_split(data, "valid"), model, tokenizer, config, tfidf)
    kept, truth, _, _ = prepared_proofs(read_split(data, "test"), config)
    scores = {
        **verifier_scores(kept, truth, model, tokenizer, config)[1],
        "tfidf_steps": tfidf.wrong_probabilities(kept, truth),
    }
    at_random = step_metrics(random_first_error(truth, seed), truth)
    out: dict[str, Any] = {
        "proofs": len(chosen),
        "steps": steps,
        "thresholds": rules["thresholds"],
        "always_correct": step_metrics([[True] * len(t) for t in truth], truth)["exact"],
        "first_error_at_random": at_random["exact"],
        "first_error_at_random/f1_incorrect": at_random["f1_incorrect"],
    }
    for method, labels in rule_predictions(scores, rules).items():
        out[method] = step_metrics(labels, truth)[RULES[method][1]]
    out["tfidf_steps"] = step_metrics(labels_at(scores["tfidf_steps"], 0.5), truth)["f1_incorrect"]
    for source, wrong in scores.items():
        out[f"{source}/average_precision"] = ranking(wrong, truth).get("average_precision")
    return out


def draw_curve(points: list[dict[str, Any]], path: str) -> None:
    from leanloop.plots import pyplot, save

    fig, axes = pyplot().subplots(1, 2, figsize=(10, 3.8))
    sizes = [p["proofs"] for p in points]
    panels = [
        (
            "test F1 on wrong steps",
            [
                ("verifier@f1", "o-"),
                ("tfidf_steps@f1", "s-"),
                ("tfidf_steps", "s:"),
                ("first_error_at_random/f1_incorrect", "k--"),
            ],
        ),
        (
            "test exact",
            [
                ("verifier", "o-"),
                ("tfidf_steps@exact", "s-"),
                ("always_correct", "k:"),
                ("first_error_at_random", "k--"),
            ],
        ),
    ]
    for ax, (title, lines) in zip(axes, panels):
        for key, style in lines:
            ax.plot(sizes, [p["mean"][key] for p in points], style, label=key)
        ax.set(xscale="log", xlabel="labelled training proofs", title=title, ylim=(0, 1))
        ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, path)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from leanloop.artifacts import resolve_run
    from leanloop.paths import repo_file
    from leanloop.tool import check_output_file, parse_config
    from prm.labelled_proofs import LABEL_STAGE

    options = parse_config(PRMCurveConfig, argv, prog="python -m bench.prm_curve", description=__doc__.splitlines()[0])[
        0
    ]
    check_output_file(options.json)
    check_output_file(options.plot, "--plot")
    sizes = parse_list(options.sizes, "sizes", allow_all=True)
    seeds = [int(s) for s in parse_list(options.seeds, "seeds")]
    if any(n is not None and n < 1 for n in sizes) or options.epochs <= 0:
        raise ValueError(
            f"sizes must be at least 1 proof each and epochs above 0, got {options.sizes!r}, {options.epochs}"
        )
    if options.smoke:
        from prm import label
        from prm.config import LabelConfig, RecordedConfig

        options.recipe, sizes, seeds = str(REPO_ROOT / "configs/prm/debug.yaml"), [4, None], [0]
        label.run(LabelConfig(run="curve_smoke", recorded=RecordedConfig(limit=150)), progress=False)
        options.dataset = "artifacts://prm_label/curve_smoke"
    repo_file(options.recipe, "--recipe")  # named inputs are checked before the first run, not inside it
    repo_file(options.evaluation, "--evaluation")
    resolve_run(options.dataset, LABEL_STAGE)
    began = time.perf_counter()
    points: list[dict[str, Any]] = []
    for proofs in sizes:
        runs = [run_one(options, proofs, seed) for seed in seeds]
        mean = {
            k: float(np.mean([r[k] or 0.0 for r in runs]))
            for k in runs[0]
            if k not in ("proofs", "steps", "thresholds")
        }
        point = {
            "proofs": runs[0]["proofs"],
            "requested": proofs or "all",
            "runs": runs,
            "mean": mean,
            "gap": mean["verifier@f1"] - mean["tfidf_steps"],
        }
        points.append(point)
        print(
            f"proofs {point['proofs']:>5} ({runs[0]['steps']} steps): F1 on wrong steps: verifier@f1 "
            f"{mean['verifier@f1']:.3f}, tfidf_steps {mean['tfidf_steps']:.3f} (@f1 {mean['tfidf_steps@f1']:.3f}), "
            f"first_error_at_random {mean['first_error_at_random/f1_incorrect']:.3f}; "
            f"exact: verifier {mean['verifier']:.3f}, always_correct {mean['always_correct']:.3f}, "
            f"first_error_at_random {mean['first_error_at_random']:.3f}, tfidf_steps@exact "
            f"{mean['tfidf_steps@exact']:.3f}; AP: verifier {mean['verifier/average_precision']:.3f}, tfidf "
            f"{mean['tfidf_steps/average_precision']:.3f} | F1 gap {point['gap']:+.3f}",
            flush=True,
        )
    where = crossing([p["proofs"] for p in points], [p["gap"] for p in points])
    print(describe_crossing(where, "verifier@f1", "test F1 on wrong steps", "proofs"))
    out = {
        "recipe": options.recipe,
        "base": options.base,
        "dataset": options.dataset,
        "epochs": options.epochs,
        "seeds": seeds,
        "points": points,
        "crossing": where,
        "wall_s": time.perf_counter() - began,
    }
    print(f"bench.prm_curve: {out['wall_s']:.0f} s")
    if options.json:
        Path(options.json).write_text(json.dumps(out, indent=2) + "\n")
    if options.plot:
        draw_curve(points, options.plot)
    return out


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m bench.prm_curve"))
