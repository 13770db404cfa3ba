"""Test-wide settings (offline, real shared data, the ``lean`` marker) and the session fixtures several
test folders share."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# `pytest -n N` runs N workers: give each its share of the cores, or their torch thread pools
# oversubscribe the CPU and every worker slows down (subprocesses inherit OMP_NUM_THREADS).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))
    import torch

    torch.set_num_threads(_share)

import pytest  # noqa: E402

from leanloop.paths import shared_data_dir  # noqa: E402


def lean_toolchain_available() -> bool:
    return bool(os.environ.get("LEANLOOP_LEAN_PROJECT") or shutil.which("lake"))


def pytest_collection_modifyitems(config, items):
    if lean_toolchain_available():
        return
    skip = pytest.mark.skip(reason="no Lean toolchain (set LEANLOOP_LEAN_PROJECT or put lake on PATH)")
    for item in items:
        if item.get_closest_marker("lean"):
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Tiny models on a shared 2-core machine: one intra-op thread per test process. More makes
    OpenMP spin against the other xdist worker (measured: 10-100x slower sampling and generation);
    session scope so that session fixtures that build models run on one thread too."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def vllm_model(tmp_path_factory):
    """The ``qwen3-tiny-vllm`` preset (tied embedding) saved with its tokenizer: a folder vLLM's CPU
    build loads (the ``vllm`` tier, make test-vllm)."""
    import torch

    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    folder = tmp_path_factory.mktemp("vllm_model")
    tokenizer = load_tokenizer("qwen3")
    torch.manual_seed(0)
    load_model(ModelSpec("qwen3-tiny-vllm"), tokenizer=tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def shared_data():
    """The real recorded Lean data folder (../shared/data)."""
    return shared_data_dir()


@pytest.fixture(scope="session")
def assert_same_data_run():
    """``check(run, one)``: a data run (a merged array, say) is the one-process run ``one``: the same
    corpus byte for byte, and the same manifest but for what differs between any two builds (folder
    name, clock, timings, code checkout; the config but for its run name)."""
    import json

    volatile = ("run", "created", "metrics", "git", "config")

    def body(folder):
        manifest = json.loads((folder / "manifest.json").read_text())
        out = {k: v for k, v in manifest.items() if k not in volatile}
        out["config"] = {k: v for k, v in manifest["config"].items() if k != "run"}
        return out

    def check(run, one):
        assert (run / "final" / "corpus.parquet").read_bytes() == (one / "final" / "corpus.parquet").read_bytes()
        assert body(run) == body(one)

    return check


@pytest.fixture
def artifacts(tmp_path, monkeypatch):
    """An isolated artifacts root for one test."""
    root = tmp_path / "artifacts"
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(root))
    return root


@dataclass
class ResumeRuns:
    """A training command run three times: killed (SIGKILL at a step), rerun (it resumes), and once
    straight through under another run name; the two finished run folders to compare."""

    resumed: Path
    straight: Path
    stderr: str

    def same_weights(self, tolerance: float = 0.0) -> bool:
        """The two exported models (``final/*.safetensors``) hold the same tensors, to ``tolerance``
        (0: ``torch.equal``, bit for bit)."""
        import torch
        from safetensors.torch import load_file

        a, b = self.resumed / "final", self.straight / "final"
        files = sorted(str(p.relative_to(a)) for p in a.rglob("*.safetensors"))
        assert files and files == sorted(str(p.relative_to(b)) for p in b.rglob("*.safetensors")), (a, b)
        for name in files:
            x, y = load_file(a / name), load_file(b / name)
            if x.keys() != y.keys():
                return False
            if not tolerance:
                if not all(torch.equal(x[k], y[k]) for k in x):
                    return False
            elif any(float((x[k].float() - y[k].float()).abs().max()) > tolerance for k in x):
                return False
        return True

    def logged(self, column: str = "train/loss") -> tuple[dict[int, float], dict[int, float]]:
        """``step -> value`` of a ``metrics.csv`` column in each run."""
        import csv

        def read(run: Path) -> dict[int, float]:
            with open(run / "metrics.csv", newline="") as handle:
                return {int(r["step"]): float(r[column]) for r in csv.DictReader(handle) if r.get(column)}

        return read(self.resumed), read(self.straight)


@pytest.fixture
def kill_and_resume(artifacts, tmp_path):
    """``run(stage, config, *args, kill=3, every=2, steps=6)``: :class:`ResumeRuns` of ``python -m
    <stage>.train`` killed once at step ``kill`` (tests/leanloop/kill_at_step.py), its rerun, and
    (unless ``straight=False``) an uninterrupted run of the same command."""
    import signal
    import subprocess
    import sys

    from leanloop.paths import REPO_ROOT

    def one(stage: str, config: str, run: str, once: Path, args: tuple, kill: int, every: int, steps: int):
        argv = [
            sys.executable,
            "-m",
            f"{stage}.train",
            "--config",
            str(REPO_ROOT / config),
            "--run",
            run,
            "--trainer.max_steps",
            str(steps),
            "--trainer.max_epochs",
            "-1",
            "--checkpoint_every_n_steps",
            str(every),
            "--trainer.enable_progress_bar",
            "false",
            "--trainer.log_every_n_steps",
            "1",
            "--trainer.callbacks+=kill_at_step.KillAt",
            "--trainer.callbacks.step",
            str(kill),
            "--trainer.callbacks.once",
            str(once),
            *args,
        ]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "tests/leanloop")]),
            "OMP_NUM_THREADS": "1",
        }
        # a session of its own: a multi-process run's kill takes its whole process group (KillAt group)
        return subprocess.run(
            argv, capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=900, start_new_session=True
        )

    def run(
        stage: str, config: str, *args: str, kill: int = 3, every: int = 2, steps: int = 6, straight: bool = True
    ) -> ResumeRuns:
        once = tmp_path / f"killed-{stage}"
        killed = one(stage, config, "resume", once, args, kill, every, steps)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
        resumed = one(stage, config, "resume", once, args, kill, every, steps)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "resuming the unfinished run" in resumed.stderr, resumed.stderr[-3000:]
        if straight:
            done = one(stage, config, "straight", once, args, kill, every, steps)
            assert done.returncode == 0, done.stderr[-3000:]
        return ResumeRuns(artifacts / stage / "resume", artifacts / stage / "straight", resumed.stderr)

    run.compare = lambda resumed, straight: ResumeRuns(resumed, straight, "")  # runs a test made itself
    return run


@pytest.fixture(scope="session")
def debug_corpus(tmp_path_factory):
    """configs/data/debug.yaml built for real (replay backend): 300 RL-Lean rows + 10 Kimina proofs."""
    from data.build import build, parse_config
    from leanloop.paths import REPO_ROOT

    root = tmp_path_factory.mktemp("corpus_artifacts")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LEANLOOP_ARTIFACTS", str(root))
        build(parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml")]), progress=False)
    return root / "data" / "debug"


@pytest.fixture(scope="session")
def saved_fused_checkpoint(tmp_path_factory):
    """The tiny stock (fused) model saved by transformers: it writes the published per-expert
    layout (``mlp.experts.<e>.gate_proj.weight``), the same as Qwen3-Coder-30B-A3B's shards."""
    from leanloop.training.moe import tiny_qwen3_moe

    folder = tmp_path_factory.mktemp("tiny_fused")
    tiny_qwen3_moe(seed=3, unfused=False).save_pretrained(folder)
    return folder


# tiny classifiers trained once (fast_dev_run) on real programs: the classifiers' tests and the
# classify arrays of tests/cluster score with them
DEBUG_CONFIGS = {"encoder": "debug.yaml", "onetoken": "debug_onetoken.yaml"}


@dataclass
class TrainedRun:
    """A finished debug run as the tests read it back from disk."""

    run_dir: Path
    manifest: dict[str, Any]
    corpus: Any  # classifiers.examples.Corpus the run trained and was scored on


def _read_run(run_dir: Path) -> TrainedRun:
    import yaml

    from classifiers.examples import JsonlCorpus, load_jsonl_corpus

    data = yaml.safe_load((run_dir / "config.yaml").read_text())["data"]
    corpus = load_jsonl_corpus(JsonlCorpus(**data["jsonl"]), data["max_rows_per_split"])
    return TrainedRun(run_dir, json.loads((run_dir / "manifest.json").read_text()), corpus)


@pytest.fixture(scope="session")
def trained_runs(tmp_path_factory):
    """configs/classifiers/debug.yaml and debug_onetoken.yaml run with fast_dev_run in one isolated
    artifacts root: {"root": Path, "encoder": TrainedRun, "onetoken": TrainedRun}.

    Trained ONCE per test session: under pytest-xdist every worker has its own session, so the
    first worker trains in the workers' common temp folder (under a file lock) and the others
    read the finished runs from there instead of training the same thing again.
    """
    from classifiers.train import run
    from leanloop.paths import REPO_ROOT

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if base.name.startswith("popen-gw") else base
    root = shared / "classifier_artifacts"
    done = root / "trained.json"
    with open(shared / "classifier_artifacts.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.is_file():
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("LEANLOOP_ARTIFACTS", str(root))
                dirs = {}
                for kind, config in DEBUG_CONFIGS.items():
                    result = run(
                        [
                            "--config",
                            str(REPO_ROOT / "configs/classifiers" / config),
                            "--trainer.fast_dev_run",
                            "true",
                            "--log.csv",
                            "false",
                        ]
                    )
                    dirs[kind] = str(result.run_dir)
            done.write_text(json.dumps(dirs))
    dirs = json.loads(done.read_text())
    return {"root": root, **{kind: _read_run(Path(path)) for kind, path in dirs.items()}}


@pytest.fixture(scope="session")
def real_programs(shared_data):
    """(name, program, recorded pass) of the first shipped RL-Lean candidates (real prover output)."""
    import gzip

    path = shared_data / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for _, line in zip(range(400), handle)]
    return [(r["name"], r["code"], bool(r["verdict_pass"])) for r in rows]
