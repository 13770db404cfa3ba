"""``make sft-sample ARRAY=N`` (``python -m cluster.array --stage sample``) with the local profile: the
shards run as local processes of ``sft.sample`` with a tiny real Qwen3 and fixed seeds, and the
merge job writes the same candidates file as one process, byte for byte. A merge with a missing or
mismatched shard is refused in one line, and a resubmission runs only the unfinished shard."""

from __future__ import annotations

import json
import os
import shutil

import yaml

from cluster.array import main as array_main, shard_states
from cluster.profile import PROFILES_DIR
from leanloop.training.models import ModelSpec
from sft.config import SampleConfig, StatementsConfig
from leanloop.prover.generation import SamplingConfig
from sft.sample import main as sample_main, run, sample_dir

STATEMENTS = "shared://statements/minif2f_goedel_prover_v2_repaired.jsonl"


def test_sample_array_merges_to_the_one_process_file(
    tiny_prover, tiny_generator, artifacts, tmp_path, capsys, monkeypatch
):
    whole = run(
        SampleConfig(
            model=ModelSpec(name=str(tiny_prover)),
            run="whole",
            statements=StatementsConfig(path=STATEMENTS, limit=4),
            sampling=SamplingConfig(k=2, max_new_tokens=4),
        ),
        tiny_generator,
    ).read_bytes()
    config = tmp_path / "sample.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model": {"name": str(tiny_prover)},
                "statements": {"path": STATEMENTS, "limit": 4},
                "sampling": {"k": 2, "max_new_tokens": 4},
                "generation": {"threads": 1},
            }
        )
    )
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    args = [
        "--stage",
        "sft_sample",
        "--config",
        str(config),
        "--run",
        "arr",
        "--array",
        "2",
        "--profile",
        str(PROFILES_DIR / "local.yaml"),
    ]
    assert array_main(args) == 0, capsys.readouterr().err
    folder = sample_dir("arr")
    assert (folder / "final" / "candidates.jsonl").read_bytes() == whole
    status = shard_states("sft_sample", folder)
    assert status["summary"] == {"done": 2} and status["attempts"] == 8 and status["merged"]

    # shard 1 lost (its journal and manifest): refused in one line, then only shard 1 runs again
    shutil.rmtree(folder / "shards" / "1-of-2")
    (folder / "manifest.json").unlink()
    capsys.readouterr()
    assert sample_main(["--config", str(config), "--run", "arr", "--merge_shards", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "shard 1/2 is missing" in err
    assert array_main(args) == 0, capsys.readouterr().err
    assert "shards 1;" in capsys.readouterr().out
    assert (folder / "final" / "candidates.jsonl").read_bytes() == whole

    # a shard sampled by other code
    (folder / "manifest.json").unlink()
    path = folder / "shards" / "0-of-2" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["shard"]["code"] = "0" * 40
    path.write_text(json.dumps(manifest))
    capsys.readouterr()
    assert sample_main(["--config", str(config), "--run", "arr", "--merge_shards", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "another code version" in err
    assert os.environ["OMP_NUM_THREADS"] == "1"
