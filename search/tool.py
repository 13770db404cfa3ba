"""Typed configs for the stage's non-training entry points (search-data, search-eval, search-rl):
``--config a.yaml --config b.yaml`` layered, then dotted overrides, parsed by jsonargparse into the
entry point's dataclass (the same parser the training stages use)."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def parse_tool_config(config_type: type[T], argv: list[str] | None, prog: str) -> T:
    from jsonargparse import ActionConfigFile, ArgumentParser

    parser = ArgumentParser(prog=prog, description=(config_type.__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--config", action=ActionConfigFile, help="YAML config (repeatable, layered)")
    parser.add_class_arguments(config_type, as_group=False)
    namespace = parser.parse_args(argv)
    instance = parser.instantiate(namespace)
    values: dict[str, Any] = {k: v for k, v in vars(instance).items() if k != "config"}
    return config_type(**values)
