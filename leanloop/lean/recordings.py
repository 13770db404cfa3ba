"""Real recorded Lean answers from ``../shared/data``, indexed by normalized program text."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from leanloop.lean.replies import (
    lean_version_from_toolchain,
    response_from_kimina_result,
    response_from_repl_reply,
    response_from_rl_lean,
)
from leanloop.lean.types import LeanResponse
from leanloop.jsonl import numbered_jsonl
from leanloop.paths import resolve_shared

# Config-friendly names for the shipped recordings, in the default order of preference.
SOURCE_ALIASES: dict[str, str] = {
    "rl_lean": "shared://candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz",
    "kimina_match": "shared://lean_repl/kimina_match_pairs.jsonl",
    "repl_io": "shared://lean_repl/repl_io_pairs.jsonl",
    "repl_all_versions": "shared://lean_repl/all_versions/repl_io_pairs.derived.jsonl",
}
DEFAULT_SOURCES: tuple[str, ...] = tuple(SOURCE_ALIASES)

# kimina_match_pairs.jsonl rows carry no version; the data README records the server's Lean.
KIMINA_MATCH_LEAN_VERSION = "v4.15.0"


def normalize_program(text: str) -> str:
    """The replay key. Line endings become ``\\n``, trailing whitespace is cut from every line and
    trailing blank lines are dropped: sources differ exactly there (RL-Lean codes have no final
    newline, Kimina's do; editors trim line ends) and none of it moves a token, so Lean's messages
    keep their positions. Leading lines and indentation are kept: they shift every position (and
    indentation is syntax in Lean), so two programs differing there are different programs."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


@dataclass(frozen=True)
class Recording:
    """One recorded answer: the program as recorded, Lean's response, and where it came from."""

    program: str
    response: LeanResponse
    source: str  # the alias or path it was loaded from
    record_id: str  # unique within its source: "custom_id (line N)", "tag:test#index"

    def fresh_response(self) -> LeanResponse:
        """A copy callers may mutate without touching the index."""
        return replace(self.response, messages=list(self.response.messages), tactics=list(self.response.tactics))


def resolve_source(source: str) -> Path:
    path = resolve_shared(SOURCE_ALIASES.get(source, source))
    if not path.is_file():
        known = ", ".join(SOURCE_ALIASES)
        raise FileNotFoundError(
            f"recording source {source!r} not found at {path}; give one of {known} "
            "or a path (shared://... allowed) to a JSONL / JSONL.gz recording file"
        )
    return path


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    return numbered_jsonl(path)  # a line that is not JSON raises JsonlError (a ValueError) naming file:line


def _rl_lean(rows: Iterable[tuple[int, dict]], source: str) -> Iterator[Recording]:
    for number, row in rows:
        # custom_id repeats across the nine rounds; the line number makes the id unique
        response = response_from_rl_lean(
            row.get("compilation_result"),
            row["code"],
            lean_version=lean_version_from_toolchain(row.get("lean_version")),
        )
        yield Recording(row["code"], response, source, f"{row.get('custom_id')} (line {number})")


def _kimina_pairs(rows: Iterable[tuple[int, dict]], source: str) -> Iterator[Recording]:
    for number, row in rows:
        version = row.get("lean_version") or KIMINA_MATCH_LEAN_VERSION
        for result in row["server_response"].get("results") or []:
            yield Recording(
                row["code"],
                response_from_kimina_result(result, row["code"], lean_version=version),
                source,
                f"{row.get('id')} (line {number})",
            )


# Request fields that only add detail to a reply. Anything else (env, incr, replace, setOptions,
# pickles) ties the reply to earlier REPL state or changes how Lean elaborates: not a program.
_OUTPUT_ONLY_FIELDS = {
    "cmd",
    "path",
    "allTactics",
    "infotree",
    "rootGoals",
    "incrementality",
    "declarations",
    "sorries",
    "conclusions",
    "namespaces",
    "declTypes",
    "record",
    "discard",
    "gc",
    "timeout",
    "tactics",
    "premises",
    "ast",
}


def _standalone_program(request: Any, files: dict[str, str]) -> str | None:
    """The program text of a request that needs no earlier REPL state, else None."""
    if not isinstance(request, dict) or not request.keys() <= _OUTPUT_ONLY_FIELDS:
        return None
    if isinstance(request.get("cmd"), str):
        return request["cmd"]
    text = files.get(request.get("path", ""))
    return text if isinstance(text, str) else None


def _repl_sessions(rows: Iterable[tuple[int, dict]], source: str) -> Iterator[Recording]:
    for number, row in rows:
        version = lean_version_from_toolchain(row.get("lean_toolchain"))
        for index, (request, reply) in enumerate(zip(row.get("inputs") or [], row.get("outputs") or [])):
            program = _standalone_program(request, row.get("referenced_files") or {})
            if program is not None and isinstance(reply, dict):
                yield Recording(
                    program,
                    response_from_repl_reply(reply, lean_version=version),
                    source,
                    f"{row.get('repl_tag')}:{row.get('test')}#{index}",
                )


def _repl_pairs(rows: Iterable[tuple[int, dict]], source: str) -> Iterator[Recording]:
    for number, row in rows:
        request = row.get("request")
        files = {request.get("path", ""): row["file_text"]} if isinstance(request, dict) and "file_text" in row else {}
        program = _standalone_program(request, files)
        if program is None or not row.get("aligned", True) or not isinstance(row.get("response"), dict):
            continue
        version = lean_version_from_toolchain(row.get("lean_toolchain"))
        yield Recording(
            program,
            response_from_repl_reply(row["response"], lean_version=version),
            source,
            f"{row.get('commit', '')[:12]}:{row.get('test')}#{row.get('index')}",
        )


def _format_of(row: dict[str, Any]) -> Any:
    if "compilation_result" in row and "code" in row:
        return _rl_lean
    if "server_response" in row and "code" in row:
        return _kimina_pairs
    if "inputs" in row and "outputs" in row:
        return _repl_sessions
    if "request" in row and "response" in row:
        return _repl_pairs
    return None


def load_recordings(source: str) -> list[Recording]:
    """All recordings of one source (alias or path), in file order. The format is recognised from
    the rows' keys, so a user's own file in any of the four shapes works too."""
    path = resolve_source(source)
    rows = list(_read_jsonl(path))
    if not rows:
        return []
    parse = _format_of(rows[0][1])
    if parse is None:
        raise ValueError(
            f"{path}: unknown recording format (keys {sorted(rows[0][1])[:8]}); expected RL-Lean "
            "rows (code, compilation_result), Kimina pairs (code, server_response), REPL sessions "
            "(inputs, outputs) or REPL pairs (request, response)"
        )
    return list(parse(rows, source))


class RecordingIndex:
    """Recordings of several sources by normalized program text, in source order then file order."""

    def __init__(self, sources: Iterable[str] = DEFAULT_SOURCES):
        self.sources = list(sources)
        self._by_program: dict[str, list[Recording]] = {}
        self.counts: dict[str, int] = {}
        for source in self.sources:
            recordings = load_recordings(source)
            self.counts[source] = len(recordings)
            for recording in recordings:
                self._by_program.setdefault(normalize_program(recording.program), []).append(recording)

    def lookup(self, program: str) -> list[Recording]:
        return list(self._by_program.get(normalize_program(program), ()))

    def __len__(self) -> int:
        return len(self._by_program)

    def __iter__(self) -> Iterator[tuple[str, list[Recording]]]:
        return iter(self._by_program.items())

    def conflicting(self) -> int:
        """Programs whose recordings disagree (status, or the messages Lean gave)."""

        def signature(r: Recording) -> tuple:
            return (r.response.status, tuple(r.response.messages))

        return sum(1 for recs in self._by_program.values() if len({signature(r) for r in recs}) > 1)


__all__ = [
    "DEFAULT_SOURCES",
    "Recording",
    "RecordingIndex",
    "SOURCE_ALIASES",
    "load_recordings",
    "normalize_program",
    "resolve_source",
]
