"""The real recorded Lean replies in ``../shared/data``, paired with the program each one answers."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from leanloop.jsonl import read_jsonl
from leanloop.lean.replies import results_program

REPL_FOLDERS = {
    "repl_tests_v4.9.0": "v4.9.0",
    "repl_tests_v4.15.0": "v4.15.0",
    "repl_tests_HEAD_v4.33.0-rc2": "v4.33.0-rc2",
}
RL_LEAN_FILE = "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
_DECODER = json.JSONDecoder(strict=False)


@dataclass(frozen=True)
class RecordedReply:
    source: str  # which recording
    lean_version: str
    name: str  # test / id, unique within the source together with ``index``
    index: int
    program: str
    reply: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)


def split_json_values(text: str) -> list[Any]:
    """JSON values written one after another (the REPL's ``.in`` / ``.expected.out`` layout)."""
    values, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return values
        value, i = _DECODER.raw_decode(text, i)
        values.append(value)


def command_program(request: Any, files: dict[str, str], reply: Any = None) -> str | None:
    """The program text a REPL command compiles (the text its reply's positions refer to), or None
    for commands that compile none."""
    if isinstance(reply, dict) and (joined := results_program(reply)) is not None:
        return joined
    if not isinstance(request, dict):
        return None
    if isinstance(request.get("cmd"), str):
        return request["cmd"]
    if isinstance(request.get("path"), str):
        return files.get(request["path"])
    if isinstance(request.get("tactic"), str):
        return request["tactic"]
    return None


def carries_feedback(reply: Any) -> bool:
    """Whether a reply holds messages or tactic records (at top level or in ``results``)."""
    if not isinstance(reply, dict):
        return False
    if reply.get("messages") or reply.get("tactics") or reply.get("infotree"):
        return True
    if reply.get("errors") or reply.get("warnings") or reply.get("infos"):
        return True
    return any(
        carries_feedback(item) or carries_feedback(item.get("response"))
        for item in reply.get("results") or []
        if isinstance(item, dict)
    )


def iter_repl_folder(folder: Path, lean_version: str) -> Iterator[RecordedReply]:
    for command_file in sorted(folder.rglob("*.in")):
        reply_file = command_file.with_name(command_file.name[:-3] + ".expected.out")
        if not reply_file.exists():
            continue
        requests = split_json_values(command_file.read_text(encoding="utf-8"))
        replies = split_json_values(reply_file.read_text(encoding="utf-8"))
        if len(requests) != len(replies):
            continue
        files: dict[str, str] = {}
        for request in requests:
            path = request.get("path") if isinstance(request, dict) else None
            if isinstance(path, str):
                for candidate in (folder / path.removeprefix("test/"), command_file.parent / Path(path).name):
                    if candidate.exists():
                        files[path] = candidate.read_text(encoding="utf-8")
                        break
        name = str(command_file.relative_to(folder))[:-3]
        for index, (request, reply) in enumerate(zip(requests, replies)):
            program = command_program(request, files, reply)
            if program is not None and carries_feedback(reply):
                yield RecordedReply(folder.name, lean_version, name, index, program, reply)


def iter_repl_bundles(all_versions: Path) -> Iterator[RecordedReply]:
    derived: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in read_jsonl(all_versions / "repl_io_pairs.derived.jsonl"):
        derived.setdefault((row["test"], row["commit"]), []).append(row)
    for bundle in read_jsonl(all_versions / "repl_test_bundles.jsonl"):
        version = bundle["lean_toolchain"].split(":")[-1]
        key = (bundle["test"], bundle["commit"])
        pairs: list[tuple[Any, Any, str | None]]
        try:
            requests = split_json_values(bundle["input_commands"])
            replies = split_json_values(bundle["expected_out"])
            if len(requests) != len(replies):
                raise ValueError("commands and replies do not pair up")
            pairs = [(q, a, bundle.get("lean_file")) for q, a in zip(requests, replies)]
        except ValueError:
            pairs = [(row["request"], row["response"], row.get("file_text")) for row in derived.get(key, [])]
        for index, (request, reply, file_text) in enumerate(pairs):
            files = (
                {request["path"]: file_text} if isinstance(request, dict) and file_text and "path" in request else {}
            )
            program = command_program(request, files, reply)
            if program is not None and carries_feedback(reply):
                yield RecordedReply(
                    "all_versions", version, f"{bundle['test']}@{bundle['commit'][:8]}", index, program, reply
                )


def iter_kimina_pairs(path: Path) -> Iterator[RecordedReply]:
    for index, row in enumerate(read_jsonl(path)):
        if carries_feedback(row["server_response"]):
            yield RecordedReply("kimina_match", "v4.15.0", row["id"], index, row["code"], row["server_response"])


def iter_kimina_demo(folder: Path) -> Iterator[RecordedReply]:
    """The demo notebook prints the messages of ``demo_search_2.lean`` as a Python list."""
    notebook = json.loads((folder / "demo.ipynb").read_text(encoding="utf-8"))
    program = (folder / "demo_search_2.lean").read_text(encoding="utf-8")
    for cell in notebook["cells"]:
        if "messages = response" in "".join(cell.get("source", "")):
            for output in cell.get("outputs", []):
                messages = ast.literal_eval("".join(output.get("text", "")).strip())
                reply = {"results": [{"custom_id": "demo_search_2", "error": None, "response": {"messages": messages}}]}
                yield RecordedReply("kimina_demo", "v4.15.0", "demo_search_2", 0, program, reply)


def iter_rl_lean(path: Path) -> Iterator[RecordedReply]:
    """Every RL-Lean row (also the system errors: they test that nothing is annotated for them)."""
    for index, row in enumerate(read_jsonl(path)):
        yield RecordedReply(
            "rl_lean",
            str(row.get("lean_version", "v4.9.0-rc1")),
            row["custom_id"],
            index,
            row["code"],
            row["compilation_result"],
            {"name": row["name"], "verdict_pass": row["verdict_pass"], "source": row["source"]},
        )


def iter_recorded(
    shared: Path, sources: tuple[str, ...] = ("repl", "all_versions", "kimina_match", "kimina_demo", "rl_lean")
) -> Iterator[RecordedReply]:
    """Every recorded reply that carries feedback (RL-Lean: every row), source by source."""
    lean_repl = shared / "lean_repl"
    if "repl" in sources:
        for folder, version in REPL_FOLDERS.items():
            yield from iter_repl_folder(lean_repl / folder, version)
    if "all_versions" in sources:
        yield from iter_repl_bundles(lean_repl / "all_versions")
    if "kimina_match" in sources:
        yield from iter_kimina_pairs(lean_repl / "kimina_match_pairs.jsonl")
    if "kimina_demo" in sources:
        yield from iter_kimina_demo(lean_repl / "kimina_lean_server_demo")
    if "rl_lean" in sources:
        yield from iter_rl_lean(shared / RL_LEAN_FILE)
