"""Every stage config parses against its stage's signature, and every stage's debug.yaml trains.

Generic over stages: a folder configs/<stage>/ whose <stage>/train.py exists is a Lightning stage;
its train.py exposes ``run(args)`` (leanloop.training.cli.run_stage). configs/data (not Lightning),
configs/sweeps and configs/strategy (cluster tooling) are tested by their owners; YAMLs in
subfolders (e.g. configs/pretrain/corpus/) belong to other tools and are tested with them.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import types
import typing

import lightning as L
import pytest
import yaml

from leanloop.artifacts import upstream_configs
from leanloop.paths import REPO_ROOT

NOT_LIGHTNING = {"data", "sweeps", "strategy"}
# the Lightning stages of the issues; a stage is discovered by configs/<stage>/ + <stage>/train.py
EXPECTED_STAGES = {"pretrain", "classifiers", "sft", "feedback_model", "rl", "search", "prm"}


def _stages() -> list[str]:
    return sorted(
        p.name
        for p in (REPO_ROOT / "configs").iterdir()
        if p.is_dir() and p.name not in NOT_LIGHTNING and (REPO_ROOT / p.name / "train.py").is_file()
    )


def _stage_run(stage: str):
    module = importlib.import_module(f"{stage}.train")
    if not callable(getattr(module, "run", None)):
        pytest.fail(f"{stage}/train.py must expose run(args) calling leanloop.training.cli.run_stage")
    return module.run


STAGE_CONFIGS = [
    (stage, path) for stage in _stages() for path in sorted((REPO_ROOT / "configs" / stage).glob("*.yaml"))
]
DEBUG_CONFIGS = [stage for stage in _stages() if (REPO_ROOT / "configs" / stage / "debug.yaml").is_file()]


def test_every_stage_is_discovered():
    # guards the discovery itself: if it found nothing, the parametrized tests would silently vanish
    stages = set(_stages())
    assert EXPECTED_STAGES <= stages
    if (REPO_ROOT / "autoformalizer" / "train.py").is_file():
        assert "autoformalizer" in stages
    assert ("pretrain", REPO_ROOT / "configs/pretrain/paper.yaml") in STAGE_CONFIGS
    assert {stage for stage, _ in STAGE_CONFIGS} == stages  # every stage has configs, all parsed
    assert EXPECTED_STAGES <= set(DEBUG_CONFIGS)  # and each issue's stage has a debug.yaml


def _plain(value: typing.Any) -> typing.Any:
    """A default as the parser dumps it: dataclasses as dicts, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _strip_optional(hint: typing.Any) -> typing.Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _expected(value: typing.Any, hint: typing.Any) -> typing.Any:
    """What the parser must resolve a written value of type ``hint`` to, exactly: a dataclass is
    the written fields plus the dataclass's own defaults for the rest, a list is element by element
    (a list of dataclasses: each element completed by the element type's defaults)."""
    hint = _strip_optional(hint)
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        hints = typing.get_type_hints(hint)
        out = {}
        for f in dataclasses.fields(hint):
            if not f.init:
                continue
            if f.name in value:
                out[f.name] = _expected(value[f.name], hints[f.name])
            elif f.default is not dataclasses.MISSING:
                out[f.name] = _plain(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = _plain(f.default_factory())
        unknown = set(value) - set(out)
        assert not unknown, f"{hint.__name__} has no fields {sorted(unknown)}"
        return out
    if typing.get_origin(hint) is list and isinstance(value, list):
        (item,) = typing.get_args(hint) or (typing.Any,)
        return [_expected(v, item) for v in value]
    return _plain(value)


def _assert_written_survives(written: typing.Any, resolved: typing.Any, where: str) -> None:
    """For untyped mappings (trainer options, ``dict[str, Any]``): every written key, recursively."""
    if isinstance(written, dict) and isinstance(resolved, dict):
        for key, value in written.items():
            assert key in resolved, f"{where}.{key} is missing from the resolved config"
            _assert_written_survives(value, resolved[key], f"{where}.{key}")
    elif isinstance(written, str) and isinstance(resolved, str) and where.endswith("class_path"):
        assert resolved == written or resolved.endswith("." + written), where
    else:
        assert resolved == written, f"{where}: wrote {written!r}, resolved {resolved!r}"


def _stage_classes(stage: str, resolved: dict) -> dict[str, type]:
    """The LightningModule / LightningDataModule classes the stage's entry point hands run_stage
    (subclass mode: the class the config's class_path names)."""
    module = importlib.import_module(f"{stage}.train")
    found: dict[str, type] = {}
    for section, base in (("model", L.LightningModule), ("data", L.LightningDataModule)):
        picked = resolved.get(section) or {}
        if isinstance(picked, dict) and "class_path" in picked:
            module_name, _, name = picked["class_path"].rpartition(".")
            found[section] = getattr(importlib.import_module(module_name), name)
            continue
        candidates = {
            v
            for v in vars(module).values()
            if inspect.isclass(v) and issubclass(v, base) and v not in (L.LightningModule, L.LightningDataModule)
        }
        if len(candidates) == 1:
            found[section] = candidates.pop()
    return found


def _check_section(written: dict, resolved: dict, cls: type | None, where: str) -> None:
    if "class_path" in written or "init_args" in written:
        _assert_written_survives({k: v for k, v in written.items() if k == "class_path"}, resolved, where)
        written, resolved = written.get("init_args") or {}, resolved.get("init_args") or {}
    try:
        hints = typing.get_type_hints(cls.__init__) if cls is not None else {}
    except NameError:  # an annotation only importable under TYPE_CHECKING: compare untyped
        hints = {}
    for key, value in written.items():
        assert key in resolved, f"{where}.{key} is missing from the resolved config"
        hint = _strip_optional(hints.get(key))
        if hint is not None and (dataclasses.is_dataclass(hint) or typing.get_origin(hint) is list):
            # typed: a dataclass with its defaults filled in, a list compared whole
            expected = _expected(value, hint)
            assert resolved[key] == expected, f"{where}.{key}: resolved {resolved[key]!r}, expected {expected!r}"
        else:
            _assert_written_survives(value, resolved[key], f"{where}.{key}")


@pytest.mark.parametrize("stage,path", STAGE_CONFIGS, ids=[f"{s}/{p.name}" for s, p in STAGE_CONFIGS])
def test_config_parses_against_stage_signature(stage, path, artifacts, capsys):
    result = _stage_run(stage)(["--config", str(path), "--dry_run", "true"])
    resolved = yaml.safe_load(result.config)
    # what the file sets survives into the resolved config (nothing ignored, nothing reinterpreted):
    # typed sections (dataclasses, lists of dataclasses) exactly, with their declared defaults
    written = yaml.safe_load(path.read_text()) or {}
    classes = _stage_classes(stage, resolved)
    for section in ("model", "data"):
        if written.get(section):
            _check_section(written[section], resolved[section], classes.get(section), f"{path.name}: {section}")
    _assert_written_survives(written.get("trainer") or {}, resolved["trainer"], f"{path.name}: trainer")
    for key, value in written.items():
        if key not in ("model", "data", "trainer", "run"):
            _assert_written_survives(value, resolved[key], f"{path.name}: {key}")
    assert resolved["run"] == written.get("run", path.stem)
    assert not artifacts.exists()  # a dry run writes nothing


def test_typed_sections_are_compared_exactly_with_their_defaults(artifacts):
    """The check above is exact where types are known: debug.yaml's corpus source (a JsonlSource in
    a list) resolves with the dataclass's default name_field, and a changed default, an extra
    element or a dataclass field the file did not write but the parser changed are all caught."""
    import copy

    path = REPO_ROOT / "configs/pretrain/debug.yaml"
    resolved = yaml.safe_load(_stage_run("pretrain")(["--config", str(path), "--dry_run", "true"]).config)
    written = yaml.safe_load(path.read_text())
    data_class = _stage_classes("pretrain", resolved)["data"]
    assert data_class.__name__ == "PretrainData"
    _check_section(written["data"], resolved["data"], data_class, "data")
    assert "name_field" not in written["data"]["corpus"]["jsonl"][0]
    assert resolved["data"]["corpus"]["jsonl"][0]["name_field"] == "name"  # JsonlSource's default
    for tamper in (
        lambda c: c["jsonl"][0].update(name_field=None),
        lambda c: c["jsonl"].append(copy.deepcopy(c["jsonl"][0])),
        lambda c: c.update(validation_fraction=0.5),
    ):
        changed = copy.deepcopy(resolved)
        tamper(changed["data"]["corpus"])
        with pytest.raises(AssertionError, match="data.corpus"):
            _check_section(written["data"], changed["data"], data_class, "data")


def test_one_batch_means_one_batch_whatever_was_imported_first(artifacts, monkeypatch):
    """typing caches unions by equality, so a process that imported scikit-learn (sklearn.metrics)
    before Lightning has Trainer annotated with a float-first ``Union[float, int, None]``, and
    ``limit_val_batches 1`` parsed as 1.0 = ALL batches (seen in a pytest worker).
    leanloop.training.cli restores Lightning's int-first order; here the float-first annotation is
    put in place the way that import leaves it, in this process."""
    from lightning.pytorch import Trainer

    from leanloop.training import cli

    float_first = typing.Union[float, int, None]
    assert typing.get_args(float_first)[0] is float
    for name in ("limit_val_batches", "limit_train_batches"):
        monkeypatch.setitem(Trainer.__init__.__annotations__, name, float_first)
    cli._restore_int_first_batch_limits()
    result = _stage_run("pretrain")(
        [
            "--config",
            str(REPO_ROOT / "configs/pretrain/debug.yaml"),
            "--trainer.limit_val_batches",
            "1",
            "--trainer.limit_train_batches",
            "0.5",
            "--dry_run",
            "true",
        ]
    )
    trainer = yaml.safe_load(result.config)["trainer"]
    assert type(trainer["limit_val_batches"]) is int and trainer["limit_val_batches"] == 1  # one batch
    assert trainer["limit_train_batches"] == 0.5  # and a fraction stays a fraction


def test_unknown_key_is_rejected(artifacts, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  learning_rate: 0.1\n")
    with pytest.raises(SystemExit):
        _stage_run("pretrain")(
            ["--config", str(REPO_ROOT / "configs/pretrain/debug.yaml"), "--config", str(bad), "--dry_run", "true"]
        )


def test_layered_configs_and_overrides(artifacts, tmp_path):
    layer = tmp_path / "layer.yaml"
    layer.write_text("data:\n  max_length: 64\ntrainer:\n  max_steps: 2\n")
    result = _stage_run("pretrain")(
        [
            "--config",
            str(REPO_ROOT / "configs/pretrain/debug.yaml"),
            "--config",
            str(layer),
            "--model.optim.lr",
            "0.5",
            "--dry_run",
            "true",
        ]
    )
    resolved = yaml.safe_load(result.config)
    assert resolved["data"]["max_length"] == 64  # later file wins
    assert resolved["data"]["batch_size"] == 2  # earlier file kept where not overridden
    assert resolved["model"]["optim"]["lr"] == 0.5  # dotted override wins over both
    assert resolved["run"] == "debug+layer"
    assert resolved["data"]["base"]["name"] == "qwen3-tiny"  # linked from model.base


def _build_upstream(config_path) -> None:
    """Build the artifacts a debug config names (``artifacts://<stage>/<run>``) from
    configs/<stage>/<run>.yaml first, the way make chains stages: data and search_data with their
    tools, a training stage with fast_dev_run."""
    for stage, _, upstream in upstream_configs(config_path):
        if stage == "data":
            from data.build import build, parse_config

            build(parse_config(["--config", str(upstream)]), progress=False)
        elif stage == "search_data":
            from search.build_data import main as build_search_data

            build_search_data(["--config", str(upstream)])
        else:
            _stage_run(stage)(["--config", str(upstream), "--trainer.fast_dev_run", "true"])


@pytest.mark.parametrize("stage", DEBUG_CONFIGS)
def test_debug_config_fast_dev_run(stage, artifacts):
    _build_upstream(REPO_ROOT / "configs" / stage / "debug.yaml")
    result = _stage_run(stage)(
        ["--config", str(REPO_ROOT / "configs" / stage / "debug.yaml"), "--trainer.fast_dev_run", "true"]
    )
    assert result.run_dir == artifacts / stage / "debug"
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["stage"] == stage and manifest["fast_dev_run"] is True
    assert (result.run_dir / "config.yaml").is_file()
    if "model" in manifest:  # a model run exports Hugging Face files that from_pretrained reads
        assert (result.run_dir / "final" / "config.json").is_file()
