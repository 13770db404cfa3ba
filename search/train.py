"""``python -m search.train --config configs/search/default.yaml [--model.optim.lr 1e-4 ...]``:
supervised actor-critic training on proof-tree steps (``make search``)."""

from __future__ import annotations

from leanloop.training.cli import main, run_stage
from search.data import SearchData
from search.module import SearchModule

STAGE = "search"
LINKS = [("model.base", "data.base")]


def run(args: list[str] | None = None):
    return run_stage(STAGE, SearchModule, SearchData, args, links=LINKS)


if __name__ == "__main__":
    main(STAGE, SearchModule, SearchData, links=LINKS)
