"""One entry point for every non-training tool (corpus build, sampling, evaluations, reports):
``run_tool`` is :func:`leanloop.training.cli.run_stage`'s contract without Lightning.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from leanloop.artifacts import FINAL, MANIFEST, Manifest, ManifestError, read_manifest, run_dir, run_lock, run_problems

CONFIG_FILE = "config.yaml"
# resolved-config keys that do not change what a run produces
NOT_COMPARED = (
    "overwrite",
    "config",
    "ckpt_path",
    "dry_run",
    "plan",
    "verify",
    "restart",
    "checkpoint_every_n_minutes",
)

C = TypeVar("C")


class RunExistsError(SystemExit):
    """A finished run with another config holds the folder and ``--overwrite`` was not given."""


class ConfigFileError(ValueError):
    """A ``--config`` file that does not exist or is not YAML."""


def debugging() -> bool:
    """``LEANLOOP_DEBUG=1``: show tracebacks instead of one-line errors."""
    return os.environ.get("LEANLOOP_DEBUG", "") not in ("", "0")


def check_config_files(argv: list[str]) -> None:
    """Every ``--config FILE`` exists and parses as YAML; else :class:`ConfigFileError` naming the
    file and line (the parser's own message names neither)."""
    import yaml

    from leanloop.paths import repo_file
    from leanloop.runnables import renamed_config

    for index, arg in enumerate(argv):
        if arg == "--config" and index + 1 < len(argv):
            name = argv[index + 1]
        elif arg.startswith("--config="):
            name = arg.split("=", 1)[1]
        else:
            continue
        if name.lstrip().startswith(("{", "[")) and not Path(name).exists():
            continue  # inline YAML / JSON given as the value
        try:
            path = repo_file(name, "config file")
        except FileNotFoundError as error:
            raise ConfigFileError(renamed_config(name) or str(error)) from None
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(error, "problem", None) or str(error).splitlines()[0]
            raise ConfigFileError(f"config file {name} is not valid YAML: {problem}{where}") from None
        except UnicodeDecodeError:
            raise ConfigFileError(f"config file {name} is not UTF-8 text") from None
        if data is None:
            raise ConfigFileError(
                f"config file {name} is empty: a config is a mapping of options "
                "(model:, data:, trainer: ...); give it some or leave the --config out"
            )
        if not isinstance(data, dict):
            raise ConfigFileError(
                f"config file {name} holds a YAML {_yaml_kind(data)}; a config is a mapping of "
                "options (key: value lines such as 'trainer:' or 'run:', not '- item' lines)"
            )


def renamed_keys(*owners: tuple[str, Any]) -> dict[str, str]:
    """The ``RENAMED_KEYS`` (old dotted key -> the key that replaced it) that config classes declare,
    each under its section's prefix: ``renamed_keys(("", DataConfig))``, ``(("model.", GRPOModule), ...)``."""
    return {
        prefix + old: prefix + new
        for prefix, owner in owners
        for old, new in (getattr(owner, "RENAMED_KEYS", None) or {}).items()
    }


def _given_keys(argv: list[str]) -> list[tuple[str, str]]:
    """(where, dotted key) of every option the ``--config`` files and the command line set."""
    import yaml

    from leanloop.paths import repo_file

    def flat(value: Any, prefix: str) -> list[str]:
        """The dotted keys of the leaves, so that a message names the option itself."""
        if not isinstance(value, dict) or not value:
            return [prefix] if prefix else []
        keys: list[str] = []
        for key, inner in value.items():
            # LightningCLI's class_path / init_args form names the same options one level down
            name = prefix if key == "init_args" else f"{prefix}.{key}" if prefix else str(key)
            keys += flat(inner, name) if key != "class_path" else []
        return keys

    found: list[tuple[str, str]] = []
    for index, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        name, eq, value = arg[2:].partition("=")
        if name == "config":
            value = value if eq else (argv[index + 1] if index + 1 < len(argv) else "")
            try:
                data = yaml.safe_load(repo_file(value, "config file").read_text(encoding="utf-8"))
            except (OSError, ValueError, yaml.YAMLError):
                continue  # inline YAML, or a file check_config_files reports
            found += [(f"config file {value}", key) for key in flat(data, "")]
        else:
            found.append(("the command line", name.replace(".init_args", "")))
    return found


def _under(key: str, prefixes: dict[str, str]) -> tuple[str, str] | None:
    """(prefix, its value) of the first ``prefixes`` entry that ``key`` is or lies under."""
    return next(((old, new) for old, new in prefixes.items() if key == old or key.startswith(old + ".")), None)


def check_renamed_keys(argv: list[str], renamed: dict[str, str], linked: dict[str, str] | None = None) -> None:
    """Refuse an option set under a name it no longer has (``renamed``: old dotted key -> new) with
    one line naming the new key: jsonargparse's own error says only that the key is not expected.
    ``linked`` (link target -> its source, e.g. ``data.lean`` -> ``model.lean``): options the
    parser fills from another, refused with the key to set instead (itself renamed if it was)."""
    linked = linked or {}
    if not renamed and not linked:
        return
    for where, key in _given_keys(argv):
        if link := _under(key, linked):
            target, source = link
            instead = source + key[len(target) :]
            if rename := _under(instead, renamed):
                instead = rename[1] + instead[len(rename[0]) :]
            raise ConfigFileError(f"{where} sets {key}, which is linked from {source}: set {instead} instead")
        if rename := _under(key, renamed):
            raise ConfigFileError(f"{where} sets {key}, which is now {rename[1] + key[len(rename[0]) :]}")


def _yaml_kind(data: Any) -> str:
    return "list" if isinstance(data, list) else "string" if isinstance(data, str) else f"{type(data).__name__} value"


def short_usage(prog: str, make_target: str | None = None) -> str:
    how = f"make {make_target} CONFIG=FILE.yaml [RUN=NAME] [ARGS=...] or " if make_target else ""
    return (
        f"usage: {how}{prog} --config FILE.yaml [--run NAME] [--key.sub VALUE ...]  ({prog} --help lists every option)"
    )


_UNION = re.compile(r"Does not validate against any of the Union subtypes Subtypes: \[.*?\] Errors: - ")
_NONE_ALTERNATIVE = " - Expected a <class 'NoneType'>"


def short_parser_error(text: str) -> str:
    """jsonargparse's error for a bad value under an optional class (``model.init_args.x.y``) lists
    every Union alternative at every level, ~900 characters; what the user needs is the dotted key
    and the innermost reason: ``model.inputs.preamble: Expected a typing.Literal[...]. Got value: x``."""
    found = list(re.finditer(r'Parser key "([^"]+)": ', text))
    if not found or "Union subtypes" not in text:
        return text
    keys = [match.group(1) for match in found]
    reason = _UNION.sub("", text[found[-1].end() :])
    reason = reason.split(_NONE_ALTERNATIVE)[0].strip()
    given = re.search(r"Given value: (.*)$", text)
    if "value:" not in reason and given:
        reason += f" (got {given.group(1).strip()})"
    return f"{'.'.join(keys)}: {reason}"


def union_reason(text: str) -> str:
    """The reason inside jsonargparse's wrapper for a class that failed to build (a model whose
    ``__init__`` raised: ``Does not validate against any of the Union subtypes ... Errors: - <reason>
    - Expected a <class 'NoneType'> ...``): the reason alone."""
    if not text.startswith("Does not validate against any of the Union subtypes"):
        return text
    return _UNION.sub("", text).split(_NONE_ALTERNATIVE)[0].strip()


class ShortErrors:
    """Mixin for a jsonargparse parser: an argument error prints the error and a short usage (not
    the whole option list) and exits 2."""

    make_target: str | None = None

    def error(self, message: str, ex: Exception | None = None):  # type: ignore[override]
        if not getattr(self, "exit_on_error", True) or debugging():
            return super().error(message, ex)  # type: ignore[misc]
        text = short_parser_error(" ".join(line.strip() for line in str(message).splitlines() if line.strip()))
        sys.stderr.write(f"{self.prog}: error: {text}\n{short_usage(self.prog, self.make_target)}\n")  # type: ignore[attr-defined]
        sys.stderr.flush()
        raise SystemExit(2)


# what a user can cause: named files and runs that do not exist or are not what the stage needs,
# bad values; OSError covers a read-only or full artifacts folder. Not KeyError: a missing dict key
# is a bug far more often than a user's doing, and its one line would hide where it happened (an
# input that lacks a field raises a ValueError subclass such as leanloop.corpus.CorpusColumnsError).
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, ManifestError)


def is_disk_full(error: BaseException) -> bool:
    """An error that means the disk filled up: ``OSError`` ENOSPC / EDQUOT, or a writer that wraps it
    in its own type (safetensors' ``SafetensorError: ... No space left on device``)."""
    import errno

    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return "No space left on device" in str(error) or "Disk quota exceeded" in str(error)


def disk_full_message(error: BaseException, path: str | os.PathLike | None = None) -> str | None:
    """One line for a full disk, naming where the write went and the space left there; None for
    any other error."""
    if not is_disk_full(error):
        return None
    target = Path(path or getattr(error, "filename", None) or ".")
    probe = next((p for p in (target, *target.parents) if p.exists()), Path("."))
    try:
        free = shutil.disk_usage(probe).free
        left = f"{free / 2**30:.2f} GiB free" if free >= 2**30 else f"{free / 2**20:.1f} MiB free"
    except OSError:
        left = "free space unknown"
    return (
        f"no space left on the device writing {target} ({left} there): free some space or point "
        "LEANLOOP_ARTIFACTS at a larger disk, then rerun the same command (it resumes)"
    )


class DiskFullError(OSError):
    """A write that failed because its disk is full, however the writer reported it."""

    def __init__(self, path: str | os.PathLike, error: BaseException) -> None:
        import errno

        super().__init__(errno.ENOSPC, disk_full_message(error, path), str(path))

    def __str__(self) -> str:
        return self.strerror or ""


def cli_entry(main: Callable[..., Any], *args: Any, prog: str | None = None) -> int:
    """Run a command-line ``main``: an int it returns is the exit code; a user's mistake is one line
    and exit 2; Ctrl-C is one line and exit 130 (an unfinished run keeps what a rerun resumes from);
    with ``LEANLOOP_DEBUG=1`` the traceback is shown."""
    name = prog or Path(sys.argv[0]).stem
    try:
        code = main(*args)
        return code if isinstance(code, int) else 0  # a main may return its result
    except KeyboardInterrupt:
        if debugging():
            raise
        print(
            f"{name}: interrupted (Ctrl-C); the run is unfinished (no manifest) and keeps what it wrote "
            "(step checkpoints, journals): rerun the same command to resume it",
            file=sys.stderr,
        )
        return 130
    except SystemExit as exit_:
        if isinstance(exit_.code, str):  # raise SystemExit("message"): a refusal, one line
            print(exit_.code, file=sys.stderr)
            return 2
        raise
    except USER_ERRORS as error:
        if debugging():
            raise
        text = disk_full_message(error) or union_reason(" ".join(str(error).split())) or type(error).__name__
        print(f"{name}: {text} (LEANLOOP_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 2


def parse_config(
    cls: type[C],
    argv: list[str] | None = None,
    prog: str | None = None,
    description: str | None = None,
    *,
    overwrite: bool = False,
    positional: tuple[str, ...] = (),
) -> tuple[C, str]:
    """``--config a.yaml --config b.yaml --x.y value`` -> (an instance of dataclass ``cls``, the
    resolved config as YAML). With ``overwrite`` the parser also takes ``--overwrite``, returned as
    the instance's ``overwrite`` attribute. The fields named in ``positional`` are given bare, in
    that order (a list field takes one or more values)."""
    from jsonargparse import ActionConfigFile, ArgumentParser, set_parsing_settings

    class Parser(ShortErrors, ArgumentParser):
        pass

    set_parsing_settings(docstring_parse_attribute_docstrings=True)  # the fields' docstrings are the help
    parser = Parser(prog=prog, description=description)
    try:
        check_config_files(list(sys.argv[1:] if argv is None else argv))
        check_renamed_keys(list(sys.argv[1:] if argv is None else argv), renamed_keys(("", cls)))
    except ConfigFileError as error:
        parser.error(str(error))
    parser.add_argument("--config", action=ActionConfigFile, help="YAML config (repeatable, layered)")
    if overwrite:
        parser.add_argument(
            "--overwrite", type=bool, default=False, help="replace a finished run that had a different config"
        )
        add_verify_argument(parser)
    parser.add_class_arguments(cls, as_group=False, skip=set(positional) or None)
    add_positional_arguments(parser, cls, positional)
    namespace = parser.parse_args(argv)
    resolved = namespace.clone()
    del resolved["config"]
    if overwrite:
        del resolved["overwrite"]
        set_verify_mode(resolved.pop("verify"))
    instance = parser.instantiate_classes(namespace)
    values = {k: v for k, v in vars(instance).items() if k not in ("config", "overwrite", "verify")}
    config = cls(**values)
    if overwrite:
        object.__setattr__(config, "overwrite", bool(namespace.overwrite))
    return config, parser.dump(resolved)


def check_output_file(path: str | None, option: str = "--json") -> None:
    """Refuse, before any work, an output file that could not be written at the end (its folder
    missing or read-only, or the path a folder): a bench's numbers are never computed to be lost."""
    if path is None:
        return
    target = Path(path)
    folder = target.resolve().parent
    if target.is_dir():
        raise ValueError(f"{option} {path} is a folder; give a file path")
    if not folder.is_dir():
        raise ValueError(f"{option} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ValueError(f"{option} {path} is not writable")


def parse_stage_tool(
    cls: type[C],
    argv: list[str] | None = None,
    prog: str | None = None,
    description: str | None = None,
    *,
    forward: bool = True,
) -> tuple[C, list[str], list[str]]:
    """For a tool that runs a stage: (the tool's options, an instance of dataclass ``cls``; the stage's
    ``--config`` files, in order; the stage's other arguments). With ``forward`` every option that
    is not a field of ``cls`` (``--model.optim.lr 1e-4``) is the stage's, passed on as typed;
    without, it is an error like any unknown option."""
    import dataclasses

    own_names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    tokens = list(sys.argv[1:] if argv is None else argv)
    own: list[str] = []
    configs: list[str] = []
    stage: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        name, eq, value = token[2:].partition("=") if token.startswith("--") else ("", "", "")
        if name == "config":
            if not eq:
                index += 1
                value = tokens[index] if index < len(tokens) else ""
            if not value:
                raise SystemExit(f"{prog}: --config needs a file (a config of the stage)")
            configs.append(value)
        elif token in ("-h", "--help") or not forward or (token.startswith("--") and name in own_names):
            own.append(token)
            if token.startswith("--") and name in own_names and not eq and index + 1 < len(tokens):
                index += 1
                own.append(tokens[index])
        else:
            stage.append(token)  # a stage option, or the value that follows it
        index += 1
    config, _ = parse_config(cls, own, prog=prog, description=description)
    return config, configs, stage


def add_positional_arguments(parser: Any, cls: type, names: tuple[str, ...]) -> None:
    """The dataclass fields ``names`` as positional arguments, with the fields' docstrings as help."""
    import dataclasses
    import typing

    import docstring_parser

    if not names:
        return
    hints = typing.get_type_hints(cls)
    docs = {param.arg_name: param.description for param in docstring_parser.parse_from_object(cls).params}
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for name in names:
        if name not in known:
            raise TypeError(f"{cls.__name__} has no field {name!r} to take positionally")
        kind = hints[name]
        many = typing.get_origin(kind) is list
        parser.add_argument(
            name,
            type=typing.get_args(kind)[0] if many else kind,
            nargs="+" if many else None,
            metavar=name.upper(),
            help=docs.get(name),
        )


def add_verify_argument(parser: Any) -> None:
    from typing import Literal

    parser.add_argument(
        "--verify",
        type=Literal["fast", "full"] | None,
        default=None,
        help="how input runs are checked: fast (final/ sizes, input manifests; the default) or full (contents too)",
    )


def set_verify_mode(mode: str | None) -> None:
    """``--verify``: recorded for this process and the stages it starts (``LEANLOOP_VERIFY``)."""
    if mode:
        os.environ["LEANLOOP_VERIFY"] = mode


def comparable_config(text: str | None) -> str | None:
    """A resolved config without the keys that do not change what a run produces."""
    if text is None:
        return None
    import yaml

    data = yaml.safe_load(text) or {}
    for key in NOT_COMPARED:
        data.pop(key, None)
    return yaml.safe_dump(data, sort_keys=True)


def was_fast_dev_run(folder: Path) -> bool:
    try:
        return bool(json.loads((folder / MANIFEST).read_text()).get("fast_dev_run"))
    except (OSError, ValueError):
        return False


def finished_with_same_config(folder: Path, resolved: str, overwrite: bool, stage: str) -> bool:
    """The shared skip / overwrite decision: True when ``folder`` already holds a finished run of
    this config (skip it); raises :class:`RunExistsError` when it holds one of another config and
    ``overwrite`` is off; False when the run should (re)run."""
    if not (folder / MANIFEST).is_file() or overwrite or was_fast_dev_run(folder):
        return False
    previous = (folder / CONFIG_FILE).read_text() if (folder / CONFIG_FILE).is_file() else None
    if comparable_config(previous) == comparable_config(resolved):
        problems = run_problems(folder, read_manifest(folder))
        if problems:
            raise RunExistsError(
                f"[{stage}] {folder} finished with this config, but {'; '.join(problems)}. "
                "Pass --overwrite true to redo it, or choose another --run NAME."
            )
        print(
            f"[{stage}] {folder} already finished with this config; skipping (pass --overwrite true to redo it)",
            file=sys.stderr,
        )
        return True
    changed = changed_keys(previous, resolved)
    shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
    raise RunExistsError(
        f"[{stage}] {folder} already holds a finished run with a different config "
        f"(changed: {shown or 'the file cannot be compared'}). "
        "Choose another --run NAME, or pass --overwrite true to replace it."
    )


def changed_keys(before: str | None, after: str | None) -> list[str]:
    """The dotted keys whose values differ between two resolved configs (compared keys only)."""
    import yaml

    def flat(text: str | None) -> dict[str, Any]:
        try:
            data = yaml.safe_load(comparable_config(text) or "") or {}
        except yaml.YAMLError:
            return {}
        out: dict[str, Any] = {}

        def walk(value: Any, prefix: str) -> None:
            if isinstance(value, dict) and value:
                for key, inner in value.items():
                    walk(inner, f"{prefix}.{key}" if prefix else str(key))
            else:
                out[prefix] = value

        walk(data, "")
        return out

    old, new = flat(before), flat(after)
    return sorted(k for k in old.keys() | new.keys() if old.get(k, ...) != new.get(k, ...))


def start_run(folder: Path, resolved: str, clear_final: bool = True) -> None:
    """Mark ``folder`` unfinished (manifest removed first), clear its old outputs, write the config."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).unlink(missing_ok=True)  # an unfinished run has no manifest
    if clear_final:
        shutil.rmtree(folder / FINAL, ignore_errors=True)
    (folder / CONFIG_FILE).write_text(resolved)


@dataclass
class ToolResult:
    """What ``run_tool`` returns."""

    run_dir: Path
    skipped: bool
    config: Any
    manifest: dict[str, Any] | None = None
    value: Any = None
    """What the work returned beside its manifest (a report, counts)."""


def run_tool(
    stage: str,
    config_class: type[C],
    work: Callable[[C, Path], Manifest | tuple[Manifest, Any]],
    argv: list[str] | None = None,
    *,
    prog: str | None = None,
    description: str | None = None,
    run_of: Callable[[C], str] = lambda config: config.run,  # type: ignore[attr-defined]
    clear_final: bool = True,
) -> ToolResult:
    """Parse, open the run folder (skip / overwrite rule), run ``work(config, run_dir)``, write the
    manifest it returns last. ``work`` may return ``(manifest, value)`` to hand a value back.
    ``clear_final=False`` keeps ``final/`` of an unfinished run for tools that resume from it."""
    config, resolved = parse_config(
        config_class, argv, prog=prog or f"python -m {stage}", description=description, overwrite=True
    )
    return run_parsed_tool(
        stage,
        config,
        resolved,
        work,
        overwrite=getattr(config, "overwrite", False),
        run=run_of(config),
        clear_final=clear_final,
    )


def run_parsed_tool(
    stage: str,
    config: C,
    resolved: str,
    work: Callable[[C, Path], Any],
    *,
    run: str,
    overwrite: bool = False,
    clear_final: bool = True,
) -> ToolResult:
    """:func:`run_tool` for a config already parsed (a caller that built it in code)."""
    folder = run_dir(stage, run)
    with run_lock(folder):
        if finished_with_same_config(folder, resolved, overwrite, stage):
            return ToolResult(folder, skipped=True, config=config, manifest=read_manifest(folder))
        start_run(folder, resolved, clear_final=clear_final)
        returned = work(config, folder)
        manifest, value = returned if isinstance(returned, tuple) else (returned, None)
        if not isinstance(manifest, Manifest):
            raise TypeError(f"{stage}: the tool's work must return its Manifest (got {type(manifest).__name__})")
        manifest.write(folder)
    return ToolResult(folder, skipped=False, config=config, manifest=read_manifest(folder), value=value)


__all__ = [
    "CONFIG_FILE",
    "ConfigFileError",
    "DiskFullError",
    "disk_full_message",
    "is_disk_full",
    "RunExistsError",
    "ShortErrors",
    "changed_keys",
    "check_config_files",
    "add_positional_arguments",
    "add_verify_argument",
    "cli_entry",
    "ToolResult",
    "comparable_config",
    "finished_with_same_config",
    "parse_config",
    "parse_stage_tool",
    "run_parsed_tool",
    "run_tool",
    "set_verify_mode",
    "start_run",
    "was_fast_dev_run",
]
