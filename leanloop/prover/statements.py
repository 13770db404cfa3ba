"""One reader for every statement set: miniF2F (DeepSeek-Prover and Goedel-V2 copies, yangky11 files),
ProofNet (DeepSeek-Prover and rahul3613 copies), MOBench, NuminaMath-LEAN (its published parquet
shards, rows keyed by ``uuid``), or any JSONL or parquet of the same shapes.

The shipped sets disagree on layout: the header is a field or is inlined, the informal statement is a
Lean docstring or plain text, the declaration ends in ``:= by``, ``:= by sorry``, ``:= sorry`` or a
bare ``:=``, and some problems declare auxiliary definitions before the target. Each row is reduced
to the same :class:`Statement`, whose prompt text ``header + context + statement`` is the program a
prover continues.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator

from leanloop.jsonl import JsonlError, numbered_jsonl
from leanloop.paths import resolve_shared
from leanloop.prover.pass_rate import PassRateFilter, within_pass_rate

# Header lines: what a benchmark fixes before any declaration (imports, options, namespaces).
_HEADER_LINE = re.compile(r"^(import\s|set_option\s|open\s|$)")
# The target is the last top-level declaration that must be proved or constructed.
_DECLARATION = re.compile(
    r"^(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable)\s+)*"
    r"(theorem|lemma|def|abbrev|instance|example)\s+([^\s(:{\[⦃]+)",
    re.M,
)
_TRAILING_SORRY = re.compile(r"\s*\bsorry\s*$")
_ENDS_BY = re.compile(r":=\s*by$")
_ENDS_ASSIGN = re.compile(r":=$")


class StatementError(ValueError):
    """A statement row that cannot be turned into a header + declaration."""


@dataclass(frozen=True)
class Statement:
    name: str  # the problem's key in its set (unique there); candidates and pass@k group by it
    theorem: str  # the declared name of the target, what a program must prove
    header: str  # imports / options / opens, verbatim
    context: str  # docstring and auxiliary declarations between the header and the target
    statement: str  # the target declaration up to and including its final ``:= by``
    split: str | None = None
    informal: str | None = None  # informal statement when the set gives one
    source: str = ""  # the file it was read from

    @property
    def prompt(self) -> str:
        """The program prefix a prover continues; a proof is appended right after ``by``."""
        return self.header + self.context + self.statement

    def to_dict(self) -> dict:
        return asdict(self)


def _full_text(row: dict) -> str:
    """The Lean text of a row (header, informal docstring, declarations), whatever its layout."""
    for key in ("lean4_code", "lean_file"):
        if isinstance(row.get(key), str) and row[key].strip():
            return row[key]
    statement = row.get("formal_statement")
    if not isinstance(statement, str) or not statement.strip():
        raise StatementError("no formal_statement / lean4_code / lean_file field")
    if "header" in row:
        prefix = row.get("informal_prefix") or ""
        if prefix and not prefix.endswith("\n"):
            prefix += "\n"
        return str(row["header"] or "") + prefix + statement
    return statement


def split_statement(text: str) -> tuple[str, str, str, str]:
    """Split Lean text into (header, context, declaration ending in ``:= by``, declared name)."""
    lines = text.splitlines(keepends=True)
    cut = 0
    for line in lines:
        if not _HEADER_LINE.match(line.strip()):
            break
        cut += 1
    header = "".join(lines[:cut])
    rest = "".join(lines[cut:])
    matches = list(_DECLARATION.finditer(rest))
    if not matches:
        raise StatementError("no theorem/lemma/def declaration found after the header")
    target = matches[-1]
    context, declaration = rest[: target.start()], rest[target.start() :]
    declaration = _TRAILING_SORRY.sub("", declaration.rstrip()).rstrip()
    if _ENDS_ASSIGN.search(declaration):
        declaration += " by"  # a term-mode ``:=`` statement takes a tactic proof just as well
    elif not _ENDS_BY.search(declaration):
        raise StatementError(
            f"declaration of '{target.group(2)}' does not end in ':=', ':= by' or "
            "':= by sorry'; cannot tell where the proof goes"
        )
    return header, context, declaration, target.group(2)


def _informal(row: dict) -> str | None:
    for key in ("informal_stmt", "informal_statement", "informal_prefix", "problem"):
        if isinstance(row.get(key), str) and row[key].strip():
            return row[key]
    return None


def statement_from_row(row: dict, source: str = "") -> Statement:
    name = row.get("name") or row.get("problem_id") or row.get("id") or row.get("uuid")
    if not isinstance(name, str) or not name.strip():
        raise StatementError("row has no name / problem_id / id / uuid")
    header, context, declaration, theorem = split_statement(_full_text(row))
    split = row.get("split")
    return Statement(
        name=name,
        theorem=theorem,
        header=header,
        context=context,
        statement=declaration,
        split=str(split) if split is not None else None,
        informal=_informal(row),
        source=source,
    )


def _rows(path: Path) -> Iterator[tuple[int, dict]]:
    """Numbered rows of a JSONL file, a parquet file (NuminaMath-LEAN publishes parquet shards) or a
    folder of either (its files in name order, numbered on)."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".jsonl", ".parquet"))
        if not files:
            raise StatementError(f"{path}: no .jsonl or .parquet files in the folder")
        offset = 0
        for file in files:
            number = 0
            for number, row in _rows(file):
                yield offset + number, row
            offset += number
        return
    if path.suffix == ".parquet":
        import pandas as pd

        frame = pd.read_parquet(path)
        for number, row in enumerate(frame.to_dict("records"), start=1):
            yield number, {k: None if isinstance(v, float) and v != v else v for k, v in row.items()}  # NaN: missing
        return
    try:
        for number, row in numbered_jsonl(path):
            if not isinstance(row, dict):
                raise StatementError(f"{path}:{number}: expected a JSON object per line")
            yield number, row
    except JsonlError as error:
        raise StatementError(str(error)) from error


@dataclass
class StatementSet:
    statements: list[Statement]
    skipped: list[dict]  # {"line", "name", "reason"} for rows that could not be read

    def __len__(self) -> int:
        return len(self.statements)

    def select(
        self,
        names: Iterable[str] | None = None,
        splits: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        limit: int | None = None,
    ) -> "StatementSet":
        keep, drop = set(names or ()), set(exclude or ())
        wanted_splits = set(splits or ())
        chosen = [
            s
            for s in self.statements
            if (not keep or s.name in keep) and (not wanted_splits or s.split in wanted_splits) and s.name not in drop
        ]
        return StatementSet(chosen[:limit] if limit else chosen, self.skipped)


def read_statements(path: str | Path) -> StatementSet:
    """Read a statement set: a JSONL or parquet file or a folder of them (``shared://`` paths allowed). Rows that cannot be parsed are kept in
    ``skipped`` with the reason; duplicate names get a ``#2``, ``#3`` suffix (the DeepSeek ProofNet
    copy reuses ``exercise_3_3`` for two different books' exercises)."""
    path = resolve_shared(path)
    if not path.exists():
        raise FileNotFoundError(f"statement set {path} not found (shared://statements/<file> names the shipped sets)")
    statements: list[Statement] = []
    skipped: list[dict] = []
    seen: dict[str, int] = {}
    for number, row in _rows(path):
        try:
            statement = statement_from_row(row, source=path.name)
        except StatementError as error:
            skipped.append({"line": number, "name": row.get("name"), "reason": str(error)})
            continue
        count = seen.get(statement.name, 0) + 1
        seen[statement.name] = count
        if count > 1:
            statement = Statement(**{**statement.to_dict(), "name": f"{statement.name}#{count}"})
        statements.append(statement)
    if not statements:
        raise StatementError(f"{path}: no readable statements ({len(skipped)} rows skipped: {skipped[:1]})")
    return StatementSet(statements, skipped)


@dataclass
class StatementsConfig:
    """Which statements to sample: a statement JSONL and optional filters."""

    path: str = "shared://statements/minif2f_goedel_prover_v2_repaired.jsonl"
    """A shipped set (``shared://statements/<file>``) or any JSONL of the same shape."""
    splits: list[str] | None = None
    """Keep rows of these splits of the statement set (its own ``split`` field)."""
    names: list[str] | None = None
    """Keep only these statement names."""
    corpus: str | None = None
    """A labelled corpus run (``artifacts/data/<run>``); with ``corpus_splits``, keep only the
    statements the corpus puts in those splits (e.g. ``[test]`` for a theorem-disjoint evaluation)."""
    corpus_splits: list[str] | None = None
    limit: int | None = None
    """The first N statements after filtering (smoke runs)."""
    pass_rate: PassRateFilter | None = None
    """Offline pass-rate filter from sampled attempts (RL training statements)."""


def load_statement_set(config: StatementsConfig) -> list[Statement]:
    """The statements to sample, after the split / name / corpus filters, in file order."""
    statements = read_statements(config.path)
    names = set(config.names) if config.names else None
    if config.corpus is not None:
        from leanloop.corpus import corpus_splits

        if not config.corpus_splits:
            raise ValueError("statements.corpus needs statements.corpus_splits (e.g. [test])")
        wanted = set(config.corpus_splits)
        in_corpus = {n for n, split in corpus_splits(config.corpus).items() if split in wanted}
        names = in_corpus if names is None else names & in_corpus
    if config.pass_rate is not None:
        kept = within_pass_rate(config.pass_rate)
        names = kept if names is None else names & kept
    chosen = [
        s
        for s in statements.statements
        if (names is None or s.name in names) and (not config.splits or s.split in set(config.splits))
    ]
    if config.limit:
        chosen = chosen[: config.limit]
    if not chosen:
        raise ValueError(
            f"no statement of {config.path} passes the filters (splits={config.splits}, "
            f"names={config.names}, corpus={config.corpus} {config.corpus_splits}, "
            f"pass_rate={config.pass_rate})"
        )
    return chosen
