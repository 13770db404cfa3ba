"""The layering of the repository (docs/design.md): the shared package ``leanloop`` imports no stage; a stage
imports only ``leanloop`` and, of another stage, only its public loader ``<stage>.evaluator``; and no
two modules of the project import each other, directly or through others (a circle makes import
order matter and hides which module owns what)."""

from __future__ import annotations

import ast
from pathlib import Path

from leanloop.paths import REPO_ROOT

SHARED = "leanloop"
STAGES = (
    "data",
    "pretrain",
    "sft",
    "classifiers",
    "feedback_model",
    "autoformalizer",
    "rl",
    "search",
    "prm",
    "cluster",
)
TOOLS = ("bench",)  # benchmarks drive any stage, as make does
PUBLIC = "evaluator"
PACKAGES = (SHARED, *STAGES, *TOOLS)


def project_modules(root: Path = REPO_ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages."""
    modules = {}
    for package in PACKAGES:
        for file in sorted((root / package).rglob("*.py")) if (root / package).is_dir() else []:
            parts = list(file.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = file
    return modules


def imports_of(name: str, file: Path, modules: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(imported project module, line, run when imported) for each import in ``file``: the flag is
    False only for imports under ``if TYPE_CHECKING:`` (annotations, never executed). ``from a import
    b`` counts as an import of ``a.b`` when that is a module, else of ``a``; relative imports are
    resolved. Imports inside functions count: deferring an import hides a circle, it does not break it."""
    tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
    package = name if file.name == "__init__.py" else name.rpartition(".")[0]
    typing_only = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for child in ast.walk(node)
    }
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target:
                found.append((target, node.lineno, id(node) not in typing_only))
    return found


def layering_violations(root: Path = REPO_ROOT) -> list[str]:
    modules = project_modules(root)
    bad = []
    for name, file in modules.items():
        home = name.split(".")[0]
        for target, line, _ in imports_of(name, file, modules):
            top = target.split(".")[0]
            if top == home or top == SHARED or home in TOOLS:
                continue
            where = f"{file.relative_to(root)}:{line} imports {target}"
            if home == SHARED:
                bad.append(f"{where} (the shared package imports no stage or benchmark)")
            elif top in TOOLS:
                bad.append(f"{where} (benchmarks drive stages, never the other way)")
            elif target != f"{top}.{PUBLIC}" and not target.startswith(f"{top}.{PUBLIC}."):
                bad.append(f"{where} (a stage imports another stage only through {top}.{PUBLIC})")
    return bad


def import_cycles(root: Path = REPO_ROOT) -> list[list[str]]:
    """Circles among the project's modules (typing-only imports left out)."""
    modules = project_modules(root)
    graph = {
        name: sorted({t for t, _, runs in imports_of(name, file, modules) if runs and t != name})
        for name, file in modules.items()
    }
    # a package's __init__ importing its own submodules is how a package exposes them: not a circle
    for name in graph:
        graph[name] = [t for t in graph[name] if not t.startswith(name + ".")]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, []):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_shared_package_imports_no_stage_and_stages_meet_only_at_public_loaders():
    assert layering_violations() == []


def test_no_import_cycles_among_project_modules():
    assert import_cycles() == []


def test_the_checks_catch_what_they_forbid(tmp_path):
    """Both checks on a tiny fake repository that breaks every rule once."""
    for path, text in {
        "leanloop/__init__.py": "",
        "leanloop/util.py": "import sft.train\nimport bench.x\n",
        "bench/__init__.py": "",
        "bench/x.py": "import rl.module\n",
        "sft/__init__.py": "",
        "sft/train.py": "from rl import module\nfrom rl.evaluator import Loader\n",
        "sft/a.py": "from sft import b\n",
        "sft/b.py": "from . import a\n",
        "rl/__init__.py": "",
        "rl/module.py": "def f():\n    import sft.a\n",
        "rl/evaluator.py": "",
        "rl/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rl.y import T\n",
        "rl/y.py": "def g():\n    from rl import x\n",
    }.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    bad = layering_violations(tmp_path)
    assert any("leanloop/util.py:1 imports sft.train" in b for b in bad)
    assert any("leanloop/util.py:2 imports bench.x" in b for b in bad)
    assert not any(b.startswith("bench/") for b in bad)  # a benchmark may drive any stage
    assert any("sft/train.py:1 imports rl.module" in b for b in bad)
    assert not any("imports rl.evaluator" in b for b in bad)  # the public loader is allowed
    assert any("rl/module.py:2 imports sft.a" in b for b in bad)  # deferred imports are still imports
    assert import_cycles(tmp_path) == [["sft.a", "sft.b"]]  # rl.x -> rl.y is for annotations only
