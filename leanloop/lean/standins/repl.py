#!/usr/bin/env python3
"""Stand-in for the Lean REPL binary, replaying recorded REPL transcripts."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import stat
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

NO_RECORDED_ANSWER = "no recorded Lean answer"  # equals leanloop.lean.replies.NO_RECORDED_ANSWER
_PROBE = re.compile(r'#print "(leanloop-channel-probe-[0-9a-f]{32})"')  # leanloop.lean.local.PROBE_PREFIX
# `gc`: the Kimina server sends `"gc": true` with every command after a REPL's first; its client
# models say a reply may then lack `env` (the environment is not kept), nothing else: what Lean
# elaborates, and so the reply's messages, is the same with or without it
_IGNORED_FIELDS = {"env", "proofState", "incrementality", "gc"}


# --- loading recorded sessions -------------------------------------------------------------------


def _version(toolchain: str | None) -> str | None:
    return str(toolchain).strip().rsplit(":", 1)[-1] if toolchain else None


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def recorded_sessions(paths: Iterable[str]) -> Iterator[tuple[str | None, list[tuple[dict, dict]]]]:
    """(Lean version, [(request, reply), ...]) per recorded REPL session, in file order.

    Accepts ``repl_io_pairs.jsonl`` (one session per row) and ``repl_io_pairs.derived.jsonl`` (one
    pair per row, grouped back into sessions by repo/commit/test; a session with an unaligned pair is
    dropped whole, because its ids could not be trusted)."""
    for path in map(Path, paths):
        groups: dict[tuple, list[dict]] = {}
        for row in _rows(path):
            if "inputs" in row and "outputs" in row:
                yield _version(row.get("lean_toolchain")), list(zip(row["inputs"], row["outputs"]))
            elif "request" in row and "response" in row:
                key = (row.get("source_repo"), row.get("commit"), row.get("test"))
                groups.setdefault(key, []).append(row)
            else:
                raise ValueError(f"{path}: rows must be REPL sessions (inputs/outputs) or pairs (request/response)")
        for rows in groups.values():
            rows.sort(key=lambda r: r.get("index", 0))
            if all(
                r.get("aligned", True) and isinstance(r.get("request"), dict) and isinstance(r.get("response"), dict)
                for r in rows
            ) and [r.get("index", i) for i, r in enumerate(rows)] == list(range(len(rows))):
                yield _version(rows[0].get("lean_toolchain")), [(r["request"], r["response"]) for r in rows]


def _options(request: dict) -> str:
    fields = {k: v for k, v in request.items() if k not in _IGNORED_FIELDS and v is not False}
    return json.dumps(fields, sort_keys=True, ensure_ascii=False)


def request_key(request: dict, envs: dict[int, Any], states: dict[int, Any]) -> tuple | None:
    """The state-qualified identity of a request, or None when it cannot be answered from recordings."""
    if isinstance(request.get("cmd"), str):
        if "env" in request and request["env"] is not None:
            parent = envs.get(request["env"])
            if parent is None:
                return None
        else:
            parent = ()
        return ("cmd", parent, _options(request))
    if isinstance(request.get("pickleTo"), str) and request.get("env") is not None and "proofState" not in request:
        parent = envs.get(request["env"])
        return None if parent is None else ("pickleTo", parent, _options(request))
    if isinstance(request.get("unpickleEnvFrom"), str) and request.get("env") is None:
        return ("unpickleEnvFrom", (), _options(request))
    if isinstance(request.get("tactic"), str) and "proofState" in request:
        parent = states.get(request["proofState"])
        return None if parent is None else ("tactic", parent, _options(request))
    return None


def produced_proof_states(reply: dict) -> list[int]:
    """Proof-state ids a reply creates, ascending (= the REPL's creation order)."""
    found = set()
    if isinstance(reply.get("proofState"), int):
        found.add(reply["proofState"])
    for entry in (reply.get("sorries") or []) + (reply.get("tactics") or []):
        if isinstance(entry, dict) and isinstance(entry.get("proofState"), int):
            found.add(entry["proofState"])
    return sorted(found)


def build_index(paths: Iterable[str], lean_version: str | None) -> dict[tuple, dict]:
    """request identity -> recorded reply, first recording wins (file order)."""
    index: dict[tuple, dict] = {}
    for version, pairs in recorded_sessions(paths):
        if lean_version and version != lean_version:
            continue
        envs: dict[int, Any] = {}
        states: dict[int, Any] = {}
        for request, reply in pairs:
            key = request_key(request, envs, states) if isinstance(request, dict) else None
            if key is None:
                continue
            index.setdefault(key, reply)
            if isinstance(reply.get("env"), int):
                envs[reply["env"]] = key
            for rank, state in enumerate(produced_proof_states(reply)):
                states[state] = (key, rank)
    return index


# --- serving --------------------------------------------------------------------------------------


class StandInREPL:
    def __init__(self, index: dict[tuple, dict], faults: list[dict] | None = None, state_dir: str | None = None):
        self.index = index
        self.faults = faults or []
        self.state_dir = Path(state_dir) if state_dir else None
        self.envs: dict[int, Any] = {}
        self.states: dict[int, Any] = {}
        self.next_env = 0
        self.next_state = 0

    def _holds_recorded_pickle(self, request: dict) -> bool:
        """Does the file hold the state that a recorded ``pickleTo`` of this path pickled?"""
        path = request["unpickleEnvFrom"]
        try:
            held = Path(path).read_text(encoding="utf-8")
        except OSError:
            return False
        return any(
            key[0] == "pickleTo" and json.loads(key[2]).get("pickleTo") == path and json.dumps(key[1]) == held
            for key in self.index
        )

    def _fault_for(self, request: dict) -> dict | None:
        text = str(request.get("cmd") or request.get("tactic") or request.get("unpickleEnvFrom") or "")
        for number, fault in enumerate(self.faults):
            if fault.get("when", "\0") not in text:
                continue
            if fault.get("once"):
                marker = (self.state_dir or Path(".")) / f"fault-{number}-fired"
                if marker.exists():
                    continue
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()
            return fault
        return None

    def _probe_reply(self, request: dict) -> dict | None:
        """The reply to the project's channel probe (module docstring), None for anything else."""
        probe = _PROBE.fullmatch(str(request.get("cmd"))) if isinstance(request.get("cmd"), str) else None
        env = request.get("env")
        if probe is None or (env is not None and env not in self.envs):
            return None
        self.envs[self.next_env] = ("probe",)  # no recording continues it
        self.next_env += 1
        return {
            "messages": [
                {
                    "severity": "info",
                    "pos": {"line": 1, "column": 0},
                    "endPos": {"line": 1, "column": 6},
                    "data": probe.group(1),
                }
            ],
            "env": self.next_env - 1,
        }

    def answer(self, request: dict) -> dict:
        probe = self._probe_reply(request)
        if probe is not None:
            return probe
        key = request_key(request, self.envs, self.states)
        recorded = self.index.get(key) if key is not None else None
        if recorded is not None and key[0] == "unpickleEnvFrom" and not self._holds_recorded_pickle(request):
            recorded = None
        if recorded is None:
            return {"message": f"stand-in REPL: {NO_RECORDED_ANSWER} for this request in this state"}
        if key[0] == "pickleTo":
            target = Path(request["pickleTo"])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(key[1]), encoding="utf-8")
        reply = json.loads(json.dumps(recorded))  # deep copy
        if isinstance(reply.get("env"), int):
            self.envs[self.next_env] = key
            reply["env"] = self.next_env
            self.next_env += 1
        renumber = {}
        for rank, state in enumerate(produced_proof_states(reply)):
            renumber[state] = self.next_state
            self.states[self.next_state] = (key, rank)
            self.next_state += 1
        if isinstance(reply.get("proofState"), int):
            reply["proofState"] = renumber[reply["proofState"]]
        for entry in (reply.get("sorries") or []) + (reply.get("tactics") or []):
            if isinstance(entry, dict) and isinstance(entry.get("proofState"), int):
                entry["proofState"] = renumber[entry["proofState"]]
        return reply

    def serve(self, stdin, stdout) -> None:
        block: list[str] = []
        for line in stdin:
            if line.strip():
                block.append(line)
                continue
            if not block:
                continue
            text, block = "".join(block), []
            try:
                request = json.loads(text)
            except json.JSONDecodeError as error:
                self._write(stdout, {"message": f"stand-in REPL: request is not JSON ({error})"})
                continue
            fault = self._fault_for(request) if isinstance(request, dict) else None
            action = fault.get("action") if fault else None
            if action == "refuse":  # the REPL's own refusal of the request, text from the fault config
                self._write(stdout, {"message": str(fault.get("message"))})
                continue
            if action == "crash":
                os._exit(137)  # like an OOM kill: no reply, no cleanup
            if action == "hang":
                while True:
                    time.sleep(3600)
            if action == "spin":  # busy work at elaboration time: burns CPU, never replies
                while True:
                    pass
            if action == "garbage":
                stdout.write("stand-in REPL fault: this is not JSON\n\n")
                stdout.flush()
                continue
            if action == "write":
                for target in fault.get("paths") or []:
                    try:
                        Path(target).write_text(str(fault.get("text", "")), encoding="utf-8")
                    except OSError:
                        pass
            if action in ("forge", "forge_exit"):
                self._write(stdout, {"env": 0})
                if action == "forge_exit":
                    os._exit(0)
            self._write(
                stdout,
                self.answer(request)
                if isinstance(request, dict)
                else {"message": "stand-in REPL: request must be a JSON object"},
            )

    @staticmethod
    def _write(stdout, reply: dict) -> None:
        # indent: the REPL pretty-prints over several lines; the reader must frame on the blank line
        stdout.write(json.dumps(reply, ensure_ascii=False, indent=1) + "\n\n")
        stdout.flush()


# --- a directory lean-interact accepts as a local REPL --------------------------------------------


def prepare_repl_dir(
    directory: str | os.PathLike,
    sources: Iterable[str | os.PathLike],
    lean_version: str = "v4.15.0",
    faults: list[dict] | None = None,
) -> Path:
    """Lay out ``directory`` so that ``LeanREPLConfig(local_repl_path=directory, build_repl=False,
    lake_path=directory/"lake")`` runs this stand-in: ``lean-toolchain`` (lean-interact reads the
    Lean version there), ``.lake/build/bin/repl`` (the binary it launches) and a ``lake`` whose
    ``lake env CMD`` just runs CMD (all that lean-interact asks of lake once the REPL is built)."""
    root = Path(directory).resolve()
    (root / ".lake" / "build" / "bin").mkdir(parents=True, exist_ok=True)
    (root / "lean-toolchain").write_text(f"leanprover/lean4:{lean_version}\n", encoding="utf-8")
    config = {
        "sources": [str(Path(s).resolve()) for s in sources],
        "lean_version": lean_version,
        "faults": faults or [],
        "state_dir": str(root / "fault-state"),
    }
    (root / "standin.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    repl = root / ".lake" / "build" / "bin" / "repl"
    repl.write_text(
        "#!/bin/sh\nexec "
        + " ".join(
            shlex.quote(p)
            for p in (sys.executable, str(Path(__file__).resolve()), "--config", str(root / "standin.json"))
        )
        + "\n"
    )
    lake = root / "lake"
    lake.write_text(
        "#!/bin/sh\n# stand-in lake: lean-interact only runs `lake env <repl>` (and `--version`)\n"
        'if [ "$1" = "--version" ]; then echo "Lake (stand-in)"; exit 0; fi\n'
        'if [ "$1" = "env" ]; then shift; fi\nexec "$@"\n'
    )
    for path in (repl, lake):
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return root


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="standin.json written by prepare_repl_dir")
    args = parser.parse_args(argv)
    config = json.loads(Path(args.config).read_text(encoding="utf-8"))
    index = build_index(config["sources"], config.get("lean_version"))
    sys.stdin.reconfigure(encoding="utf-8")  # type: ignore[attr-defined]
    sys.stdout.reconfigure(encoding="utf-8")  # type: ignore[attr-defined]
    StandInREPL(index, config.get("faults"), config.get("state_dir")).serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    main()
