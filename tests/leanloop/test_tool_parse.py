"""``leanloop.tool``'s two command-line forms on the tools that use them: positional fields
(``leanloop.lean.judge ROWS OUT``) and a stage-running tool's split (``cluster.submit``), and the
``leanloop`` dispatcher's one-line refusals."""

from __future__ import annotations

import pytest

from cluster.submit import SubmitConfig
from leanloop.cli import main as leanloop_main
from leanloop.lean.judge import JudgeRowsConfig
from leanloop.tool import parse_config, parse_stage_tool


def test_positional_fields_and_options_in_any_order():
    config, resolved = parse_config(
        JudgeRowsConfig,
        ["in.jsonl", "--all", "true", "out.jsonl", "--lake_path", "/x/lake"],
        positional=("rows", "out"),
    )
    assert (config.rows, config.out, config.all, config.lake_path) == ("in.jsonl", "out.jsonl", True, "/x/lake")
    assert "rows: in.jsonl" in resolved and config.concurrency == JudgeRowsConfig().concurrency


def test_a_missing_positional_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_config(JudgeRowsConfig, ["in.jsonl"], prog="judge", positional=("rows", "out"))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "required" in err and "out" in err.splitlines()[0]


def test_the_help_is_the_fields_docstrings(capsys):
    with pytest.raises(SystemExit):
        parse_config(SubmitConfig, ["--help"], prog="python -m cluster.submit")
    assert "Block until the job ends" in capsys.readouterr().out


def test_a_stage_tool_keeps_its_options_and_passes_the_rest_on():
    argv = [
        "--stage",
        "pretrain",
        "--config",
        "a.yaml",
        "--model.optim.lr",
        "1e-4",
        "--config=b.yaml",
        "--dry_run",
        "true",
        "--trainer.max_steps=10",
        "--run",
        "r",
    ]
    config, configs, rest = parse_stage_tool(SubmitConfig, argv)
    assert (config.stage, config.run, config.dry_run) == ("pretrain", "r", True)
    assert configs == ["a.yaml", "b.yaml"]
    assert rest == ["--model.optim.lr", "1e-4", "--trainer.max_steps=10"]
    with pytest.raises(SystemExit):  # without forward an unknown option is the parser's error
        parse_stage_tool(SubmitConfig, argv, forward=False)


def test_the_dispatcher_refuses_in_one_line(capsys):
    assert leanloop_main(["nosuch"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert leanloop_main(["trace"]) == 2
    assert "annotate, verdict" in capsys.readouterr().err
    assert leanloop_main(["--help"]) == 0
    assert "mathlib-index" in capsys.readouterr().out


@pytest.mark.parametrize(
    "option, value, expected",
    [
        (
            "--model.init_args.inputs.preamble",
            "bogus",
            "model.inputs.preamble: Expected a typing.Literal['keep', 'drop_header', 'drop_header_and_docstring']. "
            "Got value: bogus",
        ),
        ("--model.init_args.optim.lr", "abc", "model.optim.lr: Expected a <class 'float'>. Got value: abc"),
        ("--trainer.max_epochs", "abc", "trainer.max_epochs: Expected a <class 'int'> (got abc)"),
    ],
)
def test_a_bad_value_under_an_optional_class_names_its_key_and_reason(capsys, option, value, expected):
    # jsonargparse lists every Union alternative at every level (~900 characters on one line)
    from classifiers.train import run
    from leanloop.paths import REPO_ROOT

    with pytest.raises(SystemExit) as exit_:
        run(["--config", str(REPO_ROOT / "configs/classifiers/debug.yaml"), option, value])
    assert exit_.value.code == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert first == f"python -m classifiers.train: error: {expected}"


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "is empty: a config is a mapping of options"),
        ("# only a comment\n", "is empty"),
        ("- trainer\n- model\n", "holds a YAML list; a config is a mapping"),
        ("just words\n", "holds a YAML string"),
    ],
)
def test_a_config_file_that_is_not_a_mapping_says_what_a_config_is(text, says, tmp_path):
    from leanloop.tool import ConfigFileError, check_config_files

    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigFileError, match=f"config file {path} {says}"):
        check_config_files(["--config", str(path)])
