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
from leanloop.artifacts import (
    Manifest,
    RunLockedError,
    RunNameError,
    check_run_name,
    default_run_name,
    resolve_path,
    run_dir,
    run_lock,
)
from leanloop.lean.types import LeanBackend, LeanResponse, ResponseStatus
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
    if name != "a/b":  # artifacts://data/a/b names run a's b (e.g. final)
        with pytest.raises(RunNameError):  # a reference cannot leave the artifacts folder either
            resolve_path(f"artifacts://data/{name}")
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
HOLD = (
    "import sys, time\n"
    "from leanloop.artifacts import run_lock\n"
    "with run_lock(sys.argv[1]):\n"
    "    print('held', flush=True)\n"
    "    time.sleep(60)\n"
)


def _holder(folder):
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
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


# -- a data build that failed must not look finished -----------------------------------------------
DATA_DEBUG = str(REPO_ROOT / "configs/data/debug.yaml")


class NoLean(LeanBackend):
    """A backend whose Lean never answers (the server is down): every program is infra_error."""

    name = "down"

    def __init__(self):
        self.asked: list[str] = []

    async def run(self, program, timeout=None):
        self.asked.append(program)
        # not a Lean reply: the absence of one (connection refused)
        return LeanResponse(ResponseStatus.INFRA_ERROR, detail="connection refused")


class Counting(LeanBackend):
    def __init__(self, inner):
        self.inner, self.name, self.asked = inner, inner.name, []

    async def run(self, program, timeout=None):
        self.asked.append(program)
        return await self.inner.run(program, timeout)


def test_a_build_with_no_lean_fails_and_a_resume_retries_only_the_failures(artifacts):
    from data.build import BuildFailed, build, parse_config
    from data.journal import JOURNAL

    config = parse_config(["--config", DATA_DEBUG, "--run", "nolean"])
    config.sources = [s for s in config.sources if s.name == "rl_lean"]
    config.sources[0].limit = 20
    down = NoLean()
    with pytest.raises(BuildFailed, match="infra_error .* < min_eligible_share 0.5"):
        build(config, backend=down, progress=False, quiet=True)
    run = artifacts / "data" / "nolean"
    assert not (run / "manifest.json").exists() and not (run / "final").exists()
    assert (run / JOURNAL).is_file() and down.asked  # journaled, but not final
    real = Counting(config.lean.backend_instance())
    result = build(config, backend=real, progress=False, quiet=True)
    assert result.resumed == 0 and result.verified_now == len(real.asked) == len(set(down.asked))
    assert "infra_error" not in result.counts["category"] and (run / "manifest.json").is_file()


def _data(args, **env):
    return subprocess.run(
        [sys.executable, "-m", "data.build", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **env},
        timeout=300,
    )


def test_an_empty_input_fails_with_no_manifest(artifacts, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    layer = tmp_path / "empty.yaml"
    layer.write_text(json.dumps({"sources": [{"path": str(empty), "name": "e", "program_field": "code"}]}))
    done = _data(["--config", DATA_DEBUG, "--config", str(layer), "--run", "empty"])
    assert done.returncode == 1 and "no candidate program" in done.stderr and "Traceback" not in done.stderr
    assert not (artifacts / "data" / "empty").exists()


def test_split_fractions_that_do_not_sum_to_one_are_refused(artifacts):
    done = _data(["--config", DATA_DEBUG, "--run", "splits", "--splits.train", "0.5"])
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "sum to 1" in done.stderr
    done = _data(
        [
            "--config",
            DATA_DEBUG,
            "--run",
            "splits",
            "--splits.train",
            "1.0",
            "--splits.valid",
            "-0.05",
            "--splits.test",
            "0.05",
        ]
    )
    assert done.returncode == 2 and "splits.valid=-0.05" in done.stderr
    assert not (artifacts / "data" / "splits").exists()


# -- a user's mistake is one clear line and exit 2 ------------------------------------------------
def _one_line(done, *needles, code=2):
    err = done.stderr
    assert done.returncode == code, err
    assert "Traceback" not in err and all(n in err for n in needles), err
    return err


def test_command_line_mistakes_are_one_line_and_exit_2(artifacts, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("sources:\n  - [unclosed\n")
    err = _one_line(_data(["--config", str(bad)]), str(bad), "not valid YAML", "line 3")
    assert err.count("\n") == 2 and "usage: python -m data.build --config" in err  # the error and a short usage
    err = _one_line(_data(["--config", DATA_DEBUG, "--nope", "1"]), "unrecognized arguments: --nope")
    assert err.count("\n") == 2
    _one_line(_data(["--config", str(tmp_path / "missing.yaml")]), "missing.yaml not found")
    _one_line(_data(["--config", DATA_DEBUG, "--lean.profile", "nope", "--run", "p"]), "unknown policy profile 'nope'")
    # an option under its old name: one line naming the new one (on the command line and in a file)
    _one_line(
        _data(["--config", DATA_DEBUG, "--profile", "rl", "--run", "p"]), "sets profile, which is now lean.profile"
    )
    old = tmp_path / "old_keys.yaml"
    old.write_text("backend:\n  kind: replay\nconcurrency: 4\n")
    _one_line(
        _data(["--config", DATA_DEBUG, "--config", str(old)]),
        str(old),
        "sets backend.kind, which is now lean.backend.kind",
    )
    _one_line(_data(["--config", DATA_DEBUG, "--run", "../../x"]), "run name '../../x' is not allowed")
    _one_line(
        _data(["--config", DATA_DEBUG, "--run", "s"], LEANLOOP_SHARED_DATA=str(tmp_path / "none")),
        "shared data folder not found",
        "LEANLOOP_SHARED_DATA",
    )
    missing = tmp_path / "missing_source.yaml"
    missing.write_text(json.dumps({"sources": [{"path": str(tmp_path / "nope.jsonl"), "name": "n"}]}))
    _one_line(_data(["--config", DATA_DEBUG, "--config", str(missing), "--run", "m"]), "nope.jsonl not found")
    assert not artifacts.exists()  # no half-made run folder from any of them
    debug = _data(["--config", DATA_DEBUG, "--lean.profile", "nope"], LEANLOOP_DEBUG="1")
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_an_unwritable_artifacts_folder_is_one_line(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")  # a folder cannot be made under a file (root ignores read-only bits)
    done = _data(["--config", DATA_DEBUG, "--run", "w"], LEANLOOP_ARTIFACTS=str(blocker / "artifacts"))
    _one_line(done, "cannot create the run folder", "LEANLOOP_ARTIFACTS")


def test_ctrl_c_is_one_line_and_the_journal_is_kept(artifacts):
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "data.build",
            "--config",
            str(REPO_ROOT / "configs/data/default.yaml"),
            "--run",
            "int",
            "--lean.concurrency",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    journal = artifacts / "data" / "int" / "journal.jsonl"
    deadline = time.monotonic() + 120
    while not (journal.is_file() and journal.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130 and "Traceback" not in err and "interrupted (Ctrl-C)" in err
    assert journal.is_file() and not (journal.parent / "manifest.json").exists()


def test_a_changed_config_names_the_changed_keys(artifacts):
    from leanloop.tool import RunExistsError

    run_tool("echo", EchoConfig, _echo, ["--words", "[a]"])
    with pytest.raises(RunExistsError, match=r"changed: words\)"):
        run_tool("echo", EchoConfig, _echo, ["--words", "[b]"])


def test_a_damaged_or_foreign_input_run_is_one_line_naming_it(artifacts, capsys):
    from leanloop.artifacts import resolve_run
    from leanloop.tool import cli_entry

    folder = artifacts / "data" / "cut"
    (folder / "final").mkdir(parents=True)
    (folder / "manifest.json").write_text('{"stage": "da')  # truncated while written
    assert cli_entry(resolve_run, "artifacts://data/cut", "data", prog="x") == 2
    assert f"{folder / 'manifest.json'} cannot be read" in capsys.readouterr().err
    assert cli_entry(resolve_run, "artifacts://data/none", "data", prog="x") == 2
    assert "does not exist: run the stage that makes it first (`make data`)" in capsys.readouterr().err
    Manifest(stage="sft", run="cut").write(folder)
    assert cli_entry(resolve_run, "artifacts://data/cut", "data", prog="x") == 2
    err = capsys.readouterr().err
    assert "is a 'sft' artifact, expected 'data'" in err and err.count("\n") == 1


# -- a manifest vouches for its final/ and its inputs, and both are checked ------------------------
def test_final_edited_after_the_fact_is_caught_fast_even_at_the_same_size(artifacts, monkeypatch):
    from leanloop.artifacts import ManifestError, resolve_run

    result = run_tool("echo", EchoConfig, _echo, ["--words", "[a]"])
    record = result.manifest["final"]
    assert record["files"] == 1 and record["sizes"].startswith("sha256:") and record["content"].startswith("sha256:")
    assert record["digests"]["words.json"].startswith("sha256:")  # a small file: hashed whole
    assert resolve_run("artifacts://echo/echo") == result.run_dir
    words = result.run_dir / "final" / "words.json"
    words.write_text('["b"]')  # same size: the per-file digest sees it
    with pytest.raises(ManifestError, match=r"final changed since its manifest was written \(contents of words.json"):
        resolve_run("artifacts://echo/echo")
    with pytest.raises(SystemExit, match="but .*final changed.*--overwrite true"):  # no "already finished" skip
        run_tool("echo", EchoConfig, _echo, ["--words", "[a]"])
    words.write_text('["bb"]')
    with pytest.raises(ManifestError, match=r"final changed since its manifest was written \(files or sizes"):
        resolve_run("artifacts://echo/echo")


def test_a_large_final_file_is_checked_fast_by_sampled_blocks_and_fully_by_content(artifacts, monkeypatch):
    """What the README says the fast check does not catch: a same-size edit of a file over
    SMALL_FILE_BYTES that misses all of its sampled blocks; --verify full does."""
    from leanloop import artifacts as module
    from leanloop.artifacts import BLOCK_BYTES, SAMPLED_BLOCKS, ManifestError, resolve_run

    monkeypatch.setattr(module, "SMALL_FILE_BYTES", 4 * BLOCK_BYTES)
    size = 64 * BLOCK_BYTES

    def big(config, folder):
        (folder / "final").mkdir(exist_ok=True)
        (folder / "final" / "big.bin").write_bytes(bytes(size))
        return Manifest(stage="echo", run=config.run)

    result = run_tool("echo", EchoConfig, big, [])
    assert result.manifest["final"]["digests"]["big.bin"].startswith("sampled:")
    path = result.run_dir / "final" / "big.bin"
    step = (size - BLOCK_BYTES) // (SAMPLED_BLOCKS - 1)
    with open(path, "r+b") as handle:  # one byte between the first two sampled blocks
        handle.seek(BLOCK_BYTES + (step - BLOCK_BYTES) // 2)
        handle.write(b"x")
    assert resolve_run("artifacts://echo/echo") == result.run_dir  # not caught fast (documented)
    monkeypatch.setenv("LEANLOOP_VERIFY", "full")
    with pytest.raises(ManifestError, match="contents differ"):
        resolve_run("artifacts://echo/echo")
    monkeypatch.delenv("LEANLOOP_VERIFY")
    with open(path, "r+b") as handle:  # a byte in a sampled block (the last one)
        handle.seek(size - 1)
        handle.write(b"x")
    with pytest.raises(ManifestError, match="contents of big.bin differ"):
        resolve_run("artifacts://echo/echo")


@dataclass
class ReaderConfig:
    run: str = "reader"
    source: str = "artifacts://echo/echo"


def _reader(config, folder):
    from leanloop.artifacts import resolve_run

    manifest = Manifest(stage="reader", run=config.run)
    manifest.add_input("echo", resolve_run(config.source))
    return manifest


def test_an_upstream_run_rebuilt_after_the_fact_is_caught_on_load_and_on_skip(artifacts):
    from leanloop.artifacts import ManifestError, resolve_run

    run_tool("echo", EchoConfig, _echo, ["--words", "[a]"])
    assert not run_tool("reader", ReaderConfig, _reader, []).skipped
    assert run_tool("reader", ReaderConfig, _reader, []).skipped
    run_tool("echo", EchoConfig, _echo, ["--words", "[b, c]", "--overwrite", "true"])  # replaced upstream
    with pytest.raises(ManifestError, match=r"input echo \(.*echo/echo\) changed since this run read it"):
        resolve_run("artifacts://reader/reader")
    with pytest.raises(SystemExit, match="finished with this config, but input echo"):
        run_tool("reader", ReaderConfig, _reader, [])
    assert not run_tool("reader", ReaderConfig, _reader, ["--overwrite", "true"]).skipped
    assert resolve_run("artifacts://reader/reader")


def test_inputs_are_followed_by_reference_so_a_moved_root_stays_valid_and_a_missing_input_refuses(
    artifacts, tmp_path, monkeypatch
):
    import shutil

    from leanloop.artifacts import ManifestError, resolve_run

    run_tool("echo", EchoConfig, _echo, ["--words", "[a]"])
    run_tool("reader", ReaderConfig, _reader, [])
    entry = json.loads((artifacts / "reader" / "reader" / "manifest.json").read_text())["inputs"]["echo"]
    assert entry["ref"] == "artifacts://echo/echo" and entry["hash"].startswith("sha256:")
    moved = tmp_path / "moved"
    shutil.move(artifacts, moved)
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(moved))
    assert resolve_run("artifacts://reader/reader") == moved / "reader" / "reader"  # the whole root moved: valid
    assert run_tool("reader", ReaderConfig, _reader, []).skipped
    shutil.rmtree(moved / "echo")  # its input gone (the default mode checks, not only --verify full)
    with pytest.raises(ManifestError, match=r"input echo \(artifacts://echo/echo\) no longer exists"):
        resolve_run("artifacts://reader/reader")
    run_tool("echo", EchoConfig, _echo, ["--words", "[other]"])  # rebuilt there with another content
    with pytest.raises(ManifestError, match=r"input echo \(artifacts://echo/echo\) changed since this run read it"):
        resolve_run("artifacts://reader/reader")
    with pytest.raises(SystemExit, match="finished with this config, but input echo"):
        run_tool("reader", ReaderConfig, _reader, [])


# -- a killed training run resumes exactly ---------------------------------------------------------
def _pretrain(run, once, *extra):
    args = [
        "-m",
        "pretrain.train",
        "--config",
        str(REPO_ROOT / "configs/pretrain/debug.yaml"),
        "--run",
        run,
        "--trainer.max_steps",
        "8",
        "--trainer.max_epochs",
        "-1",
        "--checkpoint_every_n_steps",
        "2",
        "--trainer.deterministic",
        "true",
        "--trainer.enable_progress_bar",
        "false",
        "--trainer.callbacks+=kill_at_step.KillAt",
        "--trainer.callbacks.step",
        "5",
        "--trainer.callbacks.once",
        str(once),
        *extra,
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "tests/leanloop")]),
        "OMP_NUM_THREADS": "1",
    }
    # Ctrl-C's default restored: a signal the test process ignores (a tool run before it may have set
    # that) would be ignored by the child too
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=600,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _losses(run_dir):
    import csv

    with open(run_dir / "metrics.csv", newline="") as handle:
        return {int(r["step"]): float(r["train/loss"]) for r in csv.DictReader(handle) if r.get("train/loss")}


@pytest.mark.slow
def test_a_killed_training_run_resumes_exactly_by_default(artifacts, tmp_path):
    once = tmp_path / "killed"
    killed = _pretrain("resume", once)
    assert killed.returncode == -signal.SIGKILL and once.read_text() == "5"
    run = artifacts / "pretrain" / "resume"
    assert (run / "step-000004" / "lightning.ckpt").is_file() and not (run / "manifest.json").exists()
    resumed = _pretrain("resume", once)  # the same command again: resumes from step-000004
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming the unfinished run" in resumed.stderr and "step-000004" in resumed.stderr
    assert "not resumable" not in resumed.stderr  # the data order resumes mid-epoch
    straight = _pretrain("straight", once)  # the same config, never killed
    assert straight.returncode == 0, straight.stderr[-3000:]
    a, b = _losses(run), _losses(artifacts / "pretrain" / "straight")
    assert sorted(a) == sorted(b) == list(range(8))  # every step logged once, none lost to the kill
    assert all(abs(a[s] - b[s]) < 1e-5 for s in a), (a, b)
    ours = json.loads((run / "manifest.json").read_text())
    theirs = json.loads((artifacts / "pretrain" / "straight" / "manifest.json").read_text())
    assert ours["counts"]["trained_tokens"] == theirs["counts"]["trained_tokens"] > 0  # the whole run counted
    assert ours["counts"]["global_step"] == 8 and ours["counts"]["resumed_from"].endswith("step-000004/lightning.ckpt")
    assert (run / "loss.png").is_file() and "![loss curves](loss.png)" in (run / "report.md").read_text()
    assert resumed.stdout.strip().splitlines()[-1] == f"[pretrain] done: {run} (outputs in final/, manifest.json)"
    # a rerun that should start over says so
    again = _pretrain("resume", once, "--restart", "true")
    assert again.returncode == 0 and "already finished" in again.stderr


def test_ctrl_c_during_a_fit_is_one_line_exit_130_and_keeps_the_checkpoints(artifacts, tmp_path):
    once = tmp_path / "interrupted"
    stopped = _pretrain("int", once, "--trainer.callbacks.signal", "SIGINT")
    run = artifacts / "pretrain" / "int"
    assert stopped.returncode == 130 and "Traceback" not in stopped.stderr, stopped.stderr[-3000:]
    assert stopped.stderr.strip().splitlines()[-1].startswith("python -m pretrain.train: interrupted (Ctrl-C)")
    assert (run / "step-000004" / "lightning.ckpt").is_file() and not (run / "manifest.json").exists()


def test_a_training_stage_checks_its_arguments_before_any_work(artifacts, tmp_path, capsys):
    from pretrain.train import run

    debug = str(REPO_ROOT / "configs/pretrain/debug.yaml")
    with pytest.raises(SystemExit) as exited:
        run(["--config", debug, "--nope", "1"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 2 and "unrecognized arguments: --nope" in err
    assert "make pretrain CONFIG=" in err and "python -m pretrain.train --config" in err and "train.py" not in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {base: [\n")
    with pytest.raises(SystemExit) as exited:
        run(["--config", str(bad)])
    assert exited.value.code == 2 and f"config file {bad} is not valid YAML" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--ckpt_path /nope.ckpt: no such checkpoint file"):
        run(["--config", debug, "--run", "ck", "--ckpt_path", "/nope.ckpt"])
    cut = tmp_path / "step-000002" / "lightning.ckpt"  # a DeepSpeed checkpoint folder cut off before 'latest'
    (cut / "checkpoint").mkdir(parents=True)
    with pytest.raises(SystemExit, match="no such checkpoint file .*complete once it holds 'latest'"):
        run(["--config", debug, "--run", "ck", "--ckpt_path", str(cut)])
    assert not (artifacts / "pretrain" / "ck").exists()
    holder = _holder(artifacts / "pretrain" / "busy")
    try:
        with pytest.raises(RunLockedError, match=f"pid {holder.pid}"):
            run(["--config", debug, "--run", "busy"])
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


def test_a_full_disk_while_exporting_is_one_line_naming_the_path_and_the_free_space(artifacts, monkeypatch, capsys):
    from safetensors import SafetensorError

    from leanloop.tool import cli_entry
    from pretrain.train import run

    def full(*args, **kwargs):  # what safetensors raises when the write hits ENOSPC
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr("transformers.modeling_utils.safe_save_file", full)
    code = cli_entry(
        run,
        ["--config", str(REPO_ROOT / "configs/pretrain/debug.yaml"), "--run", "full", "--trainer.fast_dev_run", "true"],
        prog="python -m pretrain.train",
    )
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    # not the write's own traceback (a logging handler an earlier test bound to its captured stderr may
    # print a "--- Logging error ---" traceback of its own, which says nothing about this code)
    assert code == 2 and "SafetensorError" not in err and "in safe_save_file" not in err, err[-3000:]
    assert f"no space left on the device writing {artifacts / 'pretrain' / 'full' / 'final'} (" in line
    assert "free there)" in line and not (artifacts / "pretrain" / "full" / "manifest.json").exists()


def test_a_missing_model_input_names_the_make_target_that_makes_it(artifacts, capsys):
    from classifiers.train import run
    from leanloop.tool import cli_entry

    code = cli_entry(
        run,
        ["--config", str(REPO_ROOT / "configs/classifiers/onetoken_default.yaml"), "--run", "x"],
        prog="python -m classifiers.train",
    )
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and line.startswith("python -m classifiers.train: artifacts://pretrain/default -> "), line
    assert "run the stage that makes it first (`make pretrain`)" in line and "Union" not in line
    assert not (artifacts / "classifiers" / "x").exists()


def test_a_run_with_no_step_cadence_checkpoints_on_the_clock_keeping_the_newest(artifacts):
    from pretrain.train import run

    result = run(
        [
            "--config",
            str(REPO_ROOT / "configs/pretrain/debug.yaml"),
            "--run",
            "clock",
            "--trainer.max_steps",
            "3",
            "--checkpoint_every_n_minutes",
            "0.00001",
            "--trainer.enable_progress_bar",
            "false",
        ]
    )
    assert sorted(p.name for p in result.run_dir.glob("step-*")) == ["step-000003"]
    assert (result.run_dir / "step-000003" / "lightning.ckpt").is_file() and result.manifest["counts"][
        "global_step"
    ] == 3
