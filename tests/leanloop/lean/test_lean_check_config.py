"""The ``lean:`` block (:class:`leanloop.lean.check.LeanConfig`): the same fields in every stage that
checks programs with Lean, each stage's defaults unchanged, and the options' old names refused in
one line that names the new key."""

from __future__ import annotations

import inspect
import json
from dataclasses import fields

import pytest

from leanloop.lean.check import LeanConfig
from leanloop.paths import REPO_ROOT


def _stage_blocks() -> dict[str, LeanConfig]:
    """Each verifying stage's default ``lean:`` block, read from its config class or module signature."""
    from autoformalizer.config import AutoformalizerConfig
    from autoformalizer.grpo import AutoformalizerGRPOModule
    from bench.lean_check.target import LeanCheckConfig
    from data.config import DataConfig
    from prm.config import LabelConfig
    from rl.module import GRPOModule
    from search.evaluate import SearchEvalConfig
    from sft.config import EvaluateConfig

    blocks = {
        name: make().lean
        for name, make in (
            ("data", DataConfig),
            ("sft", lambda: EvaluateConfig(samples="x")),
            ("autoformalizer", AutoformalizerConfig),
            ("prm", LabelConfig),
            ("search", SearchEvalConfig),
            ("lean_check", LeanCheckConfig),
        )
    }
    for name, module in (("rl", GRPOModule), ("autoformalizer_grpo", AutoformalizerGRPOModule)):
        blocks[name] = inspect.signature(module.__init__).parameters["lean"].default
    return blocks


def test_every_verifying_stage_has_the_same_block_with_its_old_defaults():
    blocks = _stage_blocks()
    assert all(type(b) is LeanConfig for b in blocks.values()), blocks
    names = [f.name for f in fields(LeanConfig)]
    assert names == ["backend", "profile", "heartbeats", "concurrency", "timeout"]
    summary = {k: (b.profile, b.concurrency, b.timeout, b.heartbeats, b.backend.kind) for k, b in blocks.items()}
    assert summary == {
        "data": ("collection", 16, 60.0, "profile", "replay"),
        "sft": ("rl", 8, 60.0, "profile", "replay"),
        "rl": ("rl", 8, 60.0, "profile", "replay"),
        "autoformalizer": ("statement", 8, 60.0, "profile", "replay"),
        "autoformalizer_grpo": ("statement", 8, 60.0, "profile", "replay"),
        "prm": ("collection", 8, 60.0, "profile", "replay"),
        "search": ("rl", 8, 60.0, "profile", "replay"),
        "lean_check": ("collection", 8, 300.0, "profile", "replay"),
    }


def test_the_verifier_and_policy_come_from_the_block():
    from leanloop.lean.acceptance.policy import HARNESS_HEARTBEATS
    from leanloop.lean.replay import ReplayBackend

    block = LeanConfig(profile="rl", concurrency=3, timeout=12.0)
    verifier = block.verifier()
    assert isinstance(verifier.backend, ReplayBackend)
    assert (verifier.policy.name, verifier.concurrency, verifier.timeout) == ("rl", 3, 12.0)
    assert verifier.policy.profile.heartbeats == HARNESS_HEARTBEATS  # the profile's own
    assert LeanConfig(profile="rl", heartbeats=None).policy().profile.heartbeats is None
    assert block.verifier(timeout=99.0).timeout == 99.0
    assert block.policy("collection").name == "collection"
    with pytest.raises(ValueError, match="concurrency"):
        LeanConfig(concurrency=0)


def test_stages_refuse_a_profile_their_checks_cannot_use():
    from autoformalizer.config import TypecheckConfig

    with pytest.raises(ValueError, match="statement profile only"):
        TypecheckConfig().checker(LeanConfig(profile="rl"))
    from rl.module import GRPOModule

    with pytest.raises(ValueError, match="hardened rl profile only"):
        GRPOModule(lean=LeanConfig(profile="collection"))


def _tool_error(capsys, cls, argv) -> str:
    from leanloop.tool import parse_config

    with pytest.raises(SystemExit) as exit_:
        parse_config(cls, argv, prog="tool")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 2, err  # the error and a short usage
    return err.splitlines()[0]


def test_old_option_names_are_refused_in_one_line_naming_the_new_key(capsys, tmp_path):
    from autoformalizer.config import AutoformalizerConfig
    from bench.lean_check.target import LeanCheckConfig
    from prm.config import LabelConfig
    from search.evaluate import SearchEvalConfig
    from search.expert_iteration import ExpertIterationConfig
    from sft.config import EvaluateConfig

    sft = tmp_path / "sft_eval.yaml"
    sft.write_text(json.dumps({"samples": "x", "verifier": {"profile": "rl", "concurrency": 4}}))
    assert _tool_error(capsys, EvaluateConfig, ["--config", str(sft)]).endswith(
        f"config file {sft} sets verifier.profile, which is now lean.profile"
    )
    search = tmp_path / "search_eval.yaml"
    search.write_text("lean:\n  lean_version: v4.9.0\nverifier_profile: collection\n")
    assert "sets lean.lean_version, which is now repl.lean_version" in _tool_error(
        capsys, SearchEvalConfig, ["--config", str(search)]
    )
    assert "sets lean.timeout, which is now repl.timeout" in _tool_error(
        capsys, ExpertIterationConfig, ["--lean.timeout", "5"]
    )
    assert "sets verifier.kind, which is now lean.backend.kind" in _tool_error(
        capsys, SearchEvalConfig, ["--verifier.kind=local"]
    )
    assert "sets backend.kind, which is now lean.backend.kind" in _tool_error(
        capsys, LabelConfig, ["--backend.kind", "local"]
    )
    assert "sets lean.header, which is now typecheck.header" in _tool_error(
        capsys, AutoformalizerConfig, ["--lean.header", "import Mathlib"]
    )
    assert "sets workers, which is now lean.concurrency" in _tool_error(capsys, LeanCheckConfig, ["--workers", "2"])


def test_a_training_stage_refuses_old_names_too(capsys, tmp_path):
    from rl.train import run

    for argv, said in (
        (["--model.lean.workers", "4"], "sets model.lean.workers, which is now model.lean.concurrency"),
        (["--model.lean.sandbox=weak"], "sets model.lean.sandbox, which is now model.reward_checks.sandbox"),
        (
            ["--data.lean.workers", "2"],
            "sets data.lean.workers, which is linked from model.lean: set model.lean.concurrency instead",
        ),
        (["--data.lean.timeout", "5"], "which is linked from model.lean: set model.lean.timeout instead"),
        (["--data.lean.sandbox=weak"], "linked from model.lean: set model.reward_checks.sandbox instead"),
    ):
        with pytest.raises(SystemExit) as exit_:
            run(["--config", str(REPO_ROOT / "configs/rl/debug.yaml"), *argv, "--dry_run", "true"])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, err
    old = tmp_path / "old.yaml"
    old.write_text("model:\n  lean:\n    latency: recorded\n")
    with pytest.raises(SystemExit):
        run(["--config", str(REPO_ROOT / "configs/rl/debug.yaml"), "--config", str(old), "--dry_run", "true"])
    assert "sets model.lean.latency, which is now model.reward_checks.latency" in capsys.readouterr().err
