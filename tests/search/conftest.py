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
        run = main(["--config", "configs/search_data/default.yaml", "--run", "test"])
    return run
