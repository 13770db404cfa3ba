"""Every config field is read by the code, or removed: a field that a YAML file can set but nothing
reads is a setting that silently does nothing.

The config dataclasses are found statically (nothing is imported, so the check is fast): every
dataclass of a stage's ``config.py``; every class handed to ``leanloop.tool.parse_config`` /
``run_tool`` or to jsonargparse's ``add_class_arguments`` / ``add_dataclass_arguments``; the
dataclasses a training stage's LightningModule and LightningDataModule (``run_stage``) take in
``__init__``; and, from those, every dataclass a field's type or a base class names, transitively.

A field counts as read when the project's source outside ``tests/`` reads ``.field``, calls
``getattr(x, "field")``, or loops ``getattr`` over a literal list of names that holds it; except a
read in its own class's ``__post_init__`` (validating a value is not using it), ``self.field`` in a
class that does not derive from the config (that is the other class's own attribute) and
``module.field`` (a module's attribute). A section (a field whose type is another config, such as
search's ``lean: SessionConfig``) counts as read only in a module that names its config's class or a
config holding it: section names (``lean``, ``reward``, ``backend``) are read all over. The check
goes by name, so a plain field that shares its name with an attribute read elsewhere passes: it
catches the fields whose name nothing reads at all. ``READ_GENERICALLY`` lists the fields read by
other means, each with the reason.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from leanloop.paths import REPO_ROOT

PACKAGES = (
    "data",
    "pretrain",
    "sft",
    "classifiers",
    "feedback_model",
    "autoformalizer",
    "rl",
    "search",
    "prm",
    "leanloop",
    "cluster",
    "bench",
)
# calls whose class argument is parsed from YAML files and command-line options
PARSERS = ("parse_config", "parse_tool_config", "run_tool", "add_class_arguments", "add_dataclass_arguments")
TRAINING = "run_stage"  # run_stage(stage, ModuleClass, DataModuleClass, ...): LightningCLI
ATTRIBUTE_READERS = ("getattr", "hasattr", "attrgetter")

READ_GENERICALLY: dict[str, str] = {
    # "module.Class.field", or "module.Class.*" for every field: why no attribute access reads it
    "leanloop.lean.backends.BackendConfig.kimina": "the chosen kind's options: getattr(self, self.kind)",
    "leanloop.training.moe.MoEArchConfig.*": "to_config passes every field to transformers' Qwen3MoeConfig",
    "rl.curriculum.CurriculumConfig.replay": "rl.module reads it from the datamodule (curriculum_config.replay)",
}


@dataclass(frozen=True)
class Read:
    module: str
    owner: str | None
    """The innermost enclosing class."""
    function: str | None
    """The outermost enclosing function."""
    base: str | None
    """The name the attribute is read from (``self``, ``config``, a module), if it is a plain name."""


def _called(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any(
        ast.unparse(d.func if isinstance(d, ast.Call) else d) in ("dataclass", "dataclasses.dataclass")
        for d in node.decorator_list
    )


def _fields(node: ast.ClassDef) -> list[tuple[str, ast.expr]]:
    """(name, annotation) of each dataclass field."""
    return [
        (s.target.id, s.annotation)
        for s in node.body
        if isinstance(s, ast.AnnAssign)
        and isinstance(s.target, ast.Name)
        and not ast.unparse(s.annotation).startswith(("ClassVar", "typing.ClassVar", "InitVar"))
    ]


def _names_looped_into_getattr(node: ast.AST) -> list[str]:
    """``for key in ("a", "b"): getattr(x, key)`` (or a comprehension): the names ``a``, ``b``."""
    if isinstance(node, ast.For):
        loops = [(node.target, node.iter, node.body)]
    elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        loops = [(g.target, g.iter, parts + g.ifs) for g in node.generators]
    else:
        return []
    names = []
    for target, iterable, body in loops:
        if not isinstance(target, ast.Name) or not isinstance(iterable, (ast.Tuple, ast.List, ast.Set)):
            continue
        if any(
            isinstance(n, ast.Call)
            and _called(n) in ATTRIBUTE_READERS
            and any(isinstance(a, ast.Name) and a.id == target.id for a in n.args)
            for part in body
            for n in ast.walk(part)
        ):
            names += [e.value for e in iterable.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return names


class Project:
    """The project's source, parsed once: classes, import tables, attribute reads and the calls that
    parse configs."""

    def __init__(self, root: Path):
        self.classes: dict[str, dict[str, ast.ClassDef]] = {}
        self.imports: dict[str, dict[str, tuple[str, str]]] = {}
        self.module_names: dict[str, set[str]] = {}
        self.reads: dict[str, list[Read]] = {}
        self.parsed: list[tuple[str, ast.Name]] = []
        self.trained: list[tuple[str, ast.Name]] = []
        folders = [f for f in sorted(root.iterdir()) if f.is_dir() and f.name != "tests" and not f.name.startswith(".")]
        for file in (file for folder in folders for file in sorted(folder.rglob("*.py"))):
            parts = file.relative_to(root).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            package = module if parts[-1] == "__init__" else module.rpartition(".")[0]
            tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
            self.classes[module] = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
            self.imports[module], self.module_names[module] = {}, set()
            self._visit(tree, module, package, None, None)
        self.bases = {
            (module, name): self.names_in(module, *node.bases)
            for module, classes in self.classes.items()
            for name, node in classes.items()
        }

    def _visit(self, node: ast.AST, module: str, package: str, owner: str | None, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                self._visit(child, module, package, child.name, None)
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._visit(child, module, package, owner, function or child.name)
                continue
            names: list[str] = []
            base = None
            if isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Load):
                names, base = [child.attr], child.value.id if isinstance(child.value, ast.Name) else None
            elif isinstance(child, ast.Call):
                called = _called(child)
                if called in ATTRIBUTE_READERS:
                    names = [a.value for a in child.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                elif called in PARSERS or called == TRAINING:
                    calls = self.parsed if called in PARSERS else self.trained
                    calls += [(module, a) for a in child.args if isinstance(a, ast.Name)]
            elif isinstance(child, ast.Import):
                self.module_names[module] |= {a.asname or a.name.split(".")[0] for a in child.names}
            elif isinstance(child, ast.ImportFrom):
                source = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    source = ".".join(anchor + ([source] if source else []))
                for alias in child.names:
                    self.imports[module][alias.asname or alias.name] = (source, alias.name)
            else:
                names = _names_looped_into_getattr(child)
            for name in names:
                self.reads.setdefault(name, []).append(Read(module, owner, function, base))
            self._visit(child, module, package, owner, function)

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[str, str] | None:
        """The project class (module, name) that ``name`` means in ``module``, through imports and re-exports."""
        if name in self.classes.get(module, {}):
            return module, name
        if name in self.imports.get(module, {}) and depth < 10:
            return self.resolve(*self.imports[module][name], depth + 1)
        return None

    def names_in(self, module: str, *expressions: ast.AST | None) -> list[tuple[str, str]]:
        """The project classes that expressions (annotations, string annotations included) name."""
        found = []
        for node in (n for e in expressions if e is not None for n in ast.walk(e)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                try:
                    found += self.names_in(module, ast.parse(node.value, mode="eval"))
                except SyntaxError:
                    pass
            elif isinstance(node, ast.Name) and (target := self.resolve(module, node.id)):
                found.append(target)
        return found

    def roots(self, packages: tuple[str, ...]) -> set[tuple[str, str]]:
        """The classes of the packages' ``config`` modules, the classes parsed from options and the
        classes a training stage's modules take."""
        found = {
            (module, name)
            for module, classes in self.classes.items()
            if module.split(".")[0] in packages and module.split(".")[-1] == "config"
            for name in classes
        }
        found.update(target for module, arg in self.parsed for target in self.names_in(module, arg))
        for module, arg in self.trained:
            for target in self.names_in(module, arg):
                found.update(self.init_annotations(target))
        return found

    def init_annotations(self, target: tuple[str, str]) -> list[tuple[str, str]]:
        """The project classes that the ``__init__`` parameters of a class and its bases name."""
        found = []
        for statement in self.classes[target[0]][target[1]].body:
            if isinstance(statement, ast.FunctionDef) and statement.name == "__init__":
                arguments = statement.args.args + statement.args.kwonlyargs
                found += self.names_in(target[0], *(a.annotation for a in arguments))
        for base in self.bases[target]:
            found += self.init_annotations(base)
        return found

    def configs(self, packages: tuple[str, ...] = PACKAGES) -> dict[tuple[str, str], dict[str, list[tuple[str, str]]]]:
        """Every config dataclass -> its fields -> the project classes each one's type names: the roots
        and, transitively, what their fields' types and their bases name."""
        todo, found = sorted(self.roots(packages)), {}
        while todo:
            target = todo.pop()
            node = self.classes[target[0]][target[1]]
            if target in found or not _is_dataclass(node):
                continue
            found[target] = {name: self.names_in(target[0], annotation) for name, annotation in _fields(node)}
            todo += self.bases[target] + [t for types in found[target].values() for t in types]
        return {
            target: {name: [t for t in types if t in found] for name, types in fields.items()}
            for target, fields in found.items()
        }

    def named_in(self) -> dict[tuple[str, str], set[str]]:
        """Project class -> the modules that define or import it."""
        found: dict[tuple[str, str], set[str]] = {}
        for module in self.classes:
            for name in (*self.classes[module], *self.imports[module]):
                if target := self.resolve(module, name):
                    found.setdefault(target, set()).add(module)
        return found

    def derived(self, target: tuple[str, str]) -> set[tuple[str, str]]:
        """``target`` and every project class that derives from it."""
        mine, grew = {target}, True
        while grew:
            more = {cls for cls, bases in self.bases.items() if cls not in mine and mine.intersection(bases)}
            mine |= more
            grew = bool(more)
        return mine

    def counts_for(self, read: Read, owners: set[tuple[str, str]]) -> bool:
        """Whether ``read`` can be a read of a field of the config whose class and subclasses are ``owners``."""
        if read.base in self.module_names[read.module]:
            return False  # ``module.name``: a module's attribute
        if (read.module, read.owner) in owners:
            return read.function != "__post_init__"
        return read.base not in ("self", "cls")


@cache
def project(root: Path) -> Project:
    return Project(root)


def unread_fields(
    root: Path = REPO_ROOT, packages: tuple[str, ...] = PACKAGES, allowed: dict[str, str] | None = None
) -> list[str]:
    """``module.Class.field`` of every config field that nothing reads and no allowlist entry covers.

    A section (a field whose type is another config dataclass, ``lean: SessionConfig``) is held to a
    narrower rule, because section names (``lean``, ``reward``, ``backend``) are read all over: only
    a read in a module that names the config's class, a class deriving from it, or a config that
    holds it (directly or not) counts."""
    allowed = READ_GENERICALLY if allowed is None else allowed
    source = project(root)
    configs = source.configs(packages)
    named_in = source.named_in()
    holders = {target: {target} for target in configs}
    grew = True
    while grew:  # holders[t]: t and every config holding t in a field, transitively
        grew = False
        for parent, fields in configs.items():
            for types in fields.values():
                for child in types:
                    if not holders[parent] <= holders[child]:
                        holders[child] |= holders[parent]
                        grew = True
    unread = []
    for target, fields in configs.items():
        owners = source.derived(target)
        aware = set().union(
            *(named_in.get(c, set()) for o in owners if o in holders for c in holders[o]),
            *(named_in.get(o, set()) for o in owners),
        )
        key = ".".join(target)
        for name, types in fields.items():
            if f"{key}.{name}" in allowed or f"{key}.*" in allowed:
                continue
            reads = [read for read in source.reads.get(name, []) if source.counts_for(read, owners)]
            if types:
                reads = [read for read in reads if read.module in aware]
            if not reads:
                unread.append(f"{key}.{name}")
    return sorted(unread)


def test_every_config_field_is_read():
    unread = unread_fields()
    assert unread == [], (
        "config fields that nothing reads: wire each to what it claims to control, or remove "
        "it from its dataclass, the YAML files under configs/ and the docs\n  " + "\n  ".join(unread)
    )


def test_the_allowlist_holds_only_fields_read_generically():
    """An entry for a field that is gone, or that a plain attribute access reads after all, is stale."""
    configs = {f"{module}.{name}": fields for (module, name), fields in project(REPO_ROOT).configs().items()}
    unread = unread_fields(allowed={})
    for key in READ_GENERICALLY:
        owner, _, name = key.rpartition(".")
        assert owner in configs and (name == "*" or name in configs[owner]), f"{key}: no such config field"
        assert key in unread or (name == "*" and any(u.startswith(f"{owner}.") for u in unread)), (
            f"{key}: the code reads it plainly now; remove the allowlist entry"
        )


def test_the_discovery_finds_configs_of_every_kind():
    configs = {f"{module}.{name}" for module, name in project(REPO_ROOT).configs()}
    for key in (
        "data.config.SourceConfig",  # a stage's config.py, nested in a list
        "search.evaluate.SearchEvalConfig",  # a tool's config, given to run_tool
        "leanloop.lean.session.SessionConfig",  # a field's type and a base class
        "leanloop.lean.kimina.KiminaBackendConfig",  # nested two levels down
        "leanloop.training.optim.OptimConfig",  # a LightningModule's __init__ argument
        "leanloop.training.cli.LogConfig",  # add_dataclass_arguments
        "cluster.profile.ClusterProfile",
    ):  # add_class_arguments
        assert key in configs, key


def test_the_check_reports_unread_fields(tmp_path):
    """A tiny fake project with one field of each kind that does not count as read."""
    for path, text in {
        "demo/__init__.py": "",
        "demo/config.py": (
            "from dataclasses import dataclass, field\n"
            "from demo.inner import Inner\n"
            "@dataclass\nclass DemoConfig:\n"
            "    used: int = 1\n    unused: int = 2\n    validated: int = 3\n    other_self: int = 4\n"
            "    by_name: int = 5\n    looped: int = 6\n    module_attr: int = 7\n"
            "    inner: Inner = field(default_factory=Inner)\n    section: Inner | None = None\n"
            "    def __post_init__(self):\n        assert self.validated > 0\n"
            "    def helper(self):\n        return self.used\n"
        ),
        "demo/inner.py": "from dataclasses import dataclass\n@dataclass\nclass Inner:\n    deep: int = 0\n    kept: int = 0\n",
        "demo/tool.py": (
            "import os\n"
            "from demo.config import DemoConfig\n"
            "class Other:\n    def f(self):\n        return self.other_self, os.module_attr\n"
            "def main(config: DemoConfig):\n"
            "    return getattr(config, 'by_name'), config.inner.kept, [getattr(config, k) for k in ('looped',)]\n"
        ),
        "demo/other.py": "def g(x):\n    return x.section\n",  # no module that knows DemoConfig reads it
        "demo/report.py": (  # a tool's config, found through run_tool
            "from dataclasses import dataclass\nfrom leanloop.tool import run_tool\n"
            "@dataclass\nclass ReportConfig:\n    run: str = 'default'\n    title: str = ''\n"
            "def main(argv=None):\n    return run_tool('report', ReportConfig, lambda config, folder: config.run, argv)\n"
        ),
        "tests/test_demo.py": "def test(config):\n    return config.unused, config.inner.deep\n",
    }.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    unread = [
        "demo.config.DemoConfig.module_attr",
        "demo.config.DemoConfig.other_self",
        "demo.config.DemoConfig.section",
        "demo.config.DemoConfig.unused",
        "demo.config.DemoConfig.validated",
    ]
    assert unread_fields(tmp_path, packages=("demo",), allowed={}) == [
        *unread,
        "demo.inner.Inner.deep",
        "demo.report.ReportConfig.title",
    ]
    allowed = {"demo.inner.Inner.*": "why", "demo.report.ReportConfig.title": "why"}
    assert unread_fields(tmp_path, packages=("demo",), allowed=allowed) == unread
