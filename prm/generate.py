"""``make prm-generate``: paired prose + tactic proofs sampled for a statement set.

python -m prm.generate --config configs/prm/generate/default.yaml [--sampling.k 4 ...]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from leanloop.artifacts import MANIFEST, Manifest, describe_input, run_dir
from leanloop.paths import resolve_shared
from leanloop.prover.shards import SampleJournal, ShardError, merge_journals, owned, run_folder
from leanloop.sharding import MergeRefused, ShardSpecError, check_shards, process_shard, shard_record, shard_run
from leanloop.prover.statements import Statement, load_statement_set
from leanloop.jsonl import write_jsonl
from leanloop.tool import parse_config
from prm.config import GenerateConfig
from prm.label import GENERATE_STAGE, SAMPLES_FILE
from prm.paired import PairedFormatError, parse_paired, render_paired_prompt

# config keys that say which shard a process is, not what is sampled
NOT_HASHED = ("run", "shard", "merge_shards")


def trusted_declaration(statement: Statement) -> str:
    """The context (docstring, auxiliary declarations) with the target declaration: one Lean command
    sequence that ``statement sorry`` elaborates after the header (a docstring alone is no command)."""
    return "\n".join(p.strip("\n") for p in (statement.context, statement.statement) if p and p.strip())


def _generator(config: GenerateConfig):
    from leanloop.training.models import load_model, load_tokenizer

    tokenizer = load_tokenizer(config.model)
    stops = ["<|im_end|>", tokenizer.eos_token]
    if config.backend == "vllm":
        from leanloop.prover.generation import VLLMGenerator

        return VLLMGenerator(config.model.weights_location(), stops, config.vllm, dtype=config.model.dtype), tokenizer
    import torch

    from leanloop.prover.generation import TransformersGenerator

    if config.threads:
        torch.set_num_threads(config.threads)
    model = load_model(config.model, tokenizer=tokenizer)
    return TransformersGenerator(model.to("cuda" if torch.cuda.is_available() else "cpu"), tokenizer, stops), tokenizer


def rows_for(statement: Statement, attempts, generator_name: str) -> list[dict]:
    rows = []
    for number, attempt in enumerate(attempts):
        try:
            parse = f"ok ({len(parse_paired(attempt.text))} steps)"
        except PairedFormatError as error:
            parse = error.reason
        rows.append(
            {
                "name": statement.name,
                "theorem": statement.theorem,
                "attempt": number,
                "header": statement.header.strip("\n"),
                "statement": trusted_declaration(statement),
                "informal": statement.informal,
                "completion": attempt.text,
                "finish_reason": attempt.finish_reason,
                "num_tokens": attempt.num_tokens,
                "parse": parse,
                "generator": generator_name,
            }
        )
    return rows


def _stamp(folder: Path, fingerprint: dict) -> None:
    """Record what a run's (or shard's) samples are made with; refuse a folder made with another setup."""
    stamp = folder / "sampling.json"
    if stamp.is_file() and json.loads(stamp.read_text()) != fingerprint:
        raise ShardError(
            f"{folder} holds samples made with another model, statement set or sampling; "
            "choose another run name or delete the folder"
        )
    folder.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(fingerprint, indent=1))


def run(config: GenerateConfig, resolved_yaml: str = "", progress: bool = True) -> Path:
    """Sample the run (or this process's shard of it) and merge it, or merge its finished shards
    (``merge_shards``). Returns the run's folder (the shard's after a shard)."""
    from tqdm import tqdm

    folder = run_dir(GENERATE_STAGE, config.run)
    if config.shard and config.merge_shards:
        raise ShardSpecError("--shard samples one shard and --merge_shards merges them: pass one of the two")
    shard = None if config.merge_shards else process_shard(config.shard)
    statements = load_statement_set(config.statements)
    names = [s.name for s in statements]
    fingerprint = {
        "model": config.model.name,
        "statements": names,
        "sampling": config.sampling.record(),
        "system": config.system,
    }
    if config.merge_shards:
        check_shards(folder, config.merge_shards, asdict(config), NOT_HASHED, what="samples")
        _stamp(folder, fingerprint)
        return _merge(config, folder, names, config.merge_shards, resolved_yaml)
    work = run_folder(folder, shard)
    _stamp(work, fingerprint)
    (work / MANIFEST).unlink(missing_ok=True)
    (work / "config.yaml").write_text(resolved_yaml, encoding="utf-8")
    journal = SampleJournal(work, config.sampling.k)
    todo = [s for s in owned(statements, shard) if s.name not in journal.done]
    if todo:
        generator, tokenizer = _generator(config)
        desc = "[prm-generate]" + (f" shard {shard}" if shard else "")
        for statement in tqdm(todo, desc=desc, disable=not progress):
            prompt = render_paired_prompt(
                statement.header.strip("\n") + "\n\n" + trusted_declaration(statement),
                tokenizer,
                statement.informal,
                config.system,
            )
            (attempts,) = generator.sample_batch([prompt], [statement.name], config.sampling)
            journal.append(statement.name, rows_for(statement, attempts, config.model.name))
    if shard is None:
        return _merge(config, folder, names, 0, resolved_yaml)
    Manifest(
        stage=GENERATE_STAGE,
        run=shard_run(config.run, shard),
        seed=config.sampling.seed,
        counts={"statements": len(journal.done), "completions": sum(map(len, journal.done.values()))},
        extra={"shard": shard_record(shard, asdict(config), NOT_HASHED)},
    ).write(work)
    print(f"[prm-generate] shard {shard} done; merge the {shard.count} shards with --merge_shards {shard.count}")
    return work


def _merge(config: GenerateConfig, folder: Path, names: list[str], count: int, resolved_yaml: str) -> Path:
    """final/samples.jsonl and the manifest, from the run's journal (``count`` 0) or its shards'."""
    rows = merge_journals(folder, count, names, config.sampling.k)
    final = folder / "final"
    final.mkdir(parents=True, exist_ok=True)
    write_jsonl(final / SAMPLES_FILE, rows)
    (folder / "config.yaml").write_text(resolved_yaml, encoding="utf-8")
    parses = Counter("ok" if r["parse"].startswith("ok") else r["parse"] for r in rows)
    manifest = Manifest(
        stage=GENERATE_STAGE,
        run=config.run,
        seed=config.sampling.seed,
        counts={
            "statements": len(names),
            "completions": len(rows),
            "shards": count or 1,
            **{f"parse:{k}": v for k, v in parses.items()},
        },
        extra={"generator": config.model.name, "sampling": config.sampling.record()},
    )
    manifest.add_input("statements", resolve_shared(config.statements.path))
    if config.model.run_dir() is not None:
        manifest.inputs["generator"] = describe_input(config.model.run_dir() / "manifest.json")
    manifest.write(folder)
    print(f"[prm-generate] {len(rows)} completions of {len(names)} statements, parses {dict(parses)} -> {final}")
    return folder


def main(argv: list[str] | None = None) -> int:
    config, resolved = parse_config(GenerateConfig, argv, prog="python -m prm.generate")
    try:
        run(config, resolved)
    except (ShardError, MergeRefused) as error:
        print(f"prm.generate: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m prm.generate"))
