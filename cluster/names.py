"""How a sweep's varied options are named in run names and summary columns (shared by the sweep and
its report, which must agree)."""

from __future__ import annotations


def short_keys(keys: list[str]) -> dict[str, str]:
    """Shortest unique dotted suffix of each key: model.optim.lr -> lr (optim.lr if 'lr' repeats)."""
    short: dict[str, str] = {}
    for key in keys:
        parts = key.split(".")
        for size in range(1, len(parts) + 1):
            candidate = ".".join(parts[-size:])
            clashes = [k for k in keys if k != key and (k == candidate or k.endswith("." + candidate))]
            if not clashes:
                break
        short[key] = candidate
    return short
