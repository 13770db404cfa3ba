"""Sample k attempts per statement from a prover and write them as candidate JSONL for ``make data``.

python -m sft.sample --config configs/sft/sample/default.yaml [--sampling.k 8 ...]
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from leanloop.artifacts import MANIFEST, Manifest, content_hash, describe_input, read_manifest, run_dir
from leanloop.paths import resolve_shared
from leanloop.training.models import ModelSpec
from leanloop.jsonl import write_jsonl
from leanloop.tool import CONFIG_FILE, comparable_config, parse_config
from sft.config import SampleConfig
from leanloop.prover.extract import extract_program
from leanloop.prover.generation import Attempt, SamplingConfig
from leanloop.prover.prompt import PromptConfig, render_prompt, stop_token, trained_prompt
from leanloop.prover.shards import SampleJournal, ShardError, merge_journals, owned, run_folder
from leanloop.prover.statements import Statement, load_statement_set  # noqa: F401 (load_statement_set: tests)
from leanloop.sharding import MergeRefused, Shard, ShardSpecError, check_shards, process_shard, shard_record, shard_run

STAGE = "sft_sample"
CANDIDATES = "candidates.jsonl"
# config keys that say which shard a process is, not what is sampled
NOT_HASHED = ("run", "shard", "merge_shards")


def sample_dir(run: str) -> Path:
    return run_dir(STAGE, run)


def prover_identity(spec: ModelSpec) -> dict[str, str | None]:
    """The checkpoint's identity: a run by its manifest's hash, a folder by its config's hash."""
    run = spec.run_dir()
    if run is not None:
        return describe_input(run)
    if spec.preset is not None:
        return {"path": f"preset:{spec.preset}", "hash": None}
    location = spec.weights_location()
    config = Path(location) / "config.json"
    return {"path": location, "hash": content_hash(config) if config.is_file() else None}


def prover_name(identity: dict[str, str | None]) -> str:
    return identity["path"] if not identity["hash"] else f"{identity['path']}@{identity['hash']}"


def candidate_rows(
    statement: Statement,
    attempts: list[Attempt],
    *,
    prover: dict,
    source: str,
    sampling: SamplingConfig,
    keep_completion: bool,
    allow_continuation: bool = True,
) -> list[dict]:
    """One candidate row per attempt (``allow_continuation``: raw prompts, see leanloop.prover.extract)."""
    rows = []
    for index, attempt in enumerate(attempts):
        extraction = extract_program(
            attempt.text, statement.prompt, statement.header, statement.theorem, allow_continuation
        )
        row = {
            "name": statement.name,
            "theorem": statement.theorem,
            "header": statement.header,
            "statement": statement.statement,
            "context": statement.context,
            "program": extraction.program,
            "source": source,
            "prover": prover_name(prover),
            "prover_path": prover["path"],
            "prover_hash": prover["hash"],
            "sampling": sampling.record(),
            "split": statement.split,
            "statement_set": statement.source,
            "attempt": index,
            "finish_reason": attempt.finish_reason,
            "num_tokens": attempt.num_tokens,
            "extraction": extraction.method,
            "extraction_reason": extraction.reason,
        }
        if keep_completion:
            row["completion"] = attempt.text
        rows.append(row)
    return rows


def _fingerprint(config: SampleConfig, prover: dict, names: list[str]) -> dict:
    """What must not change between the shards and resumptions of one run."""
    return {
        "prover": prover,
        "statements": names,
        "prompt": asdict(config.prompt),
        "sampling": config.sampling.record(),
        "source": config.source,
    }


def _check_fingerprint(folder: Path, fingerprint: dict) -> None:
    path = folder / "sampling.json"
    if path.is_file():
        recorded = json.loads(path.read_text())
        changed = sorted(k for k in fingerprint if recorded.get(k) != fingerprint[k])
        if changed:
            raise ShardError(
                f"{folder} holds samples made with a different {', '.join(changed)}; "
                "choose another run name or delete the folder"
            )
        return
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(fingerprint, indent=1))
    os.replace(tmp, path)


def make_generator(config: SampleConfig):
    """The configured generator and the tokenizer prompts are rendered with."""
    prompt = config.prompt or trained_prompt(config.model, config.prompt)
    if config.generation.backend == "vllm":
        from leanloop.training.models import load_tokenizer
        from leanloop.prover.generation import VLLMGenerator

        tokenizer = load_tokenizer(config.model)
        stops = [stop_token(prompt, tokenizer)]
        generator = VLLMGenerator(
            config.model.weights_location(), stops, config.generation.vllm, dtype=config.model.dtype
        )
        return generator, tokenizer
    import torch

    from leanloop.training.models import load_model, load_tokenizer
    from leanloop.prover.generation import TransformersGenerator

    if config.generation.threads:
        torch.set_num_threads(config.generation.threads)
    tokenizer = load_tokenizer(config.model)
    model = load_model(config.model, tokenizer=tokenizer)
    device = config.generation.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    stops = [stop_token(prompt, tokenizer), tokenizer.eos_token]
    return TransformersGenerator(model.to(device), tokenizer, stops), tokenizer


def sample_shard(
    config: SampleConfig,
    statements: list[Statement],
    shard: Shard | None,
    folder: Path,
    prover: dict,
    generator: tuple | None = None,
) -> SampleJournal:
    """Sample the statements of ``shard`` (all without one) not already in its journal, in the
    folder of the run or of the shard's run. ``generator``: a ``(generator, tokenizer)`` pair
    already loaded (else built from the config when needed)."""
    from tqdm import tqdm

    journal = SampleJournal(folder, config.sampling.k)
    if journal.dropped:
        print(
            f"[sample] {journal.path}: dropped {journal.dropped} rows of an unfinished statement; it is sampled again",
            file=sys.stderr,
        )
    todo = [s for s in owned(statements, shard) if s.name not in journal.done]
    if not todo:
        return journal
    generator, tokenizer = generator or make_generator(config)
    step = max(1, config.generation.statements_per_batch)
    with tqdm(total=len(todo), desc="sample" + (f" shard {shard}" if shard else ""), unit="stmt") as bar:
        for start in range(0, len(todo), step):
            batch = todo[start : start + step]
            prompts = [render_prompt(s.prompt, config.prompt, tokenizer) for s in batch]
            results = generator.sample_batch(prompts, [s.name for s in batch], config.sampling)
            for statement, attempts in zip(batch, results):
                journal.append(
                    statement.name,
                    candidate_rows(
                        statement,
                        attempts,
                        prover=prover,
                        source=config.source,
                        sampling=config.sampling,
                        keep_completion=config.keep_completion,
                        allow_continuation=config.prompt.style == "raw",
                    ),
                )
            bar.update(len(batch))
    return journal


def _finish_shard(config: SampleConfig, shard: Shard, folder: Path, journal: SampleJournal) -> None:
    """A finished shard's own manifest: an array resubmits only shards without one, and the merge
    checks each one's config and code version."""
    manifest = Manifest(
        stage=STAGE,
        run=shard_run(config.run, shard),
        seed=config.sampling.seed,
        counts={"statements": len(journal.done), "attempts": sum(map(len, journal.done.values()))},
    )
    manifest.extra = {"shard": shard_record(shard, asdict(config), NOT_HASHED)}
    manifest.write(folder)


def merge(config: SampleConfig, statements: list[Statement], count: int, folder: Path, prover: dict) -> Path:
    """Write final/candidates.jsonl and the manifest of the run from its own journal (``count`` 0)
    or from its ``count`` finished shards."""
    if count:
        check_shards(folder, count, asdict(config), NOT_HASHED, what="samples")
    rows = merge_journals(folder, count, [s.name for s in statements], config.sampling.k)
    final = folder / "final"
    final.mkdir(parents=True, exist_ok=True)
    target = write_jsonl(final / CANDIDATES, rows)
    failures = Counter(row["extraction_reason"] for row in rows if row["program"] is None)
    manifest = Manifest(stage=STAGE, run=config.run, seed=config.sampling.seed)
    manifest.add_input("statements", resolve_shared(config.statements.path))
    if config.model.run_dir() is not None:
        manifest.add_input("prover", config.model.run_dir())
    if config.statements.corpus is not None:
        from leanloop.artifacts import resolve_run

        manifest.add_input("corpus", resolve_run(config.statements.corpus, "data"))
    manifest.counts = {
        "statements": len(statements),
        "attempts": len(rows),
        "extracted": sum(row["program"] is not None for row in rows),
        "not_extracted": sum(failures.values()),
        "not_extracted_by_reason": dict(failures),
        "by_method": dict(Counter(row["extraction"] or "none" for row in rows)),
        "finish_reason": dict(Counter(row["finish_reason"] for row in rows)),
        "shards": count or 1,
    }
    manifest.extra = {
        "prover": prover,
        "sampling": config.sampling.record(),
        "prompt": asdict(config.prompt),
        "generation": config.generation.backend,
        "candidates": f"final/{CANDIDATES}",
    }
    (folder / CONFIG_FILE).write_text(_config_text(config))
    manifest.write(folder)
    return target


def _config_text(config: SampleConfig) -> str:
    """The run's config as config.yaml holds it (what a rerun is compared with); the shard a process
    ran does not change what the merged run holds."""
    import yaml

    return yaml.safe_dump(
        {k: v for k, v in asdict(config).items() if k not in ("shard", "merge_shards")},
        sort_keys=False,
        allow_unicode=True,
    )


def _read(path: Path) -> str | None:
    return path.read_text() if path.is_file() else None


def run(config: SampleConfig, generator: tuple | None = None) -> Path | None:
    """Sample the run (or this process's shard of it), or merge its shards (``merge_shards``).
    Returns the run's candidates file, or None after a shard (the merge writes the file).
    ``generator``: see :func:`sample_shard` (a caller sampling several runs from one loaded model)."""
    folder = sample_dir(config.run)
    if config.shard and config.merge_shards:
        raise ShardSpecError("--shard samples one shard and --merge_shards merges them: pass one of the two")
    shard = None if config.merge_shards else process_shard(config.shard)
    statements = load_statement_set(config.statements)
    prover = prover_identity(config.model)
    config.prompt = trained_prompt(config.model, config.prompt)
    if config.merge_shards:  # refused before the run folder is touched
        check_shards(folder, config.merge_shards, asdict(config), NOT_HASHED, what="samples")
    # leanloop.tool's rule: a run finished with this config is skipped; otherwise its old manifest
    # goes before any output is rewritten
    if (
        shard is None
        and (folder / MANIFEST).is_file()
        and (folder / "final" / CANDIDATES).is_file()
        and comparable_config(_read(folder / CONFIG_FILE)) == comparable_config(_config_text(config))
    ):
        print(f"[sample] {folder} already finished with this config; skipping", file=sys.stderr)
        return folder / "final" / CANDIDATES
    fingerprint = _fingerprint(config, prover, [s.name for s in statements])
    if config.merge_shards:
        _check_fingerprint(folder, fingerprint)
        (folder / MANIFEST).unlink(missing_ok=True)
        return merge(config, statements, config.merge_shards, folder, prover)
    work = run_folder(folder, shard)
    # the sampling setup a journal was made with (another one is refused before anything is appended)
    _check_fingerprint(work, fingerprint)
    (work / MANIFEST).unlink(missing_ok=True)
    if shard is not None:
        (work / CONFIG_FILE).write_text(_config_text(config))
    journal = sample_shard(config, statements, shard, work, prover, generator)
    if shard is None:
        return merge(config, statements, 0, folder, prover)
    _finish_shard(config, shard, work, journal)
    print(
        f"[sample] shard {shard} is done; merge the {shard.count} shards with --merge_shards {shard.count}",
        file=sys.stderr,
    )
    return None


def main(argv: list[str] | None = None) -> int:
    config, _ = parse_config(SampleConfig, argv, "sft.sample", __doc__.splitlines()[0])
    try:
        target = run(config)
    except (ShardError, ShardSpecError, MergeRefused) as error:
        print(f"sft.sample: {error}", file=sys.stderr)
        return 2
    if target is not None:
        counts = json.loads((target.parent.parent / "manifest.json").read_text())["counts"]
        print(json.dumps({"candidates": str(target), **counts}, indent=1))
    return 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m sft.sample"))
