"""Reading candidate programs: JSONL / JSONL.gz / parquet rows -> normalized, deduplicated items."""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from data.config import DataConfig, SourceConfig
from data.names import name_mismatch
from leanloop.lean.recordings import normalize_program
from leanloop.paths import resolve_shared


@dataclass
class Candidate:
    id: str
    source: str
    row: int  # 1-based row (line) number in the source file
    name: str
    program: str  # normalized (leanloop.lean.recordings.normalize_program, the replay key)
    header: str | None
    statement: str | None
    prover: str | None
    origin: str | None
    recorded: str | None  # "pass" / "fail" / "system_error" / None
    duplicates: int = 0


@dataclass
class Duplicate:
    source: str
    row: int
    of_id: str
    recorded: str | None


@dataclass
class InputRowError:
    id: str
    source: str
    row: int
    reason: str
    name: str | None = None
    prover: str | None = None
    origin: str | None = None
    recorded: str | None = None
    program: str | None = None


@dataclass
class CandidateSet:
    candidates: list[Candidate] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)
    errors: list[InputRowError] = field(default_factory=list)
    per_source: dict[str, Counter] = field(default_factory=dict)


def item_id(name: str, program: str) -> str:
    """Stable id of a (theorem, program) pair: the dedup key and the journal key."""
    return hashlib.sha256(f"{name}\0{program}".encode()).hexdigest()[:20]


def field_value(row: dict[str, Any], dotted: str | None) -> Any:
    """``row[a][b]`` for ``"a.b"``; None when any part is missing."""
    if not dotted:
        return None
    value: Any = row
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def join_proof(header: str, statement: str, proof: str) -> str:
    """A full program from a trusted header, a statement and a proof body.

    Statements come as ``... := by``, ``... := by sorry``, ``... :=`` or bare; bodies as tactic
    lines (indented or not), ``by ...`` or ``:= ...``."""
    stmt = statement.rstrip()
    if stmt.endswith("sorry"):
        stmt = stmt[: -len("sorry")].rstrip()
    body = proof.strip("\n")
    stripped = body.lstrip()
    if stripped.startswith(":="):
        stmt = stmt.removesuffix("by").rstrip().removesuffix(":=").rstrip()
        joined = f"{stmt} {stripped}"
    elif stmt.endswith(":= by"):
        if stripped.startswith("by"):
            joined = f"{stmt.removesuffix('by').rstrip()} {stripped}"
        else:
            lines = body.split("\n")
            if not lines[0][:1].isspace():  # tactic lines must be indented under the declaration
                lines = ["  " + line if line.strip() else line for line in lines]
            joined = stmt + "\n" + "\n".join(lines)
    elif stmt.endswith(":="):
        joined = f"{stmt} {stripped}"
    else:
        joined = f"{stmt} := {stripped}" if stripped.startswith("by") else f"{stmt} := by\n  {stripped}"
    head = header if header.endswith("\n") or not header else header + "\n"
    return head + joined + "\n"


def load_statements(paths: list[str]) -> dict[str, tuple[str | None, str | None]]:
    """name -> (statement, header) from trusted statement files; earlier files win."""
    table: dict[str, tuple[str | None, str | None]] = {}
    for path in paths:
        file = resolve_shared(path)
        if not file.is_file():
            raise FileNotFoundError(f"statements file {path} not found at {file} (config key `statements`)")
        for number, raw in _lines(file):
            row = json.loads(raw)
            statement = row.get("formal_statement") or row.get("statement")
            if row.get("name") and row["name"] not in table:
                table[row["name"]] = (statement, row.get("header"))
    return table


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            yield number, raw


def _parquet_rows(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Rows of a parquet file, one row group at a time, so a corrupt row group costs only its own
    rows: each becomes a row error (the footer says how many there were) and reading goes on. A
    file whose footer is unreadable (truncated, not parquet) is one row error."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def why(exc: Exception) -> str:
        return f"{type(exc).__name__}: {' '.join(str(exc).split())}"

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        yield 1, f"{path.name} is not a readable parquet file ({why(exc)})"
        return
    number = 0
    for group in range(parquet.num_row_groups):
        size, read = parquet.metadata.row_group(group).num_rows, 0
        try:
            for batch in parquet.iter_batches(row_groups=[group]):
                for row in batch.to_pylist():
                    number, read = number + 1, read + 1
                    yield number, row
        except (pa.ArrowException, OSError) as exc:
            reason = f"{path.name}: row group {group} unreadable ({why(exc)})"
            for _ in range(max(1, size - read)):
                number += 1
                yield number, reason


def _rows(source: SourceConfig, path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(row number, row dict) or (row number, reason the row is unreadable)."""
    if path.suffix == ".parquet":
        yield from _parquet_rows(path)
        return
    number = 0
    try:
        for number, raw in _lines(path):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, f"not valid UTF-8 ({exc.reason} at byte {exc.start})"
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                yield number, f"malformed JSON ({exc.msg} at column {exc.colno})"
                continue
            if not isinstance(row, dict):
                yield number, f"a JSON {type(row).__name__}, expected an object"
                continue
            yield number, row
    except (EOFError, OSError, zlib.error) as exc:  # truncated or corrupt gzip: keep what was read
        yield number + 1, f"{path.name} unreadable after row {number} ({type(exc).__name__}: {exc})"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def nul_reason(fields: dict[str, str | None]) -> str | None:
    """Why text with a NUL character is bad input (see the module docstring), or None."""
    for label, value in fields.items():
        at = value.find("\0") if value else -1
        if at >= 0:
            line = value.count("\n", 0, at) + 1
            column = at - (value.rfind("\n", 0, at) + 1)
            return (
                f"a NUL character (U+0000) in the {label} at line {line}, column {column}: not Lean source "
                "text (binary or corrupted data)"
            )
    return None


def _recorded(source: SourceConfig, row: dict[str, Any]) -> str | None:
    if source.recorded_system_error_field and field_value(row, source.recorded_system_error_field):
        return "system_error"
    if source.recorded_verdict_field:
        value = field_value(row, source.recorded_verdict_field)
        return None if value is None else ("pass" if value is True or value == "true" else "fail")
    return source.recorded_verdict


def load_candidates(config: DataConfig, default_header: str) -> CandidateSet:
    """Read every configured source; see the module docstring for where each row goes."""
    statements = load_statements(config.statements)
    out = CandidateSet()
    by_id: dict[str, Candidate] = {}
    for source in config.sources:
        path = resolve_shared(source.path)
        if not path.is_file():
            raise FileNotFoundError(f"candidate source {source.name!r}: {source.path} not found at {path}")
        counts = out.per_source.setdefault(source.name, Counter())
        for number, row in _rows(source, path):
            if source.limit is not None and counts["rows"] >= source.limit:
                break
            counts["rows"] += 1
            error_id = f"{source.name}:{number}"
            if isinstance(row, str):
                out.errors.append(InputRowError(error_id, source.name, number, row))
                counts["input_error"] += 1
                continue
            name = _text(field_value(row, source.name_field))
            prover = _text(field_value(row, source.prover_field)) or source.prover
            origin = _text(field_value(row, source.origin_field))
            recorded = _recorded(source, row)

            def fail(reason: str, program: str | None = None) -> None:
                out.errors.append(
                    InputRowError(error_id, source.name, number, reason, name, prover, origin, recorded, program)
                )
                counts["input_error"] += 1

            if name is None:
                fail(f"missing or empty `{source.name_field}` (the theorem name)")
                continue
            trusted_statement, trusted_header = statements.get(name, (None, None))
            statement = _text(field_value(row, source.statement_field)) or trusted_statement
            header = _text(field_value(row, source.header_field)) or trusted_header or default_header
            raw_program = field_value(row, source.program_field)
            proof = field_value(row, source.proof_field)
            if raw_program is not None and not isinstance(raw_program, str):
                fail(f"`{source.program_field}` is a {type(raw_program).__name__}, expected text")
                continue
            if _text(raw_program):
                program = raw_program
            elif _text(proof):
                if statement is None:
                    fail(
                        f"a proof body but no statement for `{name}` (no `{source.statement_field}` field and "
                        "no trusted statement file names it)"
                    )
                    continue
                program = join_proof(header, statement, proof)
            else:
                # a sampler (sft.sample) writes why it could not extract a program; keep that reason
                upstream = _text(row.get("extraction_reason"))
                fail(
                    f"no program: `{source.program_field}` and `{source.proof_field}` are missing or empty"
                    + (f" (sampler: {upstream})" if upstream else "")
                )
                continue
            if len(program) > config.max_input_chars:
                fail(f"program is {len(program):,} characters, over the input limit of {config.max_input_chars:,}")
                continue
            nul = nul_reason({"name": name, "program": program, "statement": statement, "header": header})
            if nul:
                fail(nul, program)
                continue
            # splits are keyed on the name: a mislabeled row would carry its program into another split
            mismatch = name_mismatch(name, program)
            if mismatch:
                fail(mismatch, program)
                continue
            program = normalize_program(program)
            identifier = item_id(name, program)
            if identifier in by_id:
                by_id[identifier].duplicates += 1
                out.duplicates.append(Duplicate(source.name, number, identifier, recorded))
                counts["duplicate"] += 1
                continue
            candidate = Candidate(
                identifier, source.name, number, name, program, header, statement, prover, origin, recorded
            )
            by_id[identifier] = candidate
            out.candidates.append(candidate)
            counts["unique"] += 1
    return out
