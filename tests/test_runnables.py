"""The table of runnables (leanloop/runnables.py) against the places that name them: the Makefile's
recipes, each module's artifact-folder constant, the config folders and the README's stage map."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from leanloop.runnables import RUNNABLES, by_module

ROOT = Path(__file__).resolve().parents[1]
# modules a recipe runs that are not runnables of their own: the installers, the test runner, the
# array wrapper of a stage (cluster.array names the stage), and the benchmarks (bench/, no run folder)
NOT_RUNNABLES = re.compile(r"^(pip|pytest|cluster\.array|leanloop\.lean\.standins\.|bench\.(?!lean_check$|gpu_check$))")


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
    assert set(own) <= {runnable.artifacts}, f"{runnable.module} writes artifacts/{own[0]}/, the table says {runnable.artifacts}"


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
