"""Every paper config against docs/paper_protocols.yaml: the value a design gives is the value the
config sets, every choice of ours says why, every paper config is listed, every named test exists,
and docs/paper_protocols.md is the YAML's rendering."""

from __future__ import annotations

import importlib.util
import re

import pytest
import yaml

from leanloop.paths import REPO_ROOT

_spec = importlib.util.spec_from_file_location("protocols", REPO_ROOT / "docs" / "protocols.py")
protocols = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(protocols)

STAGES = protocols.load()
ENTRIES = [(stage, entry) for stage, entries in STAGES.items() for entry in entries]


def _id(item) -> str:
    stage, entry = item
    return f"{stage}:{entry['setting'][:60]}"


@pytest.mark.parametrize("item", ENTRIES, ids=[_id(item) for item in ENTRIES])
def test_entry_is_well_formed(item):
    _, entry = item
    assert {"setting", "paper", "status"} <= set(entry), entry
    assert entry["status"] in protocols.STATUSES
    if entry["paper"] == "not given":
        assert entry["status"] == "ours" and "value" in entry and entry.get("ours"), \
            "a number the design does not give is ours: give the config's value and why"
    else:
        assert entry.get("section"), "a paper number needs its section"
    if entry["status"] in ("ours", "option", "open"):
        assert entry.get("ours"), f"status {entry['status']} needs `ours` saying why / what is missing"
    if entry["status"] == "matches" and "value" in entry:
        assert entry["value"] == entry["paper"], "status matches but the config's value differs from the paper's"
    assert "config" in entry or "code" in entry or entry["status"] == "open", "where is it implemented?"


CONFIG_ENTRIES = [item for item in ENTRIES if "config" in item[1]]


@pytest.mark.parametrize("item", CONFIG_ENTRIES, ids=[_id(item) for item in CONFIG_ENTRIES])
def test_paper_config_agrees_with_the_protocol(item):
    _, entry = item
    assert (REPO_ROOT / entry["config"]).is_file(), entry["config"]
    got = protocols.config_value(entry, REPO_ROOT)
    want = protocols.expected(entry)
    assert got == want, f"{entry['config']} {entry['key']} = {got!r}; docs/paper_protocols.yaml says {want!r} " \
                        f"({entry.get('section') or 'ours'})"


TEST_ENTRIES = [item for item in ENTRIES if "test" in item[1]]


@pytest.mark.parametrize("item", TEST_ENTRIES, ids=[_id(item) for item in TEST_ENTRIES])
def test_named_tests_exist(item):
    path, name = item[1]["test"].split("::")
    source = (REPO_ROOT / path).read_text()
    assert re.search(rf"^def {re.escape(name)}\(", source, re.M), f"{path} has no test {name}"


def test_every_paper_config_is_listed():
    listed = {entry["config"] for _, entry in CONFIG_ENTRIES}
    papers = {str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "configs").rglob("paper*.yaml")}
    assert papers, "no paper config found"
    assert papers <= listed, f"paper configs missing from docs/paper_protocols.yaml: {sorted(papers - listed)}"


def test_the_rendered_markdown_is_up_to_date():
    assert (REPO_ROOT / "docs" / "paper_protocols.md").read_text() == protocols.render(STAGES), \
        "docs/paper_protocols.md is stale: run python docs/protocols.py"


def test_lookup_reads_dotted_keys_list_indices_and_products(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"a": {"b": [{"c": 3}, {"c": 4}]}, "x": 2, "y": 8}))
    entry = {"config": str(config), "key": "a.b.1.c"}
    assert protocols.config_value(entry, tmp_path) == 4
    assert protocols.config_value({"config": str(config), "key": ["x", "y", "a.b.0.c"]}, tmp_path) == 48
    with pytest.raises(KeyError, match="no 'z'"):
        protocols.config_value({"config": str(config), "key": "a.z"}, tmp_path)
