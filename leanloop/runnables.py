"""Which command, config folder and artifact folder belong together: one row per runnable.

The rule: a runnable that writes run folders has one name, its artifact folder ``artifacts/<name>/``;
its make target is that name with ``-`` for ``_`` and its configs are ``configs/<stage>/<rest>/`` for a
name ``<stage>_<rest>`` of its stage's package (``prm_label``: ``make prm-label``, ``configs/prm/label/``),
``configs/<name>/`` otherwise. A stage's own training run, whose bare ``make <stage>`` runs the whole
stage, is ``make <stage>-train``. The exceptions say why in :data:`RULE_EXCEPTIONS`.

``tests/test_runnables.py`` checks the rule, the Makefile's recipes, the modules' artifact-folder
constants and the config folders against this table, so a new runnable is declared here once and
every place that names it is held to the same names. Names that were renamed are refused in one
line that names the new one (:func:`renamed_artifact`, :func:`renamed_config`, the Makefile's
``RENAMED_TARGETS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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
    Runnable("classifiers.score", "classifiers-score", "classifiers/score", "classifiers_score"),
    Runnable("feedback_model.train", "feedback-model", "feedback_model", "feedback_model"),
    Runnable("feedback_model.cascade_eval", "feedback-model-eval", "feedback_model/eval", "feedback_model_eval"),
    Runnable("sft.train", "sft", "sft", "sft"),
    Runnable("sft.sample", "sft-sample", "sft/sample", "sft_sample"),
    Runnable("sft.evaluate", "sft-eval", "sft/eval", "sft_eval"),
    Runnable("sft.flywheel", "sft-flywheel", "sft/flywheel", "sft_flywheel"),
    Runnable("rl.train", "rl", "rl", "rl"),
    Runnable("autoformalizer.train", "autoformalizer-train", "autoformalizer", "autoformalizer"),
    Runnable("autoformalizer.train_grpo", "autoformalizer-grpo", "autoformalizer/grpo", "autoformalizer_grpo"),
    Runnable("autoformalizer.evaluate", "autoformalizer-eval", "autoformalizer/eval", "autoformalizer_eval"),
    Runnable("autoformalizer.evaluate_retrieval", "autoformalizer-retrieval", "autoformalizer/eval", None),
    Runnable("search.build_data", "search-data", "search/data", "search_data"),
    Runnable("search.train", "search", "search", "search"),
    Runnable(
        "search.expert_iteration", "search-expert-iteration", "search/expert_iteration", "search_expert_iteration"
    ),
    Runnable("search.evaluate", "search-eval", "search/eval", "search_eval"),
    Runnable("prm.generate", "prm-generate", "prm/generate", "prm_generate"),
    Runnable("prm.label", "prm-label", "prm/label", "prm_label"),
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


# Rows that break the rule, and why: their configs are another runnable's, or they are tools named
# for what they do (a verb) rather than for what they write.
RULE_EXCEPTIONS: dict[str, str] = {
    "classifiers.crossval": "classifiers.train once per fold as a sweep: classifier configs in, artifacts/sweeps/ out",
    "autoformalizer.evaluate_retrieval": "a second report on the evaluation configs; writes no run folder",
    "cluster.sweep": "a tool: make sweep runs configs/sweeps/<name>.yaml into artifacts/sweeps/",
    "cluster.submit": "a tool: sends any stage's run to a cluster profile (configs/cluster/)",
    "cluster.probe": "a tool: checks a strategy (configs/strategy/) and writes its probe run",
}

# Old names -> new ones. Artifact folders and config folders that users may have written in their
# configs or on the command line, and make targets (the Makefile's RENAMED_TARGETS mirrors this).
RENAMED_ARTIFACTS: dict[str, str] = {
    "prm_data": "prm_label",
    "prm_samples": "prm_generate",
    "classify": "classifiers_score",
    "cascade_eval": "feedback_model_eval",
    "sample": "sft_sample",
    "flywheel": "sft_flywheel",
    "search_rl": "search_expert_iteration",
}
RENAMED_CONFIGS: dict[str, str] = {
    "classify": "classifiers/score",
    "search_data": "search/data",
    "search/rl": "search/expert_iteration",
    "search/rl_round.yaml": "search/expert_iteration_round.yaml",
}
RENAMED_TARGETS: dict[str, str] = {
    "classify": "classifiers-score",
    "feedback": "feedback-model",
    "cascade-eval": "feedback-model-eval",
    "sample": "sft-sample",
    "flywheel": "sft-flywheel",
    "autoformalizer-sft": "autoformalizer-train",
    "search-rl": "search-expert-iteration",
    "search-train": "search",
}


def renamed_artifact(folder: str, ref: str) -> str | None:
    """The one-line refusal of a reference ``ref`` to a renamed artifact folder, or None."""
    new = RENAMED_ARTIFACTS.get(folder)
    if new is None:
        return None
    return (
        f"{ref}: artifacts/{folder}/ was renamed artifacts/{new}/; use "
        f"{ref.replace(folder + '/', new + '/', 1)} (and move any finished runs there)"
    )


def renamed_config(path: str) -> str | None:
    """The one-line refusal of a config path under a renamed config folder, or None."""
    parts = Path(path).as_posix().split("/")
    if "configs" not in parts:
        return None
    at = len(parts) - 1 - parts[::-1].index("configs")
    rest = "/".join(parts[at + 1 :])
    for old, new in RENAMED_CONFIGS.items():
        if rest == old or rest.startswith(old + "/"):
            moved = "/".join(parts[: at + 1] + [new + rest[len(old) :]])
            slash = "" if old.endswith(".yaml") else "/"  # a renamed file, not a folder
            return f"{path}: configs/{old}{slash} was renamed configs/{new}{slash}; use {moved}"
    return None


def config_folder(artifacts: str) -> str:
    """The config folder (under configs/) of the runnable writing ``artifacts/<artifacts>/``."""
    for runnable in RUNNABLES:
        if runnable.artifacts == artifacts and runnable.configs is not None:
            return runnable.configs
    return artifacts


def make_target(artifacts: str) -> str:
    """The make target that writes ``artifacts/<artifacts>/``."""
    for runnable in RUNNABLES:
        if runnable.artifacts == artifacts:
            return runnable.target
    return artifacts.replace("_", "-")


def by_module(module: str) -> Runnable:
    for runnable in RUNNABLES:
        if runnable.module == module:
            return runnable
    raise KeyError(f"{module} is not in leanloop.runnables.RUNNABLES")
