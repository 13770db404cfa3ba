"""A corpus built as N shards (``python -m data.build --shard I/N``) and merged (``python -m
data.merge``) is the one-process corpus: the same parquet bytes and the same manifest apart from
the run's name, time and rate. A shard killed mid-build resumes from its own journal; a merge with
a missing, unfinished or mismatched shard is refused in one line. All on the embedded default
corpus (real RL-Lean and Kimina candidates, the replay backend answering from real recordings)."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
from pathlib import Path

import pytest
import yaml

from data.build import build, main as build_main, parse_config
from data.merge import main as merge_main
from data.sources import item_id
from leanloop.paths import REPO_ROOT
from leanloop.sharding import Shard, ShardSpecError, shard_of

DEFAULT = str(REPO_ROOT / "configs/data/default.yaml")


def with_duplicates(tmp: Path) -> str:
    """The default config plus the first 300 RL-Lean rows read again as a second source: 300
    duplicates, each of which must be counted in its original's shard."""
    config = yaml.safe_load(Path(DEFAULT).read_text())
    again = dict(config["sources"][0], name="rl_lean_again", limit=300)
    config["sources"].append(again)
    path = tmp / "default_with_duplicates.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One-process build and four shards (not merged) of the default corpus with duplicates."""
    root = tmp_path_factory.mktemp("shard_artifacts")
    config = with_duplicates(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LEANLOOP_ARTIFACTS", str(root / "artifacts"))
        build(parse_config(["--config", config, "--run", "one"]), progress=False, quiet=True)
        for index in range(4):
            assert build_main(["--config", config, "--run", "four", "--shard", f"{index}/4"]) == 0
    return root / "artifacts", config


@pytest.fixture
def tree(built, tmp_path, monkeypatch):
    """A private copy of the built runs for a test that changes them."""
    source, config = built
    root = tmp_path / "artifacts"
    shutil.copytree(source, root)
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(root))
    return root, config


def test_four_shards_merge_into_exactly_the_one_process_corpus(tree, capsys, assert_same_data_run):
    root, config = tree
    one, four = root / "data" / "one", root / "data" / "four"
    shard_manifests = [json.loads((four / "shards" / f"{i}-of-4" / "manifest.json").read_text()) for i in range(4)]
    single = json.loads((one / "manifest.json").read_text())
    # duplicates meet their original in one shard, and every shard has a share of the work
    assert sum(m["counts"]["duplicates"] for m in shard_manifests) == single["counts"]["duplicates"]
    assert single["reconciliation"]["rl_lean_again"]["duplicates"] == 300
    assert all(m["counts"]["distinct_programs"] > 300 for m in shard_manifests)

    assert merge_main(["--config", config, "--run", "four", "--count", "4"]) == 0
    assert "merged 4 shards" in capsys.readouterr().out
    assert_same_data_run(four, one)
    merged = json.loads((four / "manifest.json").read_text())
    assert merged["metrics"]["verified_now"] == single["metrics"]["verified_now"]
    assert merged["metrics"]["shards"] == 4 and "shard" not in merged
    assert merged["reconciliation"]["rl_lean_again"]["duplicates"] == 300

    # the merged run is a run like any other: merging again skips it
    assert merge_main(["--config", config, "--run", "four", "--count", "4"]) == 0
    assert "already finished with this config" in capsys.readouterr().err


def _build_and_die(config: str, root: str, after: int) -> None:
    """A shard's build, SIGKILLed by itself after ``after`` journaled programs."""
    os.environ["LEANLOOP_ARTIFACTS"] = root
    seen = []

    def on_item(item_id, outcome):
        seen.append(item_id)
        if len(seen) == after:
            os.kill(os.getpid(), signal.SIGKILL)

    build(
        parse_config(["--config", config, "--run", "killed", "--shard", "2/4"]),
        progress=False,
        quiet=True,
        on_item=on_item,
    )


def test_a_shard_killed_mid_build_resumes_and_merges_to_the_same_corpus(tree, capsys, assert_same_data_run):
    root, config = tree
    killed = root / "data" / "killed"
    for index in (0, 1, 3):  # the other shards finished earlier
        shutil.copytree(root / "data" / "four" / "shards" / f"{index}-of-4", killed / "shards" / f"{index}-of-4")
    child = multiprocessing.get_context("fork").Process(target=_build_and_die, args=(config, str(root), 120))
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL
    shard = killed / "shards" / "2-of-4"
    assert not (shard / "manifest.json").exists()
    journaled = sum(1 for _ in open(shard / "journal.jsonl")) - 1
    assert journaled >= 120

    assert merge_main(["--config", config, "--run", "killed", "--count", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "shard 2/4 is unfinished" in err

    assert build_main(["--config", config, "--run", "killed", "--shard", "2/4"]) == 0
    manifest = json.loads((shard / "manifest.json").read_text())
    assert manifest["metrics"]["resumed"] == journaled  # nothing verified twice
    assert merge_main(["--config", config, "--run", "killed", "--count", "4"]) == 0
    one = root / "data" / "one"
    assert_same_data_run(killed, one)


def test_merge_refuses_a_missing_or_mismatched_shard_in_one_line(tree, capsys):
    root, config = tree
    four = root / "data" / "four"

    def refused() -> str:
        capsys.readouterr()  # the builds' own output
        assert merge_main(["--config", config, "--run", "four", "--count", "4"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0, err
        assert not (four / "manifest.json").exists() and not (four / "final").exists()
        return err

    moved = four / "shard3.bak"
    os.replace(four / "shards" / "3-of-4", moved)
    assert "shard 3/4 is missing" in refused()
    os.replace(moved, four / "shards" / "3-of-4")

    assert merge_main(["--config", config, "--run", "four", "--count", "5"]) == 2
    assert "shard 0/5 is missing" in capsys.readouterr().err

    # shard 1 rebuilt with another timeout: another config
    assert (
        build_main(
            ["--config", config, "--run", "four", "--shard", "1/4", "--lean.timeout", "30", "--overwrite", "true"]
        )
        == 0
    )
    assert "built with another config" in refused()
    assert build_main(["--config", config, "--run", "four", "--shard", "1/4", "--overwrite", "true"]) == 0

    # a shard built by other code (its manifest's code version differs)
    path = four / "shards" / "0-of-4" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["shard"]["code"] = "0" * 40
    path.write_text(json.dumps(manifest))
    assert "another code version" in refused()


def test_shard_of_a_key_is_stable_and_shards_partition_the_items():
    keys = [item_id(f"thm_{i}", f"theorem thm_{i} : True := trivial") for i in range(400)]
    for count in (1, 3, 4):
        owners = [[Shard(i, count).owns(key) for i in range(count)] for key in keys]
        assert all(sum(row) == 1 for row in owners)
    # a fixed hash: the same key is in the same shard on every machine, whatever ran before
    assert [shard_of(key, 4) for key in keys[:6]] == [shard_of(key, 4) for key in list(keys[:6])]
    assert (
        shard_of("abc", 4)
        == int.from_bytes(__import__("hashlib").sha256(b"leanloop-shard-v1\0abc").digest()[:8], "big") % 4
    )
    assert Shard.parse("2/8") == Shard(2, 8) and Shard.parse(None) is None
    with pytest.raises(ShardSpecError):
        Shard.parse("4/4")
    with pytest.raises(ShardSpecError):
        Shard.parse("two")


def test_a_bad_shard_option_is_one_line_and_exit_2(artifacts, capsys):
    assert build_main(["--config", DEFAULT, "--run", "x", "--shard", "4/4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--shard 4/4" in err
