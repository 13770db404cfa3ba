#!/usr/bin/env python3
"""Stand-in for Lean FRO's ``comparator`` executable, answering only recorded test projects."""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import stat
import sys
from pathlib import Path

NO_RECORDED_ANSWER = "no recorded Lean answer"  # equals leanloop.lean.replies.NO_RECORDED_ANSWER
UNAVAILABLE_EXIT = 2
STANDIN_PREFIX = "stand-in comparator: "  # every line the stand-in prints starts with it
_NOT_PART_OF_THE_VERDICT = ("json_output_path",)  # where the report goes does not change the verdict


def module_file(module: str) -> str:
    """``Challenge.«12.34».«5»`` -> ``Challenge/12.34/5.lean`` (Lean's module name -> source path;
    the judge, ``leanloop.lean.judge``, writes projects by the same rule)."""
    parts, current, quoted = [], "", False
    for ch in module:
        if ch == "«" or ch == "»":
            quoted = ch == "«"
        elif ch == "." and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return "/".join(parts) + ".lean"


def project_key(challenge: str, solution: str, config: dict) -> str:
    """Content hash of a project: the two modules' text and the config (keys sorted)."""
    kept = {k: v for k, v in config.items() if k not in _NOT_PART_OF_THE_VERDICT}
    digest = hashlib.sha256()
    for part in (challenge, solution, json.dumps(kept, sort_keys=True, ensure_ascii=False)):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def recorded_projects(root: str | Path) -> dict[str, tuple[str, int]]:
    """project key -> (project name, recorded exit code), for ``root/projects/<name>/``."""
    index: dict[str, tuple[str, int]] = {}
    for project in sorted(Path(root).glob("projects/*/test.json")):
        folder = project.parent
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        challenge = (folder / module_file(config.get("challenge_module", "Challenge"))).read_text(encoding="utf-8")
        solution = (folder / module_file(config.get("solution_module", "Solution"))).read_text(encoding="utf-8")
        expected = json.loads(project.read_text(encoding="utf-8"))
        index[project_key(challenge, solution, config)] = (folder.name, int(expected["exit_code"]))
    return index


def answer(config_path: Path, root: Path) -> int:
    config = json.loads(config_path.read_text(encoding="utf-8"))
    here = config_path.parent
    try:
        challenge = (here / module_file(config.get("challenge_module", "Challenge"))).read_text(encoding="utf-8")
        solution = (here / module_file(config.get("solution_module", "Solution"))).read_text(encoding="utf-8")
    except OSError as error:
        print(f"{STANDIN_PREFIX}{NO_RECORDED_ANSWER} ({error})")
        return UNAVAILABLE_EXIT
    found = recorded_projects(root).get(project_key(challenge, solution, config))
    if found is None:
        print(f"{STANDIN_PREFIX}{NO_RECORDED_ANSWER} for this project")
        return UNAVAILABLE_EXIT
    name, exit_code = found
    print(f"{STANDIN_PREFIX}recorded verdict of comparator's test project {name}: exit code {exit_code}")
    return exit_code


def prepare_comparator_dir(directory: str | Path, recordings: str | Path) -> Path:
    """Lay out ``directory`` with an executable ``comparator`` (this stand-in, answering the
    projects under ``recordings``) and a ``lake`` whose ``lake env CMD`` just runs CMD."""
    root = Path(directory).resolve()
    root.mkdir(parents=True, exist_ok=True)
    comparator = root / "comparator"
    comparator.write_text(
        "#!/bin/sh\nexec "
        + " ".join(
            shlex.quote(p)
            for p in (sys.executable, str(Path(__file__).resolve()), "--recordings", str(Path(recordings).resolve()))
        )
        + ' "$@"\n'
    )
    lake = root / "lake"
    lake.write_text(
        "#!/bin/sh\n# stand-in lake: the judge only runs `lake env <comparator> config.json`\n"
        'if [ "$1" = "env" ]; then shift; fi\nexec "$@"\n'
    )
    for path in (comparator, lake):
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return root


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recordings", required=True, help="folder holding projects/<name>/ (shared data)")
    parser.add_argument("config", help="the comparator config.json")
    args = parser.parse_args(argv)
    sys.exit(answer(Path(args.config).resolve(), Path(args.recordings)))


if __name__ == "__main__":
    main()
