"""Append-only journal of finished outcomes: what makes a corpus build resumable.

One JSON line per finished item (``{"id", "outcome", "lean_version"}``), flushed as soon as the
item finishes, so a build killed at any point loses at most the items still in flight. The first
line fingerprints everything that decides an outcome (profile, backend, timeout, headers,
statement files): resuming with a different configuration is refused rather than mixing verdicts.
A torn last line (the process died mid-write) is cut off before appending.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from leanloop.lean.types import Category, LeanMessage, Outcome, Position, TacticRecord

JOURNAL = "journal.jsonl"


class JournalMismatch(RuntimeError):
    pass


def _position(pos: Position | None) -> dict[str, int] | None:
    return None if pos is None else {"line": pos.line, "column": pos.column}


def outcome_to_dict(outcome: Outcome) -> dict[str, Any]:
    """``Outcome.to_dict`` without ``dataclasses.asdict`` (which is ~10x slower on message lists;
    the build serializes every message twice). Same keys and shapes."""
    return {
        "category": outcome.category.value,
        "label": outcome.label,
        "first_error": outcome.first_error,
        "reasons": list(outcome.reasons),
        "messages": [{"severity": m.severity, "data": m.data, "pos": _position(m.pos), "end_pos": _position(m.end_pos)}
                     for m in outcome.messages],
        "tactics": [{"tactic": t.tactic, "goals": t.goals, "pos": _position(t.pos), "end_pos": _position(t.end_pos)}
                    for t in outcome.tactics],
        "time_s": outcome.time_s,
        "backend": outcome.backend,
    }


def outcome_from_dict(row: dict[str, Any]) -> Outcome:
    return Outcome(
        category=Category(row["category"]),
        messages=[LeanMessage.from_dict(m) for m in row.get("messages", [])],
        tactics=[TacticRecord.from_dict(t) for t in row.get("tactics", [])],
        first_error=row.get("first_error"),
        reasons=list(row.get("reasons", [])),
        time_s=float(row.get("time_s", 0.0)),
        backend=row.get("backend", ""),
    )


class Journal:
    def __init__(self, path: Path, fingerprint: str):
        self.path = Path(path)
        self.fingerprint = fingerprint
        self._handle = None

    def load(self, fresh: bool = False) -> dict[str, tuple[Outcome, str | None]]:
        """Finished items of an earlier build of this run: id -> (outcome, lean version)."""
        if fresh and self.path.exists():
            self.path.unlink()
        if not self.path.exists():
            return {}
        done: dict[str, tuple[Outcome, str | None]] = {}
        data = self.path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]  # drop a torn last line
        if len(complete) != len(data):
            with open(self.path, "r+b") as handle:
                handle.truncate(len(complete))
        try:
            lines = complete.decode("utf-8").splitlines()
            rows = [json.loads(line) for line in lines]
        except ValueError as exc:  # not UTF-8 / not JSON: damaged outside a torn last line
            raise JournalMismatch(f"{self.path} is damaged ({type(exc).__name__}: {exc}); its verdicts cannot be "
                                  "trusted. Use a new run name (--run NAME) or discard them and start over "
                                  "(--fresh true).") from exc
        if rows:
            head = rows[0]
            if not isinstance(head, dict) or head.get("fingerprint") != self.fingerprint:
                raise JournalMismatch(
                    f"{self.path} was written by a build with a different configuration (profile, backend, "
                    "timeout, header or statements changed); resuming would mix verdicts. Use a new run name "
                    "(--run NAME) or discard the earlier verdicts and start over (--fresh true).")
        for row in rows[1:]:
            done[row["id"]] = (outcome_from_dict(row["outcome"]), row.get("lean_version"))
        return done

    def append(self, item_id: str, outcome: Outcome, lean_version: str | None) -> None:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            new = not self.path.exists() or self.path.stat().st_size == 0
            self._handle = open(self.path, "a", encoding="utf-8")
            if new:
                self._handle.write(json.dumps({"journal": 1, "fingerprint": self.fingerprint}) + "\n")
        self._handle.write(json.dumps({"id": item_id, "outcome": outcome_to_dict(outcome), "lean_version": lean_version},
                                      ensure_ascii=False) + "\n")
        self._handle.flush()  # survives the process being killed (the OS keeps the written data)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            self._handle = None
