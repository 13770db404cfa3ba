"""The table of runnables (leanloop/runnables.py) against the places that name them: the Makefile's
recipes, each module's artifact-folder constant, the config folders and the README's stage map; the
naming rule; old names refused in one line that names the new one."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cluster.array import ArrayError, array_stage
from leanloop.artifacts import RenamedError, resolve_run, upstream_configs
from leanloop.runnables import (
    RENAMED_ARTIFACTS,
    RENAMED_CONFIGS,
    RENAMED_TARGETS,
    RULE_EXCEPTIONS,
    RUNNABLES,
    by_module,
    config_folder,
    make_target,
    renamed_artifact,
    renamed_config,
)
from leanloop.tool import ConfigFileError, check_config_files

ROOT = Path(__file__).resolve().parents[1]
# modules a recipe runs that are not runnables of their own: the installers, the test runner, the
# array wrapper of a stage (cluster.array names the stage), and the benchmarks (bench/, no run folder)
NOT_RUNNABLES = re.compile(
    r"^(pip|pytest|ruff|cluster\.array|leanloop\.lean\.standins\.|bench\.(?!lean_check$|gpu_check$))"
)


def recipes() -> dict[str, str]:
    """Make target -> its recipe's text."""
    out: dict[str, str] = {}
    target = None
    for line in (ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"^([a-zA-Z_-]+):", line)
        if match:
            target = match.group(1)
            out.setdefault(target, "")
        elif target and line.startswith("\t"):
            out[target] += line + "\n"
        elif not line.strip():
            target = None
    return out


def invoked_modules(recipe: str) -> set[str]:
    modules = set(re.findall(r"\$\(PY\) -m ([\w.]+)", recipe))
    modules |= set(re.findall(r"--entry ([\w.]+)", recipe))
    for call in re.findall(r"\$\(call stage,(.*)", recipe):  # the module, or an $(if ...) of two
        modules |= {m for m in re.findall(r"\b([a-z_]+\.[a-z_]+)\b", call) if not m.endswith(".yaml")}
    return {m for m in modules if not NOT_RUNNABLES.match(m)}


def test_every_module_a_recipe_runs_is_declared_once():
    names = [r.module for r in RUNNABLES]
    assert len(names) == len(set(names)), "a module is declared twice"
    undeclared = {m for recipe in recipes().values() for m in invoked_modules(recipe)} - set(names)
    assert not undeclared, f"declare these in leanloop/runnables.py: {sorted(undeclared)}"


@pytest.mark.parametrize("runnable", RUNNABLES, ids=lambda r: r.module)
def test_each_runnable_matches_its_target_configs_and_artifact_folder(runnable):
    recipe = recipes().get(runnable.target)
    assert recipe is not None, f"make {runnable.target} does not exist"
    assert runnable.module in invoked_modules(recipe), f"make {runnable.target} does not run {runnable.module}"
    if runnable.configs is not None:
        folder = ROOT / "configs" / runnable.configs
        assert folder.is_dir() and any(folder.glob("*.yaml")), f"configs/{runnable.configs} has no config"
    path = ROOT / runnable.module.replace(".", "/")
    # a package runnable (python -m <package>) is read whole
    files = sorted(path.glob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    source = "\n".join(f.read_text() for f in files)
    # the module's own artifact folder: its STAGE constant, or the name it hands run_tool
    own = re.findall(r'^STAGE = "([\w-]+)"', source, flags=re.M) + re.findall(r'run_tool\("([\w-]+)"', source)
    assert set(own) <= {runnable.artifacts}, (
        f"{runnable.module} writes artifacts/{own[0]}/, the table says {runnable.artifacts}"
    )


def test_the_readme_stage_map_names_real_targets():
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Stage map", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(?:make )?([a-z]+(?:-[a-z]+)*)[`,]", table))
    missing = {t for t in named if t.startswith(("bench-", "search-", "prm-", "sft-", "classifiers-"))} - set(recipes())
    assert not missing, f"the README's stage map names targets that do not exist: {sorted(missing)}"


def test_by_module_names_the_table_when_a_module_is_missing():
    assert by_module("rl.train").target == "rl"
    with pytest.raises(KeyError, match="leanloop.runnables.RUNNABLES"):
        by_module("rl.nope")


def _package(runnable) -> str:
    return runnable.module.split(".")[0]


@pytest.mark.parametrize(
    "runnable",
    [r for r in RUNNABLES if r.artifacts is not None and r.module not in RULE_EXCEPTIONS],
    ids=lambda r: r.module,
)
def test_each_runnable_has_one_name(runnable):
    """artifacts/<name>/, make <name with - for _> (a stage's training run: <stage>-train when make
    <stage> runs the whole stage), configs/<stage>/<rest>/ for a name <stage>_<rest>."""
    name, stage = runnable.artifacts, _package(runnable)
    targets = {name.replace("_", "-")}
    if name == stage and recipes().get(stage, "").count("$(MAKE)") > 1:
        targets = {f"{stage}-train"}
    assert runnable.target in targets, f"{runnable.module}: make {runnable.target}, expected make {targets.pop()}"
    folder = f"{stage}/{name[len(stage) + 1 :]}" if name.startswith(stage + "_") else name
    if runnable.configs is not None:
        assert runnable.configs == folder, f"{runnable.module}: configs/{runnable.configs}, expected configs/{folder}"


def test_rule_exceptions_are_rows_that_break_the_rule():
    modules = {r.module for r in RUNNABLES}
    assert set(RULE_EXCEPTIONS) <= modules
    for module in RULE_EXCEPTIONS:
        row = by_module(module)
        assert row.artifacts is None or row.target != row.artifacts.replace("_", "-") or row.configs != row.artifacts, (
            module
        )


def test_renamed_names_are_gone_and_their_new_names_exist():
    artifacts = {r.artifacts for r in RUNNABLES}
    assert set(RENAMED_ARTIFACTS).isdisjoint(artifacts) and set(RENAMED_ARTIFACTS.values()) <= artifacts
    targets = set(recipes())
    assert set(RENAMED_TARGETS).isdisjoint(targets) and set(RENAMED_TARGETS.values()) <= targets
    for old, new in RENAMED_CONFIGS.items():
        assert not (ROOT / "configs" / old).exists() and (ROOT / "configs" / new).exists(), old


def test_the_makefile_refuses_each_renamed_target_naming_the_new_one():
    listed = re.search(r"^RENAMED_TARGETS := (.*?)\n(?!\t)", (ROOT / "Makefile").read_text(), flags=re.M | re.S).group(
        1
    )
    assert dict(pair.split("=") for pair in listed.replace("\\\n", " ").split()) == RENAMED_TARGETS
    for old, new in RENAMED_TARGETS.items():
        done = subprocess.run(["make", "-s", old], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and f"make {old} was renamed: use make {new}" in done.stderr


def test_an_old_artifact_reference_is_refused_naming_the_new_one():
    with pytest.raises(
        RenamedError,
        match=r"^artifacts://prm_data/default: artifacts/prm_data/ was renamed "
        r"artifacts/prm_label/; use artifacts://prm_label/default",
    ):
        resolve_run("artifacts://prm_data/default", "prm_label")
    for old, new in RENAMED_ARTIFACTS.items():
        message = renamed_artifact(old, f"artifacts://{old}/x")
        assert message and f"artifacts://{new}/x" in message and "\n" not in message


def test_an_old_config_path_is_refused_naming_the_new_one():
    with pytest.raises(
        ConfigFileError,
        match=r"configs/classify/ was renamed configs/classifiers/score/; "
        r"use configs/classifiers/score/default.yaml",
    ):
        check_config_files(["--config", "configs/classify/default.yaml"])
    for old, new in RENAMED_CONFIGS.items():
        moved = renamed_config(f"configs/{old}/default.yaml" if "." not in old else f"configs/{old}")
        assert moved and moved.endswith(f"configs/{new}/default.yaml" if "." not in old else f"configs/{new}")
        assert renamed_config(f"configs/{new}/default.yaml") is None
    # a renamed file is named as a file, not as a folder
    assert "configs/search/rl_round.yaml was renamed configs/search/expert_iteration_round.yaml;" in renamed_config(
        "configs/search/rl_round.yaml"
    )


def test_an_old_array_stage_is_refused_naming_the_new_one():
    with pytest.raises(ArrayError, match="stage 'sample' was renamed 'sft_sample'"):
        array_stage("sample")


def test_upstream_configs_follow_the_table_to_a_renamed_config_folder():
    built = [u for u in upstream_configs(ROOT / "configs/search/debug.yaml") if u[0] == "search_data"]
    assert built == [("search_data", "default", ROOT / "configs/search/data/default.yaml")]
    assert config_folder("search_data") == "search/data" and make_target("feedback_model") == "feedback-model"
