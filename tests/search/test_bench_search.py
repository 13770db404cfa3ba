"""make bench-search in --smoke mode: it runs both modes on the same work and reports the ratio."""

from __future__ import annotations

import re


def test_bench_search_smoke(search_data, capsys, monkeypatch):
    import shutil

    from bench.search import main

    root = search_data.parent.parent
    if not (root / "search_data" / "default").exists():
        shutil.copytree(search_data, root / "search_data" / "default")
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(root))
    assert main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"solved 4/4", out)  # the oracle over the replay environment
    rows = re.findall(r"^(one search at a time|\d+ searches batched)\s+(\d+)\s+(\d+)", out, flags=re.M)
    # the same expansions in both modes; env calls depend on how many sampled tactics were distinct,
    # and the two modes draw their samples in a different order
    assert len(rows) == 2 and rows[0][1] == rows[1][1] and all(int(r[2]) > 0 for r in rows)
    assert re.search(r"batched vs one at a time: [\d.]+x expansions/s wall, [\d.]+x CPU", out)
