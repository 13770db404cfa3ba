"""The pretraining corpus: Lean sources, documentation, statements and accepted proofs as documents."""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tqdm import tqdm

from leanloop.artifacts import Manifest, resolve_artifact, resolve_run
from leanloop.corpus import held_out_names
from leanloop.jsonl import JsonlError, numbered_jsonl
from leanloop.paths import resolve_shared
from leanloop.tool import parse_config, run_parsed_tool
from pretrain.config import CorpusBuild, CorpusConfig

DOCUMENTS = "documents.parquet"
CORPUS_STAGE = "pretrain_corpus"


def collect_documents(config: CorpusConfig) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Documents and per-source counts from a corpus config (see module docstring)."""
    if config.prebuilt:
        return load_prebuilt(config.prebuilt, config.max_documents)
    counts: Counter = Counter()
    per_source: dict[str, int] = {}
    seen: set[str] = set()
    documents: list[dict[str, Any]] = []
    held_out = held_out_names(config.holdout) if config.holdout else set()
    extensions = tuple(config.extensions)

    def add(text: str, source: str, name: str | None) -> None:
        if not text.strip():
            counts["empty"] += 1
            return
        digest = hashlib.sha1(text.encode()).hexdigest()
        if digest in seen:
            counts["duplicate"] += 1
            return
        seen.add(digest)
        documents.append({"text": text, "source": source, "name": name})
        counts["kept"] += 1

    for folder_ref in config.text_dirs:
        folder = resolve_shared(folder_ref)
        if not folder.is_dir():
            raise FileNotFoundError(f"corpus text_dirs entry {folder_ref!r} is not a folder ({folder})")
        files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(extensions))
        per_source[folder_ref] = len(files)
        for file in tqdm(files, desc=f"read {folder.name}", unit="file", disable=len(files) < 200):
            try:
                text = file.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                counts["unreadable"] += 1
                print(f"[corpus] skipping non-UTF-8 file {file}", file=sys.stderr)
                continue
            add(text, f"{folder_ref}/{file.relative_to(folder)}", None)

    for source in config.jsonl:
        path = resolve_shared(source.path)
        if not path.is_file():
            raise FileNotFoundError(f"corpus jsonl entry {source.path!r} does not exist ({path})")
        rows = 0
        for line_no, row in numbered_jsonl(path, strict=False):
            rows += 1
            if isinstance(row, JsonlError):
                counts["malformed_json"] += 1
                print(f"[corpus] {path}:{line_no}: malformed JSON, skipped", file=sys.stderr)
                continue
            values = []
            for key in source.fields:
                optional = key.endswith("?")
                value = row.get(key.rstrip("?"))
                if isinstance(value, str) and value.strip():
                    values.append(value)
                elif not optional:
                    values = None
                    break
            if not values:
                counts["missing_field"] += 1
                continue
            name = row.get(source.name_field) if source.name_field else None
            if name and name in held_out:
                counts["held_out"] += 1
                continue
            add("\n\n".join(v.strip("\n") for v in values) + "\n", source.path, name)
        per_source[source.path] = rows
    if config.max_documents is not None:
        counts["over_max_documents"] = max(0, len(documents) - config.max_documents)
        documents = documents[: config.max_documents]
    out = {
        "documents": len(documents),
        "rows": dict(counts),
        "per_source": per_source,
        "characters": sum(len(d["text"]) for d in documents),
    }
    if config.holdout:
        out["holdout_theorems"] = len(held_out)  # named by the holdout corpus; rows.held_out were dropped
    return documents, out


def load_prebuilt(ref: str, max_documents: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import pyarrow.parquet as pq

    found = resolve_artifact(ref, CORPUS_STAGE, require_run=True)
    folder, manifest = found.run, found.manifest
    documents = pq.read_table(folder / DOCUMENTS).to_pylist()
    if max_documents is not None:
        documents = documents[:max_documents]
    return documents, {
        "documents": len(documents),
        "prebuilt": str(folder),
        "characters": sum(len(d["text"]) for d in documents),
        "built_counts": manifest.get("counts", {}),
    }


def is_validation(text: str, fraction: float) -> bool:
    """Stable split by content hash: a document lands on the same side in every run."""
    bucket = int(hashlib.sha1(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return bucket < fraction


def build(config: CorpusBuild, *, resolved: str | None = None, overwrite: bool = True) -> Path:
    """Write ``artifacts/pretrain_corpus/<run>/documents.parquet`` and its manifest (leanloop.tool's
    contract: old manifest first, new one last; with ``overwrite`` off a corpus built from this config
    is reused and one from another config refused)."""
    import yaml

    resolved = resolved or yaml.safe_dump(asdict(config), sort_keys=False, allow_unicode=True)
    return run_parsed_tool(CORPUS_STAGE, config, resolved, _build, run=config.run, overwrite=overwrite).run_dir


def _build(config: CorpusBuild, out: Path) -> Manifest:
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus = config.corpus
    documents, counts = collect_documents(corpus)
    pq.write_table(
        pa.Table.from_pylist(
            documents, schema=pa.schema([("text", pa.string()), ("source", pa.string()), ("name", pa.string())])
        ),
        out / DOCUMENTS,
    )
    manifest = Manifest(stage=CORPUS_STAGE, run=config.run, counts=counts)
    for ref in corpus.text_dirs:
        manifest.inputs[f"text_dir:{ref}"] = {"path": str(resolve_shared(ref)), "files": counts["per_source"][ref]}
    for source in corpus.jsonl:
        manifest.add_input(f"jsonl:{source.path}", resolve_shared(source.path))
    if corpus.holdout:
        manifest.add_input("holdout", resolve_run(corpus.holdout, "data"))
    print(f"[corpus] {counts['documents']} documents, {counts['characters']:,} characters -> {out}")
    return manifest


def main(argv: list[str] | None = None) -> Path:
    """``python -m pretrain.documents --config configs/pretrain/corpus/X.yaml [--run NAME]``"""
    config, resolved = parse_config(
        CorpusBuild,
        argv,
        prog="python -m pretrain.documents",
        overwrite=True,
        description="build a pretraining corpus (documents.parquet + manifest.json)",
    )
    return build(config, resolved=resolved, overwrite=config.overwrite)


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m pretrain.documents"))
