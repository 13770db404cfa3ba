"""Render docs/paper_protocols.yaml to docs/paper_protocols.md, and read the values it points at.

    python docs/protocols.py           # rewrite docs/paper_protocols.md
    python docs/protocols.py --check   # exit 1 when the .md is stale (tests/test_paper_protocols.py too)

The YAML is the source; the Markdown is generated, never edited by hand.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import yaml

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
PROTOCOLS = DOCS / "paper_protocols.yaml"
RENDERED = DOCS / "paper_protocols.md"
STATUSES = ("matches", "ours", "option", "open")


def load(path: Path = PROTOCOLS) -> dict[str, list[dict[str, Any]]]:
    return yaml.safe_load(path.read_text())["stages"]


def lookup(document: Any, dotted: str) -> Any:
    """The value at ``a.b.0.c`` (a number indexes a list); KeyError naming the missing part."""
    node = document
    for part in dotted.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(f"{dotted}: no {part!r}")
    return node


def config_value(entry: dict[str, Any], root: Path = REPO) -> Any:
    """The value the entry's paper config sets (a list of keys: their product)."""
    document = yaml.safe_load((root / entry["config"]).read_text())
    keys = entry["key"]
    if isinstance(keys, list):
        return math.prod(lookup(document, key) for key in keys)
    return lookup(document, keys)


def expected(entry: dict[str, Any]) -> Any:
    """What the config must hold: ``value`` where the project chose it, else the paper's."""
    return entry["value"] if "value" in entry else entry["paper"]


def _cell(value: Any) -> str:
    if isinstance(value, list) and not all(isinstance(v, (int, float)) for v in value):
        return " × ".join(f"`{v}`" for v in value)
    text = "null (all)" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def render(stages: dict[str, list[dict[str, Any]]]) -> str:
    lines = ["# Paper protocols", "",
             "Generated from `docs/paper_protocols.yaml` by `python docs/protocols.py`; do not edit by hand. "
             "`tests/test_paper_protocols.py` checks every paper config against it.", "",
             "LLF = \"Learning Lean Feedback\"; AF = the autoformalization engine; RLG = the RL-environment guide. "
             "*not given*: the design gives no number and the config's value is ours. Status: **matches** (the "
             "config or code does what the design says), **ours** (no number given; our choice), **option** (our "
             "variant, off in the paper config), **open** (not done yet).", ""]
    opened = []
    for stage, entries in stages.items():
        lines += [f"## {stage}", "", "| setting | paper | section | config / code | value there | status | note |",
                  "|---|---|---|---|---|---|---|"]
        for entry in entries:
            key = entry.get("key")
            key_cell = _cell(key) if isinstance(key, list) else f"`{key}`"
            where = (f"`{entry['config']}` {key_cell}" if "config" in entry
                     else f"`{entry['code']}`" if "code" in entry else "–")
            there = _cell(expected(entry)) if "config" in entry else "–"
            paper = "*not given*" if entry["paper"] == "not given" else _cell(entry["paper"])
            note = entry.get("ours", "")
            if "test" in entry:
                note = (note + "; " if note else "") + f"test `{entry['test'].split('::')[-1]}`"
            lines.append(f"| {entry['setting']} | {paper} | {entry.get('section', '–')} | {where} | {there} | "
                         f"{entry['status']} | {_cell(note)} |")
            if entry["status"] == "open":
                opened.append(f"- {stage}: {entry['setting']} ({entry.get('section', '')})")
        lines.append("")
    lines += ["## Open", "", *(opened or ["- none"]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the .md is not up to date")
    args = parser.parse_args(argv)
    text = render(load())
    if args.check:
        if not RENDERED.is_file() or RENDERED.read_text() != text:
            print(f"{RENDERED} is stale: run python docs/protocols.py", file=sys.stderr)
            return 1
        return 0
    RENDERED.write_text(text)
    print(RENDERED)
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m docs.protocols"))
