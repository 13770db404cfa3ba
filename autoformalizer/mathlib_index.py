"""The Mathlib declaration index: load (and subset) it, hash it, look names up, build one from sources.

The default index is the shipped one (``shared://mathlib/mathlib_declarations.jsonl.gz``: 272,035
declarations of Mathlib commit 3b9fc57e, rows ``{name, kind, module, line, sig, doc, ...}``).
Embedding all of it takes long on a few CPU cores, so :class:`IndexConfig` selects a subset by
module prefix, kind and a cap; the content hash of exactly the rows kept keys the embedding cache.

``leanloop mathlib-index --mathlib PATH --out FILE.jsonl.gz`` builds an index in the same format
from a user's Mathlib checkout with :func:`extract_declarations`, a text extractor over
``Mathlib/**/*.lean`` (no Lean needed; it reads namespaces, sections, docstrings and signatures,
and like the shipped index it does not see ``variable`` binders or generated names).
"""

from __future__ import annotations

import difflib
import gzip
import hashlib
import heapq
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from tqdm.auto import tqdm

from leanloop.paths import resolve_shared

DEFAULT_INDEX = "shared://mathlib/mathlib_declarations.jsonl.gz"
SIG_CHARS = 600
DOC_CHARS = 600


@dataclass
class IndexConfig:
    """Which declarations to index. Empty lists keep everything; ``max_declarations`` caps the
    count after the filters (file order), e.g. for the embedded default."""

    path: str = DEFAULT_INDEX
    modules: list[str] = field(default_factory=list)  # module-name prefixes, e.g. "Mathlib.Analysis.SpecialFunctions"
    kinds: list[str] = field(default_factory=list)  # e.g. ["theorem", "lemma", "def"]
    include_names: list[str] = field(default_factory=list)  # always kept when present (evaluation targets)
    max_declarations: int | None = None


@dataclass(frozen=True)
class Declaration:
    name: str
    kind: str
    module: str
    sig: str
    doc: str | None = None

    def text(self) -> str:
        """What the embedder and BM25 read: name, signature, docstring."""
        doc = f" -- {self.doc}" if self.doc else ""
        return f"{self.name} {self.sig}{doc}"

    def lean(self) -> str:
        """One line for the prompt, in Lean syntax."""
        keyword = "theorem" if self.kind in ("theorem", "lemma") else self.kind
        return f"{keyword} {self.name} {self.sig}".strip()


def _keep(row: dict[str, Any], config: IndexConfig, includes: set[str]) -> bool:
    if row["name"] in includes:
        return True
    if config.modules and not any(
        row["module"] == m or row["module"].startswith(m + ".") or row["module"].startswith(m) and m.endswith(".")
        for m in config.modules
    ):
        return False
    return not config.kinds or row["kind"] in config.kinds


def _raw_field(line: str, key: str) -> str | None:
    """A string field read straight from a JSON line (names hold no escaped quotes); None if the
    layout is unexpected, in which case the caller parses the line."""
    for marker in (f'"{key}":"', f'"{key}": "'):
        start = line.find(marker)
        if start >= 0:
            start += len(marker)
            end = line.find('"', start)
            if end > start and "\\" not in line[start:end]:
                return line[start:end]
    return None


class MathlibIndex:
    """Declarations in a fixed order, with name lookup and fuzzy matching."""

    def __init__(self, declarations: Iterable[Declaration], source: str = "<memory>"):
        self.declarations = list(declarations)
        if not self.declarations:
            raise ValueError(
                f"the Mathlib index from {source} is empty: check the path and the subset "
                "filters (modules/kinds/max_declarations)"
            )
        self.source = source
        self.by_name = {d.name: i for i, d in enumerate(self.declarations)}
        self._tokens: dict[str, list[int]] | None = None

    @classmethod
    def load(cls, config: IndexConfig | None = None) -> "MathlibIndex":
        config = config or IndexConfig()
        path = resolve_shared(config.path)
        if not path.is_file():
            raise FileNotFoundError(
                f"Mathlib index {path} not found; point retrieval.index.path at a "
                "declarations JSONL(.gz) (build one with `leanloop mathlib-index`)"
            )
        includes = set(config.include_names)
        rows: list[Declaration] = []
        capped = 0
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            for line_no, line in enumerate(handle, 1):
                # cheap prefilter before JSON parsing (most rows of a subset are skipped here)
                if config.modules and not any(f'"{m}' in line for m in config.modules):
                    name = _raw_field(line, "name") if includes else ""
                    if name is not None and name not in includes:
                        continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{line_no}: not a JSON line ({exc.msg})") from exc
                if not _keep(row, config, includes):
                    continue
                if (
                    config.max_declarations is not None
                    and len(rows) >= config.max_declarations
                    and row["name"] not in includes
                ):
                    capped += 1
                    continue
                rows.append(Declaration(row["name"], row["kind"], row["module"], row.get("sig") or "", row.get("doc")))
        index = cls(rows, source=str(path))
        index.skipped_by_cap = capped
        return index

    def __len__(self) -> int:
        return len(self.declarations)

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def __getitem__(self, name: str) -> Declaration:
        return self.declarations[self.by_name[name]]

    @property
    def content_hash(self) -> str:
        """sha256 of the rows as indexed (order included): the embedding cache key."""
        digest = hashlib.sha256()
        for d in self.declarations:
            digest.update(json.dumps([d.name, d.kind, d.module, d.sig, d.doc], ensure_ascii=False).encode())
            digest.update(b"\n")
        return "sha256:" + digest.hexdigest()

    # -------------------------------------------------------------- fuzzy lookup (System A)

    @staticmethod
    def name_tokens(name: str) -> list[str]:
        return [t for t in re.split(r"[._'\s]+", name.lower()) if t]

    def _token_index(self) -> dict[str, list[int]]:
        if self._tokens is None:
            tokens: dict[str, list[int]] = defaultdict(list)
            for i, d in enumerate(self.declarations):
                for t in set(self.name_tokens(d.name)):
                    tokens[t].append(i)
            self._tokens = dict(tokens)
        return self._tokens

    def fuzzy(self, name: str, k: int = 5, min_score: float = 0.6, shortlist: int = 400) -> list[tuple[str, float]]:
        """Indexed names closest to ``name`` (an identifier Lean did not know). Candidates are the
        ``shortlist`` names sharing most name tokens (split at ``.``/``_``), ranked by the difflib
        ratio of the lower-cased names (or of their last components) and the token overlap."""
        if name in self.by_name:
            return [(name, 1.0)]
        query_tokens = self.name_tokens(name)
        if not query_tokens:
            return []
        index = self._token_index()
        qset = set(query_tokens)
        shared: Counter[int] = Counter()
        for token in qset:
            shared.update(index.get(token, ()))
        # difflib only on the names sharing the most tokens (postings of "le" or "real" are huge)
        pool = heapq.nlargest(
            shortlist, shared.items(), key=lambda item: (item[1], -len(self.declarations[item[0]].name))
        )
        query = name.lower()
        last = query.rsplit(".", 1)[-1]
        scored = []
        matcher = difflib.SequenceMatcher(autojunk=False)
        matcher.set_seq2(query)
        for i, count in pool:
            cand = self.declarations[i].name
            matcher.set_seq1(cand.lower())
            full = matcher.ratio()
            tail = difflib.SequenceMatcher(None, cand.lower().rsplit(".", 1)[-1], last).ratio()
            cand_tokens = set(self.name_tokens(cand))
            overlap = count / len(qset | cand_tokens)
            score = max(full, tail * 0.95) * 0.8 + overlap * 0.2
            if score >= min_score:
                scored.append((cand, round(score, 4)))
        scored.sort(key=lambda item: (-item[1], len(item[0]), item[0]))
        return scored[:k]


# ------------------------------------------------------------------ extraction from sources

_KINDS = r"theorem|lemma|def|abbrev|instance|structure|class\s+inductive|class|inductive|opaque|alias"
_DECL = re.compile(
    rf"^(?P<attrs>(?:@\[[^\n]*\]\s*)*)(?P<mods>(?:(?:private|protected|noncomputable|partial|unsafe|nonrec)\s+)*)"
    rf"(?P<kind>{_KINDS})\s+(?P<name>(?:«[^»]+»|[^\s(\[{{:⦃«])+)",
    re.M,
)
_SCOPE = re.compile(r"^(?:noncomputable\s+)?(?P<word>namespace|section|end|mutual)\b[ \t]*(?P<arg>[^\s]*)", re.M)
_DOC_BEFORE = re.compile(r"/--(?P<doc>(?:(?!-/).)*)-/\s*(?:@\[[^\n]*\]\s*)*$", re.S)
_SIG_END = re.compile(r":=|\bwhere\b|^\s*\||\bderiving\b", re.M)


def _collapse(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def extract_file(text: str, module: str) -> Iterator[dict[str, Any]]:
    """Declarations of one Lean source file, in the shipped index's row format."""
    from leanloop.lean.acceptance.masking import mask

    masked = mask(text).text
    events = [(m.start(), "scope", m) for m in _SCOPE.finditer(masked)]
    events += [(m.start(), "decl", m) for m in _DECL.finditer(masked)]
    events.sort(key=lambda e: e[0])
    decl_starts = [m.start() for m in _DECL.finditer(masked)] + [len(masked)]
    scopes: list[tuple[str, list[str]]] = []  # (kind, namespace parts it added)
    for pos, what, match in events:
        if what == "scope":
            word, arg = match.group("word"), match.group("arg")
            if word == "namespace" and arg:
                scopes.append(("namespace", arg.split(".")))
            elif word in ("section", "mutual"):
                scopes.append((word, []))
            elif word == "end" and scopes:
                scopes.pop()
            continue
        if "private" in match.group("mods"):
            continue
        name = match.group("name")
        kind = re.sub(r"\s+", "_", match.group("kind"))
        kind = "class_inductive" if kind == "class_inductive" else kind
        namespace = [part for _, parts in scopes for part in parts]
        full = name.removeprefix("_root_.") if name.startswith("_root_.") else ".".join(namespace + [name])
        end = next(s for s in decl_starts if s > pos)
        body = masked[match.end() : end]
        if kind == "alias":  # `alias x := target` (or `alias ⟨mp, mpr⟩ := iff`): the sig is the target
            target = body[body.find("⟩") + 1 :] if name.startswith("⟨") else body
            stop = target.find(":=")
            sig = ":= " + target[stop + 2 :].split("\n")[0].strip() if stop >= 0 else ""
        else:
            stop = _SIG_END.search(body)
            sig = body[: stop.start()] if stop else body
        raw_attrs = text[match.start("attrs") : match.end("attrs")]
        doc_match = _DOC_BEFORE.search(text[: pos + len(match.group("attrs"))])
        doc = _collapse(doc_match.group("doc"), DOC_CHARS) if doc_match else None
        row = {
            "name": full,
            "kind": kind,
            "module": module,
            "line": text.count("\n", 0, match.start("kind")) + 1,
            "sig": _collapse(sig, SIG_CHARS),
            "doc": doc,
            "attrs": [a.strip()[2:-1] for a in re.findall(r"@\[[^\n]*?\]", raw_attrs)],
        }
        if "protected" in match.group("mods"):
            row["protected"] = True
        if name.startswith("⟨"):  # alias ⟨mp, mpr⟩ := h names the two directions of an iff
            inner = body[: body.find("⟩")] if "⟩" in body else ""
            for part in (name[1:] + inner).replace("⟩", "").split(","):
                if part.strip():
                    yield {**row, "name": ".".join(namespace + [part.strip()])}
            continue
        yield row


def extract_declarations(mathlib_root: str | Path) -> Iterator[dict[str, Any]]:
    """Every declaration of ``<root>/Mathlib/**/*.lean`` (the module name is the path)."""
    root = Path(mathlib_root)
    sources = sorted((root / "Mathlib").rglob("*.lean"))
    if not sources:
        raise FileNotFoundError(f"no Mathlib/**/*.lean under {root}: pass the root of a Mathlib checkout")
    for path in tqdm(sources, desc="extract declarations", unit="file"):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path} is not UTF-8 ({exc.reason}); is this a Mathlib checkout?") from exc
        yield from extract_file(text, module)


def write_index(rows: Iterable[dict[str, Any]], out: str | Path) -> int:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    count = 0
    with gzip.open(tmp, "wt", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    tmp.replace(out)
    return count


@dataclass
class BuildIndexConfig:
    """``leanloop mathlib-index``: a declaration index from a Mathlib checkout."""

    mathlib: str
    """Root of a Mathlib checkout (holds Mathlib/)."""
    out: str = "artifacts/autoformalizer/mathlib_index/mathlib_declarations.jsonl.gz"
    """Output .jsonl.gz."""


def build_index(config: BuildIndexConfig) -> int:
    count = write_index(extract_declarations(config.mathlib), config.out)
    print(json.dumps({"declarations": count, "out": config.out}))
    return count


def index_command(argv: list[str] | None = None, prog: str = "leanloop mathlib-index") -> int:
    from leanloop.tool import parse_config

    config, _ = parse_config(BuildIndexConfig, argv, prog=prog, description=BuildIndexConfig.__doc__)
    return 0 if build_index(config) else 1
