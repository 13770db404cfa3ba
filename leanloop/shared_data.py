"""``make shared-data``: the recorded Lean data folder (``../shared/data``, ``LEANLOOP_SHARED_DATA``)
fetched from its public sources at the commits its ``README.md`` pins.

:data:`SOURCES` lists the files the folder holds as byte-for-byte copies (repository, pinned commit,
path there, path here). Each repository is cloned once (bare, blobs on demand) from ``--git_base``
(GitHub by default; a folder of mirrors works the same), the pinned commit is resolved, and each
file is written where it is missing. A file already there is compared, never overwritten: a
different one is reported. :data:`DERIVED` are re-packagings (concatenated, joined, converted to
JSONL) that this tool does not remake; it lists the ones missing.
"""

from __future__ import annotations

import fnmatch
import io
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from leanloop.paths import REPO_ROOT


@dataclass(frozen=True)
class Source:
    """One copied file or folder of the data README: ``repo @ commit : path`` -> ``dest``."""

    dest: str
    repo: str
    commit: str
    path: str
    include: tuple[str, ...] = ()
    """Globs (on file names) a folder's files must match; empty: every file."""


REPL = "leanprover-community/repl"
DSP = "deepseek-ai/DeepSeek-Prover-V1.5"
GOEDEL = "Goedel-LM/Goedel-Prover-V2"
REPL_TESTS = ("*.in", "*.expected.out", "*.lean")
# the byte-for-byte copies of ../shared/data/README.md (its tables: "source repo @ commit : path")
SOURCES: tuple[Source, ...] = (
    Source("lean_repl/repl_tests_HEAD_v4.33.0-rc2", REPL, "8948401ab492", "test", REPL_TESTS),
    Source("lean_repl/repl_tests_v4.15.0", REPL, "21966799da36", "test", REPL_TESTS),
    Source("lean_repl/repl_tests_v4.9.0", REPL, "d920817f334e", "test", REPL_TESTS),
    Source("lean_repl/kimina_lean_server_match", "project-numina/kimina-lean-server", "fb2393de3461", "tests/match"),
    Source("statements/minif2f_deepseek_prover_v1.5.jsonl", DSP, "2c4ba9119eef", "datasets/minif2f.jsonl"),
    Source("statements/proofnet_deepseek_prover_v1.5.jsonl", DSP, "2c4ba9119eef", "datasets/proofnet.jsonl"),
    Source("statements/minif2f_goedel_prover_v2_repaired.jsonl", GOEDEL, "2e9036e11846", "dataset/minif2f.jsonl"),
    Source("statements/matholympiadbench_goedel_prover_v2.jsonl", GOEDEL, "2e9036e11846", "dataset/MOBench.jsonl"),
    Source(
        "statements/proofnet_lean4_rahul3613.jsonl", "rahul3613/ProofNet-lean4", "6deae98b3895", "proofnet_lean4.jsonl"
    ),
    Source("lean_text/batteries_tests", "leanprover-community/batteries", "45f65c8b8292", "BatteriesTest"),
    Source(
        "lean_text/tpil_book_verso_sources",
        "leanprover/theorem_proving_in_lean4",
        "4e28129fdd58",
        "book/TPiL",
        ("*.lean",),
    ),
    Source("comparator/projects", "leanprover/comparator", "19e111e2", "tests/projects"),
)
# re-packaged from public sources (the README says how); not remade here
DERIVED: tuple[str, ...] = (
    "lean_repl/repl_io_pairs.jsonl",
    "lean_repl/kimina_match_pairs.jsonl",
    "lean_repl/kimina_lean_server_demo",
    "lean_repl/all_versions",
    "statements/minif2f_yangky11_lean4.jsonl",
    "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz",
    "candidates/kimina_prover_preview_minif2f_test_solved.jsonl",
    "candidates/kimina_prover_72b_minif2f_test_solved_0710_additional.jsonl",
    "candidates/apollo_deepseek_v2_split_prover_minif2f_test.jsonl.gz",
    "candidates/seed_prover_solved.jsonl.gz",
    "lean_text/reference_manual_lean_outputs.jsonl",
    "mathlib/mathlib_declarations.jsonl.gz",
    "tactic_states/steps.derived.jsonl",
    "tactic_states/std4_program_reconstruction.derived.jsonl",
)


@dataclass
class SharedDataConfig:
    out: str = str(REPO_ROOT.parent / "shared" / "data")
    """The data folder to fill (``LEANLOOP_SHARED_DATA`` points the project at another one)."""
    git_base: str = "https://github.com"
    """Where ``<owner>/<name>`` repositories are cloned from (a URL, or a folder of mirrors)."""
    cache: str = str(REPO_ROOT / "artifacts" / "shared_data_git")
    """Bare clones, kept for the next run."""


def _git(*args: str, cwd: Path | None = None, binary: bool = False) -> str | bytes:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    if done.returncode != 0:
        raise OSError(f"git {' '.join(args[:3])} failed: {done.stderr.decode(errors='replace').strip()[-300:]}")
    return done.stdout if binary else done.stdout.decode().strip()


def clone(repo: str, config: SharedDataConfig) -> Path:
    """A bare clone of ``repo`` under ``cache`` (made once; blobs fetched as files are read)."""
    target = Path(config.cache) / (repo.replace("/", "__") + ".git")
    if not (target / "HEAD").is_file():
        base = config.git_base.rstrip("/")
        url = f"{base}/{repo}" if "://" in base else str(Path(base) / repo)
        target.parent.mkdir(parents=True, exist_ok=True)
        _git("clone", "--quiet", "--bare", "--filter=blob:none", url, str(target))
    return target


def files_at(git_dir: Path, source: Source) -> dict[str, bytes]:
    """``relative name -> bytes`` of a source at its pinned commit (a file: its own name, '')."""
    try:
        commit = _git("--git-dir", str(git_dir), "rev-parse", "--verify", "--quiet", f"{source.commit}^{{commit}}")
    except OSError:
        raise OSError(f"{source.repo} has no commit {source.commit} (pinned for {source.dest})") from None
    archive = _git("--git-dir", str(git_dir), "archive", "--format=tar", commit, "--", source.path, binary=True)
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:  # type: ignore[arg-type]
        for member in tar.getmembers():
            if not member.isfile():
                continue
            name = "" if member.name == source.path else member.name[len(source.path) + 1 :]
            if name and source.include and not any(fnmatch.fnmatch(Path(name).name, g) for g in source.include):
                continue
            out[name] = tar.extractfile(member).read()  # type: ignore[union-attr]
    if not out:
        raise OSError(f"{source.repo} @ {source.commit} has no {source.path} (pinned for {source.dest})")
    return out


def fetch(config: SharedDataConfig) -> dict[str, list[str]]:
    """Fill ``out`` from :data:`SOURCES`: ``{"written": [...], "same": [...], "different": [...],
    "derived_missing": [...]}`` (paths under ``out``)."""
    from tqdm.auto import tqdm

    out = Path(config.out)
    result: dict[str, list[str]] = {"written": [], "same": [], "different": [], "derived_missing": []}
    clones: dict[str, Path] = {}
    for source in tqdm(SOURCES, desc="shared data", unit="source"):
        if source.repo not in clones:
            clones[source.repo] = clone(source.repo, config)
        for name, data in files_at(clones[source.repo], source).items():
            target = out / source.dest / name if name else out / source.dest
            shown = str(target.relative_to(out))
            if target.is_file():
                result["same" if target.read_bytes() == data else "different"].append(shown)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            result["written"].append(shown)
    result["derived_missing"] = [d for d in DERIVED if not (out / d).exists()]
    return result


def main(argv: list[str] | None = None) -> int:
    from leanloop.tool import parse_config

    config, _ = parse_config(
        SharedDataConfig,
        argv,
        prog="python -m leanloop.shared_data",
        description="fetch the recorded Lean data's copied files from their pinned commits",
    )
    result = fetch(config)
    print(
        f"{config.out}: {len(result['written'])} files written, {len(result['same'])} already the same, "
        f"{len(result['different'])} different (kept as they are)"
    )
    for name in result["different"]:
        print(f"  different from its pinned source: {name}")
    if result["derived_missing"]:
        print(
            f"{len(result['derived_missing'])} derived files are not made here (their README rows say how they "
            "were re-packaged): " + ", ".join(result["derived_missing"])
        )
    return 1 if result["different"] else 0


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    sys.exit(cli_entry(main, prog="python -m leanloop.shared_data"))
