"""JSON Lines, read and written one way everywhere (``.gz`` by suffix, errors that name file and line).

``read_jsonl(path)`` yields the objects of a file (blank lines skipped); ``numbered_jsonl(path)``
yields ``(line number, object)`` for readers that report bad rows themselves; ``write_jsonl(path,
rows)`` writes atomically (a reader never sees half a file); ``append_jsonl(handle, row)`` adds one
line to an open journal-style file and flushes it; ``read_appended(path)`` reads such a file back
after a kill (a torn last line is dropped, and cut off with ``cut_torn``).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any


class JsonlError(ValueError):
    """A line of a JSONL file is not JSON."""


def open_text(path: str | os.PathLike, mode: str = "rt") -> IO[str]:
    """A text handle on ``path``, through gzip when it ends in ``.gz``."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, mode if "t" in mode else mode + "t", encoding="utf-8")
    return open(path, mode.replace("t", ""), encoding="utf-8")


def numbered_jsonl(path: str | os.PathLike, *, strict: bool = True) -> Iterator[tuple[int, Any]]:
    """``(1-based line number, parsed object)`` per non-blank line. A line that is not JSON raises
    :class:`JsonlError` naming the file and line, or (``strict=False``) is yielded as
    ``(number, JsonlError)`` for the caller to count as bad input."""
    with open_text(path) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as error:
                problem = JsonlError(f"{path}:{number}: not JSON ({error.msg})")
                if strict:
                    raise problem from None
                yield number, problem


def read_jsonl(path: str | os.PathLike, limit: int | None = None) -> Iterator[Any]:
    """The objects of a JSONL(.gz) file, in order (at most ``limit``)."""
    for count, (_, row) in enumerate(numbered_jsonl(path)):
        if limit is not None and count >= limit:
            return
        yield row


def read_appended(path: str | os.PathLike, *, cut_torn: bool = False) -> tuple[list[Any], bool]:
    """The rows of an append-only JSONL file whose writer may have been killed mid-line, and whether
    such a torn last line was found. Every finished row ends in a newline, so only the bytes after the
    last one can be torn: they are dropped (``cut_torn`` also truncates the file there, so the next
    append starts a clean line). A bad line before them is damage, not a kill: :class:`JsonlError`
    naming the file and line."""
    path = Path(path)
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    torn = bool(data[end:].strip())
    if cut_torn and end != len(data):
        with open(path, "r+b") as handle:
            handle.truncate(end)
    rows = []
    for number, line in enumerate(data[:end].split(b"\n")[:-1], 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as error:  # not JSON, or not UTF-8
            reason = error.msg if isinstance(error, json.JSONDecodeError) else "not UTF-8"
            raise JsonlError(f"{path}:{number}: not JSON ({reason})") from None
    return rows, torn


def dumps_line(row: Any) -> str:
    """One JSONL line (UTF-8 kept, non-JSON values as ``str``)."""
    return json.dumps(row, ensure_ascii=False, default=str) + "\n"


def write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> Path:
    """Write ``rows`` to ``path`` (gzip when it ends in ``.gz``) through a temporary file and a
    rename, so a reader sees the old file or the whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    handle = gzip.open(tmp, "wt", encoding="utf-8") if path.suffix == ".gz" else open(tmp, "w", encoding="utf-8")
    with handle:
        for row in rows:
            handle.write(dumps_line(row))
    os.replace(tmp, path)
    return path


def append_jsonl(handle: IO[str], row: Any) -> None:
    """Append one row to an open file and flush it (progress that must survive a kill)."""
    handle.write(dumps_line(row))
    handle.flush()


__all__ = [
    "JsonlError",
    "append_jsonl",
    "dumps_line",
    "numbered_jsonl",
    "open_text",
    "read_appended",
    "read_jsonl",
    "write_jsonl",
]
