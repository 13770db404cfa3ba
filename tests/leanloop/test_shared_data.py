"""``make shared-data`` against local git mirrors made here: the pinned files are written byte for
byte, files already there are compared and never overwritten, and the table matches the data README."""

from __future__ import annotations

import re
import subprocess

import pytest

from leanloop import shared_data as tool
from leanloop.shared_data import DERIVED, SOURCES, SharedDataConfig, Source, fetch


def _commit(repo, files):
    for name, data in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(data)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True, capture_output=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True, capture_output=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_the_pinned_files_are_fetched_from_mirrors_byte_for_byte(tmp_path, monkeypatch):
    repo = tmp_path / "mirrors" / "owner" / "tests"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    pinned = _commit(
        repo,
        {
            "test/a.in": b'{"cmd": "#eval 1"}\n',
            "test/a.expected.out": b'{"env": 0}\n',
            "test/notes.txt": b"not a recording",
            "data/x.jsonl": b'{"name": "\xc3\xa9"}\n',
        },
    )
    _commit(repo, {"test/a.in": b"changed later\n"})  # a later commit: the pin is what is fetched
    monkeypatch.setattr(
        tool,
        "SOURCES",
        (
            Source("lean_repl/tests", "owner/tests", pinned[:12], "test", ("*.in", "*.expected.out")),
            Source("statements/x.jsonl", "owner/tests", pinned[:12], "data/x.jsonl"),
        ),
    )
    monkeypatch.setattr(tool, "DERIVED", ("lean_repl/pairs.jsonl",))
    out = tmp_path / "data"
    config = SharedDataConfig(out=str(out), git_base=str(tmp_path / "mirrors"), cache=str(tmp_path / "git"))
    result = fetch(config)
    assert sorted(result["written"]) == ["lean_repl/tests/a.expected.out", "lean_repl/tests/a.in", "statements/x.jsonl"]
    assert (out / "lean_repl/tests/a.in").read_bytes() == b'{"cmd": "#eval 1"}\n'
    assert (out / "statements/x.jsonl").read_bytes() == b'{"name": "\xc3\xa9"}\n'
    assert result["derived_missing"] == ["lean_repl/pairs.jsonl"]
    (out / "statements/x.jsonl").write_bytes(b"edited\n")
    again = fetch(config)  # the clone is reused; nothing is overwritten
    assert again["written"] == [] and again["different"] == ["statements/x.jsonl"]
    assert (out / "statements/x.jsonl").read_bytes() == b"edited\n"
    monkeypatch.setattr(tool, "SOURCES", (Source("y.jsonl", "owner/tests", "0123456789ab", "data/x.jsonl"),))
    with pytest.raises(OSError, match="owner/tests has no commit 0123456789ab"):
        fetch(config)


def test_the_table_is_the_data_readmes(shared_data):
    readme = (shared_data / "README.md").read_text()
    for source in SOURCES:
        assert source.commit in readme and source.repo.split("/")[1] in readme, source
        assert (shared_data / source.dest).exists(), source.dest
        assert f"`{source.path}" in readme or f": `{source.path}" in readme or source.path in readme, source
    for name in DERIVED:
        assert (shared_data / name).exists(), name
    pinned = set(re.findall(r"@ ([0-9a-f]{8,40})\b", readme))
    assert {s.commit for s in SOURCES} <= pinned
