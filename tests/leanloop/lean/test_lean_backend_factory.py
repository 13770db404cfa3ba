"""Choosing a backend by name and from a YAML config section."""

from __future__ import annotations

import asyncio
import json
import warnings

import pytest
from jsonargparse import ArgumentParser

from leanloop.lean.backends import BackendConfig, backend_from_config, make_backend
from leanloop.lean.kimina import KiminaBackend
from leanloop.lean.local import LocalBackend
from leanloop.lean.replay import ReplayBackend
from leanloop.lean.types import ResponseStatus


def test_make_backend_by_name(shared_data):
    row = json.loads((shared_data / "lean_repl" / "kimina_match_pairs.jsonl").open(encoding="utf-8").readline())
    replay = make_backend("replay", sources=["kimina_match"])
    assert isinstance(replay, ReplayBackend)
    recorded = row["server_response"]["results"][0]["response"]
    response = asyncio.run(replay.run(row["code"]))
    assert response.status is ResponseStatus.OK and response.time_s == pytest.approx(recorded["time"])

    local = make_backend("local", workers=3, timeout=30)
    assert isinstance(local, LocalBackend) and local.config.workers == 3 and local.config.timeout == 30
    assert local.worker_pids() == [None, None, None]  # creating a backend starts no Lean
    kimina = make_backend("kimina", url="http://lean-server:12332", batch_size=16)
    assert isinstance(kimina, KiminaBackend) and kimina.config.batch_size == 16


def test_bad_names_and_options_say_what_is_allowed():
    with pytest.raises(ValueError, match="local, kimina, replay"):
        make_backend("lean4web")
    with pytest.raises(ValueError, match="workres.*LocalBackendConfig.*workers"):
        make_backend("local", workres=2)
    with pytest.raises(TypeError, match="not a backend config"):
        backend_from_config({"kind": "local"})  # type: ignore[arg-type]


def test_yaml_section_selects_and_configures_the_backend(tmp_path):
    config = tmp_path / "verify.yaml"
    config.write_text(
        "backend:\n  kind: kimina\n  kimina:\n    url: http://lean:8000\n    batch_size: 4\n"
        "  local:\n    workers: 16\n",
        encoding="utf-8",
    )
    parser = ArgumentParser()
    parser.add_argument("--config", action="config")
    parser.add_class_arguments(BackendConfig, "backend")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        settings = parser.instantiate(parser.parse_args(["--config", str(config), "--backend.kimina.timeout", "20"]))
    backend = settings.backend.build()
    assert isinstance(backend, KiminaBackend)
    assert (backend.config.url, backend.config.batch_size, backend.config.timeout) == ("http://lean:8000", 4, 20.0)
    assert settings.backend.local.workers == 16
    settings.backend.kind = "local"
    assert isinstance(settings.backend.build(), LocalBackend)
