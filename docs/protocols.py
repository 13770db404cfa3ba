"""Render docs/paper_protocols.yaml to docs/paper_protocols.md, read the values it points at (each
paper config as its stage resolves it), and check its citations against the seed texts.

    python docs/protocols.py           # rewrite docs/paper_protocols.md
    python docs/protocols.py --check true   # exit 1 when the .md is stale (tests/test_paper_protocols.py too)

The YAML is the source; the Markdown is generated, never edited by hand. ``quote_problems`` is the
citation check: a quote occurs in its seed (whitespace-normalised), holds the row's value and sits in
the section named (headings parsed per the seed's style); a "not given" row's searched terms have no
number near them in the sections searched, except in sentences it lists as another setting's.
"""

from __future__ import annotations

import functools
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
PROTOCOLS = DOCS / "paper_protocols.yaml"
RENDERED = DOCS / "paper_protocols.md"
STATUSES = ("matches", "ours", "option", "open")


def load_document(path: Path = PROTOCOLS) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def load(path: Path = PROTOCOLS) -> dict[str, list[dict[str, Any]]]:
    return load_document(path)["stages"]


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
    """The value the entry's paper config resolves to (a list of keys: their product)."""
    document = resolved_config(entry["config"], root)
    keys = entry["key"]
    if isinstance(keys, list):
        return math.prod(lookup(document, key) for key in keys)
    return lookup(document, keys)


def expected(entry: dict[str, Any]) -> Any:
    """What the config must hold: ``value`` where the project chose it, else the paper's."""
    return entry["value"] if "value" in entry else entry["paper"]


# -- a config as its stage resolves it ---------------------------------------------------------------
# configs/<folder> of a tool (not a Lightning stage): the dataclass its entry point parses into
TOOL_CONFIGS = {
    "configs/data": "data.config:DataConfig",
    "configs/feedback_model/eval": "feedback_model.config:CascadeEvalConfig",
    "configs/sft/sample": "sft.config:SampleConfig",
    "configs/sft/eval": "sft.evaluate:EvaluateConfig",
    "configs/autoformalizer/eval": "autoformalizer.config:AutoformalizerConfig",
    "configs/search/eval": "search.evaluate:SearchEvalConfig",
    "configs/search/expert_iteration": "search.expert_iteration:ExpertIterationConfig",
}
# configs/<folder> of a Lightning stage whose entry point is not <stage>/train.py
TRAINING_CONFIGS = {"configs/autoformalizer/grpo": "autoformalizer.train_grpo"}


def _import(dotted: str) -> Any:
    import importlib

    module, _, name = dotted.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, name) if name else loaded


@functools.lru_cache(maxsize=None)
def _resolved(paths: tuple[str, ...], root: str) -> str:
    folder = str(Path(paths[0]).parent)
    args = [a for p in paths for a in ("--config", str(Path(root) / p))]
    if folder in TOOL_CONFIGS:
        from leanloop.tool import parse_config

        return parse_config(_import(TOOL_CONFIGS[folder]), args)[1]
    stage = TRAINING_CONFIGS.get(folder)
    if stage is None and folder.count("/") == 1 and (Path(root) / folder.split("/")[1] / "train.py").is_file():
        stage = f"{folder.split('/')[1]}.train"
    if stage is None:
        raise KeyError(f"{paths[0]}: no stage or tool resolves configs in {folder} (docs/protocols.py TOOL_CONFIGS)")
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # a dry run prints the resolved config
        return _import(stage).run([*args, "--dry_run", "true"]).config


def resolved_config(config: str | list[str], root: Path = REPO) -> dict[str, Any]:
    """The config (a list: layered, later wins) the way its stage resolves it: the tool's dataclass
    with its defaults, or the Lightning stage's dry run (class defaults and links included)."""
    paths = tuple(config) if isinstance(config, list) else (config,)
    return yaml.safe_load(_resolved(paths, str(root)))


# -- the seed texts: sections, quotes, numbers ------------------------------------------------------
def seeds_dir() -> Path:
    """The full texts of the designs (``../shared/seeds`` beside the checkout's shared data)."""
    env = os.environ.get("LEANLOOP_SEEDS")
    if env:
        return Path(env)
    shared = os.environ.get("LEANLOOP_SHARED_DATA")
    return (Path(shared).parent if shared else REPO.parent / "shared") / "seeds"


def normalise(text: str) -> str:
    """Every whitespace run -> one space (a quote is compared after this on both sides)."""
    return " ".join(text.split())


_NUMBERED = re.compile(r"^(\d+(?:\.\d+)*)\.? +[A-Z(]")
_APPENDIX = re.compile(r"^Appendix ([A-Z])\b")
_LETTERED = re.compile(r"^([A-H])(?:\.(\d+))? +[A-Z]")


def _heading(line: str, style: Any) -> tuple[str, str] | None:
    """(kind, label) when ``line`` is a heading of this seed's style: kind ``section`` (a numbered or
    named section) or ``paragraph`` (an unnumbered paragraph title inside one)."""
    text = line.strip()
    if isinstance(style, list):  # a seed without numbered headings: its heading lines, listed
        return ("section", text) if text in style else None
    if style == "markdown":
        m = re.match(r"^(#{1,6}) +(.+?)\.?$", text)
        if not m:
            return None
        title = m.group(2)
        if len(m.group(1)) == 4:
            return "paragraph", title
        if n := _NUMBERED.match(title):
            return "section", n.group(1)
        if a := _APPENDIX.match(title):
            return "section", f"App. {a.group(1)}"
        return "section", title
    if style == "numbered":  # plain-text headings: short lines opening with a section number
        if len(text) > 72 or text.endswith((".", ":", ";", ",")) or text.startswith("•"):
            return None
        if a := _APPENDIX.match(text):
            return "section", f"App. {a.group(1)}"
        if n := _NUMBERED.match(text):
            return "section", n.group(1)
        if (m := _LETTERED.match(text)) and len(text) < 60:
            return "section", f"{m.group(1)}.{m.group(2)}" if m.group(2) else f"App. {m.group(1)}"
        if text in ("Abstract", "Conclusion", "References", "TL;DR"):
            return "section", text
        return None
    if style == "questions":  # an explainer whose headings are its questions
        if len(text) <= 90 and text.endswith("?") and not text.startswith(("•", "#", '"')):
            return "section", text
        return None
    raise ValueError(f"unknown heading style {style!r}")


class Seed:
    """A seed's text, whitespace-normalised, with where each section and paragraph starts in it."""

    def __init__(
        self,
        name: str,
        text: str,
        sections: tuple[tuple[int, str], ...],
        paragraphs: tuple[tuple[int, str | None], ...],
    ):
        self.name, self.text, self.sections, self.paragraphs = name, text, sections, paragraphs

    def _at(self, marks: tuple[tuple[int, Any], ...], pos: int) -> Any:
        found = None
        for start, label in marks:
            if start > pos:
                break
            found = label
        return found

    def section_at(self, pos: int) -> str | None:
        return self._at(self.sections, pos)

    def paragraph_at(self, pos: int) -> str | None:
        return self._at(self.paragraphs, pos)

    def occurrences(self, quote: str) -> list[int]:
        needle, found, start = normalise(quote), [], 0
        while needle and (i := self.text.find(needle, start)) >= 0:
            found.append(i)
            start = i + 1
        return found

    def sentences(self) -> list[tuple[int, str]]:
        """(start, sentence): the text cut after each . ! ? that a space and a capital or digit follow."""
        out, start = [], 0
        for m in re.finditer(r"(?<=[.!?])\s+(?=[A-Z0-9\[•(])", self.text):
            out.append((start, self.text[start : m.start()]))
            start = m.end()
        out.append((start, self.text[start:]))
        return out


@functools.lru_cache(maxsize=None)
def load_seed(name: str, style_key: str) -> Seed:
    style = yaml.safe_load(style_key)
    path = seeds_dir() / name
    if not path.is_file():
        raise FileNotFoundError(f"seed text {path} not found (set LEANLOOP_SEEDS to the seeds folder)")
    parts, sections, paragraphs, pos = [], [], [], 0
    for line in path.read_text().splitlines():
        words = normalise(line)
        if not words:
            continue
        heading = _heading(line, style)
        if heading and heading[0] == "section":
            sections.append((pos, heading[1]))
            paragraphs.append((pos, None))
        elif heading:
            paragraphs.append((pos, heading[1]))
        parts.append(words)
        pos += len(words) + 1
    return Seed(name, " ".join(parts), tuple(sections), tuple(paragraphs))


def seed(stages_doc: dict[str, Any], name: str) -> Seed:
    """The seed file ``name`` as the protocol file's ``seeds`` table describes its headings."""
    info = stages_doc["seeds"][name]
    return load_seed(name, yaml.safe_dump(info["headings"]))


_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "twelve": 12,
    "sixteen": 16,
    "thirty-two": 32,
    "half": 0.5,
}
_NUMBER = re.compile(
    r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)(?:\s*\\times\s*10\^\{(-?\d+)\})?\s*(%|[kKM]\b)?"
    r"|\b(" + "|".join(sorted(_WORDS, key=len, reverse=True)) + r")\b",
    re.I,
)


def numbers_in(text: str) -> list[float]:
    """Every number a sentence states: digits (thousands commas, 3\\times 10^{-5}, 58.1%, 258k, 4.84M)
    and the number words; a percentage also counts as its fraction (5% -> 5 and 0.05)."""
    found = []
    for m in _NUMBER.finditer(text):
        if m.group(4):
            found.append(float(_WORDS[m.group(4).lower()]))
            continue
        digits = m.group(1).rstrip(",")
        if not re.fullmatch(r"\d{1,3}(,\d{3})*(\.\d+)?|\d+(\.\d+)?", digits):
            continue
        value = float(digits.replace(",", ""))
        if m.group(2):
            value *= 10.0 ** int(m.group(2))
        suffix = m.group(3)
        found.append(value)
        if suffix == "%":
            found.append(value / 100)
        elif suffix in ("k", "K"):
            found.append(value * 1e3)
        elif suffix == "M":
            found.append(value * 1e6)
    return found


def paper_numbers(value: Any) -> list[float] | None:
    """The numbers a row's ``paper`` value holds (a list: each), None for a non-numeric value."""
    items = value if isinstance(value, list) else [value]
    if items and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        return [float(v) for v in items]
    return None


NEAR = 80  # characters either side of a searched term in which a number counts as stating its value


def quote_problems(doc: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    """What is wrong with a row's citation of its seed (empty: nothing). A row with a paper value
    quotes its seed: the quote occurs there (whitespace-normalised), holds the value (numbers), and
    sits in the section named. A "not given" row names the terms searched for: every sentence of the
    searched sections with a number within NEAR characters of one (a term matches at a word start)
    is listed, with why it is another setting's, under ``unrelated``."""
    problems = []
    name = entry.get("seed")
    if name not in doc.get("seeds", {}):
        return [f"seed {name!r} is not a file of the seeds table"]
    text = seed(doc, name)
    if entry["paper"] == "not given":
        searched = entry.get("searched") or {}
        terms = [t.lower() for t in searched.get("terms", [])]
        if not terms:
            return ["a `not given` row names the terms searched for (searched.terms)"]
        within = searched.get("within")
        unrelated = [normalise(u["quote"]) for u in searched.get("unrelated") or []]
        for u in searched.get("unrelated") or []:
            if not u.get("why"):
                problems.append(f"searched.unrelated needs why the sentence is another setting's: {u['quote'][:60]!r}")
        for quoted in unrelated:
            if not text.occurrences(quoted):
                problems.append(f"searched.unrelated quotes what {name} does not say: {quoted[:60]!r}")
        pattern = re.compile("|".join(rf"\b{re.escape(t)}" for t in terms), re.I)
        for start, sentence in text.sentences():
            if within and text.section_at(start) not in within and text.paragraph_at(start) not in within:
                continue
            if any(u in sentence or sentence in u for u in unrelated):
                continue
            for m in pattern.finditer(sentence):
                near = sentence[max(0, m.start() - NEAR) : m.end() + NEAR]
                if numbers_in(near):
                    problems.append(f"{name} states a value where it says {m.group(0)!r}: {near!r}")
                    break
        return problems
    quote = entry.get("quote")
    if not quote:
        return ["a paper value quotes its seed (quote)"]
    places = text.occurrences(quote)
    if not places:
        return [f"the quote is not in {name}: {normalise(quote)[:80]!r}"]
    numbers = paper_numbers(entry["paper"])
    if numbers is not None:
        stated = numbers_in(normalise(quote))
        missing = [n for n in numbers if not any(math.isclose(n, s, rel_tol=1e-9) for s in stated)]
        if missing:
            problems.append(f"the quote does not state {missing}: {normalise(quote)[:80]!r}")
    sections = {text.section_at(p) for p in places}
    if entry.get("section") not in sections:
        problems.append(f"the quote sits in section {sorted(map(str, sections))}, not {entry.get('section')!r}")
    return problems


# -- coverage: the items a faithful implementation must reproduce, section by section ------------------
def inventory_problems(doc: dict[str, Any]) -> list[str]:
    """What is wrong with the ``inventory`` (each item a verbatim span of its seed, in the section named)."""
    problems = []
    for name, sections in (doc.get("inventory") or {}).items():
        if name not in doc.get("seeds", {}):
            problems.append(f"inventory names {name!r}, not a file of the seeds table")
            continue
        text = seed(doc, name)
        for section, items in sections.items():
            for item in items:
                places = text.occurrences(item)
                if not places:
                    problems.append(f"{name} does not say {normalise(item)[:70]!r} (inventory, {section})")
                elif str(section) not in {str(text.section_at(p)) for p in places}:
                    problems.append(
                        f"{normalise(item)[:60]!r} sits in {sorted({str(text.section_at(p)) for p in places})},"
                        f" not {section!r} (inventory)"
                    )
    return problems


def covered(doc: dict[str, Any], name: str, item: str) -> bool:
    """An item has a row when a row of its seed quotes it (the quote holds the item or the item the quote)."""
    want = normalise(item)
    for entries in doc["stages"].values():
        for entry in entries:
            quote = normalise(str(entry.get("quote") or ""))
            if entry.get("seed") == name and quote and (want in quote or quote in want):
                return True
    return False


def coverage(doc: dict[str, Any]) -> list[tuple[str, str, int, int, list[str]]]:
    """(seed, section, items with a row, items found, the items without a row), section by section."""
    out = []
    for name, sections in (doc.get("inventory") or {}).items():
        for section, items in sections.items():
            missing = [i for i in items if not covered(doc, name, i)]
            out.append((name, str(section), len(items) - len(missing), len(items), missing))
    return out


def coverage_lines(doc: dict[str, Any]) -> list[str]:
    """Coverage per seed (rows / items found), then per section (sections with an item without a row first)."""
    shorts = {name: info["short"] for name, info in doc.get("seeds", {}).items()}
    table = coverage(doc)
    lines = ["| seed | items with a row / items found | sections with every item covered |", "|---|---|---|"]
    for name in doc.get("inventory") or {}:
        rows = [r for r in table if r[0] == name]
        done, found = sum(r[2] for r in rows), sum(r[3] for r in rows)
        lines.append(
            f"| {shorts.get(name, name)} | {done} / {found} | {sum(r[2] == r[3] for r in rows)} / {len(rows)} |"
        )
    lines += ["", "| seed | section | items with a row / found | without a row |", "|---|---|---|---|"]
    for name, section, done, found, missing in sorted(table, key=lambda r: (r[2] == r[3], r[0], r[1])):
        lines.append(
            f"| {shorts.get(name, name)} | {section} | {done} / {found} | "
            f"{'; '.join(_cell(f'“{m}”') for m in missing) or '–'} |"
        )
    return lines


def _cell(value: Any) -> str:
    if isinstance(value, list) and not all(isinstance(v, (int, float)) for v in value):
        return " × ".join(f"`{v}`" for v in value)
    text = "null (all)" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def render(document: dict[str, Any]) -> str:
    seeds = document.get("seeds", {})
    shorts = ", ".join(f"{info['short']} = `{name}` ({info['title']})" for name, info in seeds.items())
    lines = [
        "# Paper protocols",
        "",
        "Generated from `docs/paper_protocols.yaml` by `python docs/protocols.py`; do not edit by hand. "
        "`tests/test_paper_protocols.py` checks every quote against the seed texts in `../shared/seeds/` and "
        "every paper config, as its stage resolves it, against this table.",
        "",
        f"Seeds: {shorts}.",
        "",
        "*not given*: the design gives no number (the terms searched for are listed) and the config's value is "
        "ours. Status: **matches** (the config or code does what the design says), **ours** (no number given; "
        "our choice), **option** (the project's variant, a named option; the note says why), **open** (not "
        "done yet).",
        "",
    ]
    opened = []
    for stage, entries in document["stages"].items():
        lines += [
            f"## {stage}",
            "",
            "| setting | paper | source | quote | config / code | value there | status | note |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for entry in entries:
            key = entry.get("key")
            key_cell = _cell(key) if isinstance(key, list) else f"`{key}`"
            config = entry.get("config")
            config_cell = " + ".join(f"`{c}`" for c in config) if isinstance(config, list) else f"`{config}`"
            where = f"{config_cell} {key_cell}" if config else f"`{entry['code']}`" if "code" in entry else "–"
            there = _cell(expected(entry)) if config else "–"
            short = seeds.get(entry.get("seed"), {}).get("short", entry.get("seed", "–"))
            if entry["paper"] == "not given":
                paper, source = "*not given*", short
                quote = "searched: " + ", ".join(f"“{t}”" for t in entry.get("searched", {}).get("terms", []))
            else:
                paper, source, quote = (
                    _cell(entry["paper"]),
                    f"{short} {entry.get('section', '')}",
                    f"“{entry.get('quote', '')}”",
                )
            note = entry.get("ours", "")
            if "example" in entry:
                note = (note + "; " if note else "") + f"example `{entry['example']}`"
            lines.append(
                f"| {entry['setting']} | {paper} | {source} | {_cell(quote)} | {where} | {there} | "
                f"{entry['status']} | {_cell(note)} |"
            )
            if entry["status"] == "open":
                opened.append(f"- {stage}: {entry['setting']} ({source} {entry.get('section', '')})")
        lines.append("")
    lines += ["## Open", "", *(opened or ["- none"]), ""]
    if document.get("inventory"):
        lines += [
            "## Coverage",
            "",
            "Each item is a setting, rule or metric a faithful implementation must reproduce, "
            "as the seed words it (`inventory` in the YAML); it has a row when a row quotes it.",
            "",
            *coverage_lines(document),
            "",
        ]
    return "\n".join(lines)


@dataclass
class ProtocolsConfig:
    """``python docs/protocols.py`` options."""

    check: bool = False
    """Exit 1 when the .md is not up to date instead of rewriting it."""


def main(argv: list[str] | None = None) -> int:
    from leanloop.tool import parse_config

    args, _ = parse_config(ProtocolsConfig, argv, prog="python docs/protocols.py", description=__doc__.splitlines()[0])
    text = render(load_document())
    if args.check:
        if not RENDERED.is_file() or RENDERED.read_text() != text:
            print(f"{RENDERED} is stale: run python docs/protocols.py", file=sys.stderr)
            return 1
        return 0
    RENDERED.write_text(text)
    print(RENDERED)
    document = load_document()
    print("\n".join(coverage_lines(document)))
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m docs.protocols"))
