"""Search-stage fixtures: trees built for real from the shipped LeanDojo steps (once per session)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def search_data(tmp_path_factory):
    """``make search-data``'s default run, built into a temporary artifacts root."""
    from search.build_data import main

    root = tmp_path_factory.mktemp("search_artifacts")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LEANLOOP_ARTIFACTS", str(root))
        run = main(["--config", "configs/search/data/default.yaml", "--run", "test"])
    return run


@pytest.fixture(scope="session")
def replay(search_data):
    """The replay environment over the built run's recorded transitions."""
    from search.env import ReplayEnv

    return ReplayEnv.from_run(search_data)


HEAD = "v4.33.0-rc2"


@pytest.fixture(scope="module")
def standin_env(tmp_path_factory, shared_data):
    """``ReplEnv`` through lean-interact's real client against the stand-in REPL replaying the
    recorded HEAD sessions (the pinned lean-interact reads `proofStatus`, which only HEAD
    recordings carry; those commands were sent without lean-interact's `Elab.async` option)."""
    from leanloop.lean.session import standin_session_config
    from leanloop.lean.standins.repl import prepare_repl_dir
    from search.repl_env import ReplEnv

    root = prepare_repl_dir(
        tmp_path_factory.mktemp("repl"), [shared_data / "lean_repl" / "repl_io_pairs.jsonl"], lean_version=HEAD
    )
    env = ReplEnv(standin_session_config(root, lean_version=HEAD, timeout=30, parallel_elaboration=False))
    yield env
    env.close()
