"""``make prm-generate``: paired prose + tactic proofs sampled for a statement set.

    python -m prm.generate --config configs/prm/generate/default.yaml [--sampling.k 4 ...]

Through the prover sampler (:mod:`leanloop.prover.generation`: transformers on CPU/GPU, vLLM with
the ``gpu`` extra) and its resumable shards (:mod:`leanloop.prover.shards`): each shard appends one
statement's k completions at once and a restarted run skips finished statements;
``--shard_index i --shard_count n`` (or a SLURM / cluster.submit array) picks the shard, and the
shard that completes the set merges ``final/samples.jsonl`` in statement order. Each row holds the
raw completion and whether it parses (``parse``: ok or the rejection reason), so prm-label counts
format rejections instead of losing them.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from leanloop.artifacts import Manifest, describe_input, run_dir
from leanloop.paths import resolve_shared
from leanloop.prover.shards import ShardError, ShardFile, merge_shards, shard_from_env
from leanloop.prover.statements import Statement, load_statement_set
from leanloop.jsonl import write_jsonl
from leanloop.tool import parse_config
from prm.config import GenerateConfig
from prm.label import SAMPLES_FILE, SAMPLES_STAGE
from prm.paired import PairedFormatError, parse_paired, render_paired_prompt


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
        rows.append({"name": statement.name, "theorem": statement.theorem, "attempt": number,
                     "header": statement.header.strip("\n"), "statement": trusted_declaration(statement),
                     "informal": statement.informal, "completion": attempt.text, "finish_reason": attempt.finish_reason,
                     "num_tokens": attempt.num_tokens, "parse": parse, "generator": generator_name})
    return rows


def run(config: GenerateConfig, resolved_yaml: str = "", progress: bool = True) -> Path:
    from tqdm import tqdm

    folder = run_dir(SAMPLES_STAGE, config.run)
    statements = load_statement_set(config.statements)
    names = [s.name for s in statements]
    fingerprint = {"model": config.model.name, "statements": names, "sampling": config.sampling.record(),
                   "system": config.system}
    stamp = folder / "sampling.json"
    if stamp.is_file() and json.loads(stamp.read_text()) != fingerprint:
        raise ShardError(f"{folder} holds samples made with another model, statement set or sampling; "
                         "choose another run name or delete the folder")
    folder.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(fingerprint, indent=1))
    (folder / "config.yaml").write_text(resolved_yaml, encoding="utf-8")
    spec = shard_from_env(config.shard_index, config.shard_count)
    shard = ShardFile(folder / "shards" / spec.file_name(), config.sampling.k)
    todo = [s for s in spec.select(statements) if s.name not in shard.done]
    if todo:
        generator, tokenizer = _generator(config)
        for statement in tqdm(todo, desc=f"[prm-generate] shard {spec.index}/{spec.count}", disable=not progress):
            prompt = render_paired_prompt(statement.header.strip("\n") + "\n\n" + trusted_declaration(statement), tokenizer,
                                          statement.informal, config.system)
            (attempts,) = generator.sample_batch([prompt], [statement.name], config.sampling)
            shard.append(statement.name, rows_for(statement, attempts, config.model.name))
    try:
        rows = merge_shards(folder / "shards", spec.count, names, config.sampling.k)
    except ShardError as error:
        print(f"[prm-generate] shard {spec.index} done; not merged yet: {error}")
        return folder
    final = folder / "final"
    final.mkdir(exist_ok=True)
    write_jsonl(final / SAMPLES_FILE, rows)
    parses = Counter("ok" if r["parse"].startswith("ok") else r["parse"] for r in rows)
    manifest = Manifest(stage=SAMPLES_STAGE, run=config.run, seed=config.sampling.seed,
                        counts={"statements": len(names), "completions": len(rows), "shards": spec.count,
                                **{f"parse:{k}": v for k, v in parses.items()}},
                        extra={"generator": config.model.name, "sampling": config.sampling.record()})
    manifest.add_input("statements", resolve_shared(config.statements.path))
    if config.model.run_dir() is not None:
        manifest.inputs["generator"] = describe_input(config.model.run_dir() / "manifest.json")
    manifest.write(folder)
    print(f"[prm-generate] {len(rows)} completions of {len(names)} statements, parses {dict(parses)} -> {final}")
    return folder


def main(argv: list[str] | None = None) -> None:
    config, resolved = parse_config(GenerateConfig, argv, prog="python -m prm.generate")
    run(config, resolved)


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m prm.generate"))
