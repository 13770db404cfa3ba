"""Which command, config folder and artifact folder belong together: one row per runnable.

``tests/test_runnables.py`` checks the Makefile's recipes, the modules' artifact-folder constants and
the config folders against this table, so a new runnable is declared here once and every place that
names it is held to the same names.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Runnable:
    module: str  # python -m <module>
    target: str  # make <target>
    configs: str | None  # the folder of its configs under configs/ (default.yaml there), None: no config
    artifacts: str | None  # artifacts/<artifacts>/<run>/, None: writes no run folder


RUNNABLES: tuple[Runnable, ...] = (
    Runnable("data.build", "data", "data", "data"),
    Runnable("pretrain.documents", "pretrain-corpus", "pretrain/corpus", "pretrain_corpus"),
    Runnable("pretrain.train", "pretrain", "pretrain", "pretrain"),
    Runnable("classifiers.train_defaults", "classifiers", "classifiers", "classifiers"),  # the default pair
    Runnable("classifiers.train", "classifiers", "classifiers", "classifiers"),  # make classifiers CONFIG=...
    Runnable("classifiers.crossval", "classifiers-cv", "classifiers", "sweeps"),
    Runnable("classifiers.score", "classify", "classify", "classify"),
    Runnable("feedback_model.train", "feedback", "feedback_model", "feedback_model"),
    Runnable("feedback_model.cascade_eval", "cascade-eval", "feedback_model/eval", "cascade_eval"),
    Runnable("sft.train", "sft", "sft", "sft"),
    Runnable("sft.sample", "sample", "sft/sample", "sample"),
    Runnable("sft.evaluate", "sft-eval", "sft/eval", "sft_eval"),
    Runnable("sft.flywheel", "flywheel", "sft/flywheel", "flywheel"),
    Runnable("rl.train", "rl", "rl", "rl"),
    Runnable("autoformalizer.train", "autoformalizer-sft", "autoformalizer", "autoformalizer"),
    Runnable("autoformalizer.train_grpo", "autoformalizer-grpo", "autoformalizer/grpo", "autoformalizer_grpo"),
    Runnable("autoformalizer.evaluate", "autoformalizer-eval", "autoformalizer/eval", "autoformalizer_eval"),
    Runnable("autoformalizer.evaluate_retrieval", "autoformalizer-retrieval", "autoformalizer/eval", None),
    Runnable("search.build_data", "search-data", "search_data", "search_data"),
    Runnable("search.train", "search-train", "search", "search"),
    Runnable("search.rl", "search-rl", "search/rl", "search_rl"),
    Runnable("search.evaluate", "search-eval", "search/eval", "search_eval"),
    Runnable("prm.generate", "prm-generate", "prm/generate", "prm_samples"),
    Runnable("prm.label", "prm-label", "prm/label", "prm_data"),
    Runnable("prm.train", "prm-train", "prm", "prm"),
    Runnable("prm.evaluate", "prm-eval", "prm/eval", "prm_eval"),
    Runnable("bench.lean_check", "lean-check", "lean_check", "lean_check"),
    Runnable("bench.gpu_check", "gpu-check", None, "gpu_check"),
    Runnable("leanloop.lean.judge", "judge", None, None),
    Runnable("leanloop.plan", "plan", None, None),  # any stage's configs; plan-paper: every paper config
    Runnable("leanloop.shared_data", "shared-data", None, None),
    Runnable("cluster.sweep", "sweep", "sweeps", "sweeps"),
    Runnable("cluster.submit", "submit", "cluster", None),
    Runnable("cluster.probe", "probe", "strategy", "probe"),
)


def by_module(module: str) -> Runnable:
    for runnable in RUNNABLES:
        if runnable.module == module:
            return runnable
    raise KeyError(f"{module} is not in leanloop.runnables.RUNNABLES")
