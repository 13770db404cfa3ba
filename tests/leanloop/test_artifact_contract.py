"""The artifact contract tried the way a user meets it: bad run names, two writers on one run folder,
manifests whose inputs or outputs changed, builds that must not finish, and the one-line errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import pytest

from cluster.command import CommandError, StageRun
from leanloop.artifacts import (Manifest, RunLockedError, RunNameError, check_run_name, default_run_name,
                                run_dir, run_lock)
from leanloop.paths import REPO_ROOT
from leanloop.tool import run_tool

BAD_NAMES = ["../../x", "..", ".", "/abs", "", "a/b", "a b", "x\n"]


@pytest.fixture
def artifacts(tmp_path, monkeypatch):
    root = tmp_path / "artifacts"
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(root))
    return root


@dataclass
class EchoConfig:
    run: str = "echo"
    words: list[str] = field(default_factory=list)


def _echo(config, folder):
    (folder / "final").mkdir(exist_ok=True)
    (folder / "final" / "words.json").write_text(json.dumps(config.words))
    return Manifest(stage="echo", run=config.run)


# -- run names -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_run_name_is_one_path_segment(name, artifacts, tmp_path):
    with pytest.raises(RunNameError, match="one folder name"):
        check_run_name(name)
    with pytest.raises(RunNameError):
        run_dir("data", name)
    with pytest.raises(RunNameError):
        run_tool("echo", EchoConfig, _echo, ["--run", name])
    with pytest.raises(CommandError, match="one folder name"):  # cluster submission and sweeps
        StageRun(stage="pretrain", configs=["configs/pretrain/debug.yaml"], run=name)
    assert not artifacts.exists() and not (tmp_path / "x").exists()  # nothing written anywhere


def test_good_run_names_include_default_and_sweep_names(artifacts):
    for name in ("default", "paper+zero2", "lr_sweep__lr=0.001", "v1.2-final"):
        assert check_run_name(name) == name
    assert default_run_name(["configs/sft/paper.yaml", "configs/strategy/zero2.yaml"]) == "paper+zero2"
    assert run_dir("data", "default") == artifacts / "data" / "default"


def test_a_training_stage_refuses_a_bad_run_name_before_building_anything(artifacts):
    from pretrain.train import run

    with pytest.raises(SystemExit, match="one folder name"):
        run(["--config", str(REPO_ROOT / "configs/pretrain/debug.yaml"), "--run", "../escape"])
    assert not artifacts.exists()


# -- one writer per run folder ---------------------------------------------------------------------
HOLD = ("import sys, time\n"
        "from leanloop.artifacts import run_lock\n"
        "with run_lock(sys.argv[1]):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(60)\n")


def _holder(folder):
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_writer_fails_at_once_naming_the_holder_and_a_dead_holders_lock_is_taken(artifacts):
    folder = artifacts / "echo" / "echo"
    holder = _holder(folder)
    try:
        started = time.perf_counter()
        with pytest.raises(RunLockedError, match=f"pid {holder.pid} on host "):
            run_tool("echo", EchoConfig, _echo, [])
        assert time.perf_counter() - started < 5
        assert not (folder / "manifest.json").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    result = run_tool("echo", EchoConfig, _echo, ["--words", "[a]"])  # the killed holder's lock is free
    assert not result.skipped and (folder / "manifest.json").is_file()


def test_a_run_that_fails_before_its_first_result_leaves_no_folder(artifacts):
    def fail(config, folder):
        raise ValueError("bad input")

    with pytest.raises(ValueError):
        run_tool("echo", EchoConfig, fail, [])
    assert not (artifacts / "echo" / "echo").exists()

    def partial(config, folder):
        (folder / "journal.jsonl").write_text("{}\n")  # progress a resume needs is kept
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_tool("echo", EchoConfig, partial, [])
    assert (artifacts / "echo" / "echo" / "journal.jsonl").is_file()


def test_the_lock_is_released_after_the_run(artifacts):
    folder = artifacts / "echo" / "r"
    with run_lock(folder):
        (folder / "out").write_text("x")
    with run_lock(folder):  # reacquired: nothing stale left held
        pass
    assert not (folder / ".lock.holder").exists()
